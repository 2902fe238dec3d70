"""RocketMQ's SQL92 message filter: parse once with lark, evaluate against message properties.

Semantics follow RocketMQ 4.9 (its filter module derives from ActiveMQ's selectors):
- three-valued logic: a comparison with a missing property is *unknown* (None); NOT unknown is
  unknown; ``x AND unknown`` is FALSE when x is FALSE, else unknown; ``x OR unknown`` is TRUE when
  x is TRUE, else unknown; only TRUE matches;
- ``IS NULL`` is TRUE exactly when the property is absent;
- ``<, <=, >, >=`` (and BETWEEN) are numeric: a literal operand must be a number (else the
  expression is refused), a property value that is not a number never matches;
- ``=`` / ``<>`` compare numbers numerically (a property "7" equals 7 and 7.0), strings exactly,
  booleans with TRUE/FALSE;
- ``IN`` lists string literals and compares the property's string value;
- ``BETWEEN a AND b`` with constant bounds is refused when a > b.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import LarkError, VisitError

Properties = Mapping[str, str]
Evaluator = Callable[[Properties], object]

GRAMMAR = r"""
?start: or_expr

?or_expr: and_expr
        | or_expr _OR and_expr               -> or_
?and_expr: not_expr
        | and_expr _AND not_expr             -> and_
?not_expr: _NOT not_expr                     -> not_
        | predicate
?predicate: value CMP_OP value              -> compare
        | value _BETWEEN value _AND value     -> between
        | value _NOT _BETWEEN value _AND value -> not_between
        | value _IN "(" string_list ")"      -> in_
        | value _NOT _IN "(" string_list ")"  -> not_in
        | value _IS _NULL                     -> is_null
        | value _IS _NOT _NULL                 -> is_not_null
        | value
?value: "(" or_expr ")"
        | PROPERTY                          -> prop
        | NUMBER                            -> number
        | "-" NUMBER                        -> negative
        | STRING                            -> string
        | TRUE                              -> true
        | FALSE                             -> false
string_list: STRING ("," STRING)*

_AND.2: /and(?![A-Za-z0-9_$.])/i
_OR.2: /or(?![A-Za-z0-9_$.])/i
_NOT.2: /not(?![A-Za-z0-9_$.])/i
_BETWEEN.2: /between(?![A-Za-z0-9_$.])/i
_IN.2: /in(?![A-Za-z0-9_$.])/i
_IS.2: /is(?![A-Za-z0-9_$.])/i
_NULL.2: /null(?![A-Za-z0-9_$.])/i
TRUE.2: /true(?![A-Za-z0-9_$.])/i
FALSE.2: /false(?![A-Za-z0-9_$.])/i
CMP_OP: "<>" | "<=" | ">=" | "=" | "<" | ">"
PROPERTY: /[A-Za-z_$][A-Za-z0-9_$.]*/
NUMBER: /(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?[lLdDfF]?/
STRING: /'(?:[^']|'')*'/

%import common.WS
%ignore WS
"""

_PARSER = Lark(GRAMMAR, parser="lalr", maybe_placeholders=False)

# Bounds on what a client may ask the broker to compile (issue 21, O5). RocketMQ sets none; here
# a subscription is parsed on the event loop, at about 5 us a character on a slow machine, so
# 4,096 characters hold it ~20 ms at most. The depth bound keeps the compiler and every message's
# evaluation (both recursive, one Python frame or more a level) far from Python's recursion
# limit: ``a=1 AND a=2 AND ...`` nests one level per AND, so it also bounds such chains (use IN).
MAX_SQL_LENGTH = 4096
MAX_SQL_DEPTH = 100
# What parsing costs is tokens (~12 us each with lark, unloaded): 4,096 characters of ``a=1`` terms
# are ~2,400 of them. Counting first, with one C-speed regex scan, keeps a parse near 10 ms.
MAX_SQL_TOKENS = 1024
_TOKEN = re.compile(r"'(?:[^']|'')*'|[A-Za-z_$][A-Za-z0-9_$.]*|\d[\w.]*|<>|<=|>=|\S")
_SHOWN = 200  # characters of an expression an error message repeats


class FilterSyntaxError(ValueError):
    """The expression is not valid RocketMQ SQL92 (the message says where and why)."""


class _Node:
    """A compiled sub-expression: ``evaluate(properties)`` plus what the compiler must know."""

    __slots__ = ("constant", "evaluate", "is_boolean", "text")

    def __init__(self, evaluate: Evaluator, text: str, *, constant=None, is_boolean: bool = False):
        self.evaluate, self.text, self.constant, self.is_boolean = evaluate, text, constant, is_boolean

    @property
    def is_constant(self) -> bool:
        return self.constant is not None


def _number_of(value) -> float | int | None:
    """A property string or literal as a number, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        pass
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _equal(lv, rv) -> bool | None:
    if lv is None or rv is None:
        return None
    if isinstance(lv, bool) or isinstance(rv, bool):
        as_bool = {"true": True, "false": False}
        lb = as_bool.get(lv.lower()) if isinstance(lv, str) else lv
        rb = as_bool.get(rv.lower()) if isinstance(rv, str) else rv
        return lb is rb if isinstance(lb, bool) and isinstance(rb, bool) else False
    if isinstance(lv, str) and isinstance(rv, str):
        return lv == rv
    ln, rn = _number_of(lv), _number_of(rv)
    return ln is not None and rn is not None and ln == rn


_ORDER = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _ordered(op: str, lv, rv) -> bool | None:
    if lv is None or rv is None:
        return None
    ln, rn = _number_of(lv), _number_of(rv)
    if ln is None or rn is None:
        return None  # RocketMQ raises on non-numeric operands; the message does not match
    return _ORDER[op](ln, rn)


def _junction(left: _Node, right: _Node, decisive: bool) -> Evaluator:
    """SQL's three-valued AND (``decisive`` False) and OR (``decisive`` True): either side's
    decisive value decides, without evaluating the right side when the left one has; otherwise
    NULL (None) when either side is NULL, else the other value."""
    le, re_ = left.evaluate, right.evaluate

    def evaluate(props):
        lv = le(props)
        if lv is decisive:
            return decisive
        rv = re_(props)
        if rv is decisive:
            return decisive
        return None if lv is None or rv is None else not decisive

    return evaluate


def _and(left: _Node, right: _Node) -> Evaluator:
    return _junction(left, right, decisive=False)


def _or(left: _Node, right: _Node) -> Evaluator:
    return _junction(left, right, decisive=True)


def _not(inner: Evaluator) -> Evaluator:
    def evaluate(props):
        value = inner(props)
        return None if value is None else not value

    return evaluate


def _as_boolean(node: _Node) -> _Node:
    """A property used as a condition on its own (``WHERE flag``) is TRUE when it reads "true"."""
    if node.is_boolean:
        return node
    if node.is_constant:
        raise FilterSyntaxError(f"'{node.text}' is not a boolean expression")
    inner = node.evaluate

    def evaluate(props):
        value = inner(props)
        return None if value is None else str(value).lower() == "true"

    return _Node(evaluate, node.text, is_boolean=True)


def _check_orderable(node: _Node) -> None:
    """Only numbers (or properties holding them) can be ordered: refuse other constants early."""
    if node.is_boolean or isinstance(node.constant, str):
        raise FilterSyntaxError(f"Value '{node.text}' cannot be compared with <, <=, > or >=")


@v_args(inline=True)
class _Compiler(Transformer):
    def prop(self, token: Token) -> _Node:
        name = str(token)
        return _Node(lambda props: props.get(name), name)

    def number(self, token: Token) -> _Node:
        return self._number_node(str(token), 1)

    def negative(self, token: Token) -> _Node:
        return self._number_node(str(token), -1)

    @staticmethod
    def _number_node(text: str, sign: int) -> _Node:
        digits = text.rstrip("lLdDfF")
        is_decimal = any(c in digits for c in ".eE") or text[-1] in "dDfF"
        value = sign * (float(digits) if is_decimal else int(digits))
        return _Node(lambda props: value, ("-" if sign < 0 else "") + text, constant=value)

    def string(self, token: Token) -> _Node:
        value = str(token)[1:-1].replace("''", "'")
        return _Node(lambda props: value, str(token), constant=value)

    def true(self, _token) -> _Node:
        return _Node(lambda props: True, "TRUE", constant=True, is_boolean=True)

    def false(self, _token) -> _Node:
        return _Node(lambda props: False, "FALSE", constant=False, is_boolean=True)

    def string_list(self, *tokens: Token) -> list[str]:
        return [str(t)[1:-1].replace("''", "'") for t in tokens]

    def compare(self, left: _Node, op_token: Token, right: _Node) -> _Node:
        op = str(op_token)
        le, re_ = left.evaluate, right.evaluate
        text = f"{left.text} {op} {right.text}"
        if op in _ORDER:
            _check_orderable(left)
            _check_orderable(right)
            return _Node(lambda props: _ordered(op, le(props), re_(props)), text, is_boolean=True)
        equal = lambda props: _equal(le(props), re_(props))  # noqa: E731
        return _Node(equal if op == "=" else _not(equal), text, is_boolean=True)

    def between(self, value: _Node, low: _Node, high: _Node) -> _Node:
        for node in (value, low, high):
            _check_orderable(node)
        if low.is_constant and high.is_constant and low.constant > high.constant:
            raise FilterSyntaxError(
                f"Illegal values of between, left value({low.text}) must be less than or equal to "
                f"right value({high.text})"
            )
        ge = _Node(lambda p: _ordered(">=", value.evaluate(p), low.evaluate(p)), "", is_boolean=True)
        le = _Node(lambda p: _ordered("<=", value.evaluate(p), high.evaluate(p)), "", is_boolean=True)
        return _Node(_and(ge, le), f"{value.text} BETWEEN {low.text} AND {high.text}", is_boolean=True)

    def not_between(self, value: _Node, low: _Node, high: _Node) -> _Node:
        for node in (value, low, high):
            _check_orderable(node)
        lt = _Node(lambda p: _ordered("<", value.evaluate(p), low.evaluate(p)), "", is_boolean=True)
        gt = _Node(lambda p: _ordered(">", value.evaluate(p), high.evaluate(p)), "", is_boolean=True)
        return _Node(_or(lt, gt), f"{value.text} NOT BETWEEN {low.text} AND {high.text}", is_boolean=True)

    def in_(self, value: _Node, items: list[str]) -> _Node:
        return self._membership(value, items, negate=False)

    def not_in(self, value: _Node, items: list[str]) -> _Node:
        return self._membership(value, items, negate=True)

    @staticmethod
    def _membership(value: _Node, items: list[str], negate: bool) -> _Node:
        if value.is_constant or value.is_boolean:
            raise FilterSyntaxError(f"Expected a property for In expression, got: {value.text}")
        wanted, read = frozenset(items), value.evaluate

        def evaluate(props):
            actual = read(props)
            return None if actual is None else (actual in wanted) != negate

        return _Node(evaluate, f"{value.text} {'NOT IN' if negate else 'IN'} (...)", is_boolean=True)

    def is_null(self, value: _Node) -> _Node:
        read = value.evaluate
        return _Node(lambda props: read(props) is None, f"{value.text} IS NULL", is_boolean=True)

    def is_not_null(self, value: _Node) -> _Node:
        read = value.evaluate
        return _Node(lambda props: read(props) is not None, f"{value.text} IS NOT NULL", is_boolean=True)

    def and_(self, left: _Node, right: _Node) -> _Node:
        left, right = _as_boolean(left), _as_boolean(right)
        return _Node(_and(left, right), f"({left.text}) AND ({right.text})", is_boolean=True)

    def or_(self, left: _Node, right: _Node) -> _Node:
        left, right = _as_boolean(left), _as_boolean(right)
        return _Node(_or(left, right), f"({left.text}) OR ({right.text})", is_boolean=True)

    def not_(self, inner: _Node) -> _Node:
        inner = _as_boolean(inner)
        return _Node(_not(inner.evaluate), f"NOT ({inner.text})", is_boolean=True)


class SqlExpression:
    """A compiled SQL92 filter: ``matches(properties)`` is True only when it evaluates to TRUE."""

    __slots__ = ("_evaluate", "source")

    def __init__(self, source: str, evaluate: Evaluator) -> None:
        self.source, self._evaluate = source, evaluate

    def evaluate(self, properties: Properties) -> bool | None:
        # The grammar only compiles boolean expressions, so the top node answers TRUE, FALSE or NULL.
        return self._evaluate(properties)  # type: ignore[return-value]

    def matches(self, properties: Properties) -> bool:
        try:
            return self._evaluate(properties) is True
        except (TypeError, ValueError, ArithmeticError):
            return False


def compile_sql92(expression: str | None) -> SqlExpression:
    """Parse ``expression``; raise ``FilterSyntaxError`` with the reason when it is invalid,
    longer than MAX_SQL_LENGTH or nested deeper than MAX_SQL_DEPTH."""
    if expression is not None and not isinstance(expression, str):
        raise FilterSyntaxError(f"the SQL92 expression is a {type(expression).__name__}, not text")
    too_long = sql_length_problem(expression or "")
    if too_long:  # before any other work
        raise FilterSyntaxError(too_long)
    source = (expression or "").strip()
    if not source:
        raise FilterSyntaxError("the SQL92 expression is empty")
    shown = _shown(source)
    tokens = sum(1 for _ in _TOKEN.finditer(source))
    if tokens > MAX_SQL_TOKENS:
        raise FilterSyntaxError(
            f"the SQL92 expression has {tokens} tokens (names, values, operators), "
            f"more than the {MAX_SQL_TOKENS} allowed"
        )
    try:
        tree = _PARSER.parse(source)
        depth = _depth(tree)
        if depth > MAX_SQL_DEPTH:
            raise FilterSyntaxError(
                f"the SQL92 expression nests {depth} levels deep, more than the {MAX_SQL_DEPTH} allowed"
            )
        node = _as_boolean(_Compiler().transform(tree))
    except VisitError as exc:
        if isinstance(exc.orig_exc, FilterSyntaxError):
            raise exc.orig_exc from None
        raise FilterSyntaxError(f"invalid SQL92 expression {shown}: {exc.orig_exc}") from None
    except LarkError as exc:
        raise FilterSyntaxError(f"invalid SQL92 expression {shown}: {_first_line(exc)}") from None
    return SqlExpression(source, node.evaluate)


def sql_length_problem(expression: str) -> str | None:
    if len(expression) <= MAX_SQL_LENGTH:
        return None
    return f"the SQL92 expression has {len(expression)} characters, more than the {MAX_SQL_LENGTH} allowed"


def _depth(tree: Tree) -> int:
    """How deep the parse tree nests, counted without recursion (the tree may be very deep)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tree))
    return deepest


def _shown(source: str) -> str:
    if len(source) <= _SHOWN:
        return repr(source)
    return repr(source[:_SHOWN]) + f"... ({len(source)} characters)"


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
