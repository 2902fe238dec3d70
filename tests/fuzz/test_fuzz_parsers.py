"""Hypothesis: the text parsers a client or an operator reaches (SQL92 filters, broker.conf and
its key table, request headers) answer any input with a value or their own documented error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.common import request_headers
from broker.common.conf_file import ConfError, parse_properties
from broker.common.filter import (
    MAX_SQL_LENGTH,
    FilterSyntaxError,
    SqlExpression,
    check_subscription,
    compile_sql92,
)
from broker.common.request_headers import CommandHeader, HeaderError
from broker.common.request_headers.send import decode_send_request
from broker.server import config_schema as schema
from broker.server.config import BrokerConfig
from tests.fuzz.budget import LONG, QUICK

# -- SQL92 ------------------------------------------------------------------------------------
TOKENS = [
    "a",
    "b.c",
    "$x",
    "1",
    "-2",
    "3.5e2",
    "'s'",
    "''''",
    "TRUE",
    "false",
    "NULL",
    "=",
    "<>",
    "<",
    ">=",
    "AND",
    "or",
    "NOT",
    "BETWEEN",
    "IN",
    "IS",
    "(",
    ")",
    ",",
    " ",
]
sql_like = st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join)
nested = st.builds(
    lambda depth, op: op * depth + "a = 1", st.integers(0, 600), st.sampled_from(["NOT ", "("])
)
chained = st.builds(
    lambda n, op: f" {op} ".join(["a = 1"] * n), st.integers(1, 400), st.sampled_from(["AND", "OR"])
)
sql_text = st.one_of(st.text(max_size=200), sql_like, nested, chained)


def _sql_case(source: str) -> None:
    try:
        expression = compile_sql92(source)
    except FilterSyntaxError as exc:
        assert len(str(exc)) < 1000  # the reason quotes the expression cut short
        return
    assert isinstance(expression, SqlExpression)
    assert expression.matches({"a": "1", "b.c": "x"}) in (True, False)  # evaluates without raising
    assert expression.matches({}) in (True, False)


@QUICK
@given(sql_text)
def test_any_text_compiles_or_is_a_filter_syntax_error(source):
    _sql_case(source)


@pytest.mark.slow
@LONG
@given(sql_text)
def test_any_text_compiles_or_is_a_filter_syntax_error_long(source):
    _sql_case(source)


@QUICK
@given(
    st.one_of(st.none(), st.text(max_size=50), st.integers(), st.lists(st.text(max_size=3), max_size=2)),
    st.one_of(st.none(), st.sampled_from(["TAG", "SQL92", "sql92", "XPATH", ""]), st.integers()),
    st.booleans(),
)
def test_any_subscription_is_accepted_or_refused_with_a_reason(expression, expression_type, sql_on):
    # What a heartbeat's JSON may carry, typed or not.
    verdict = check_subscription(expression_type, expression, sql_on)
    assert verdict is None or (isinstance(verdict[0], bool) and isinstance(verdict[1], str))


def test_an_expression_over_the_length_limit_is_refused_before_parsing():
    with pytest.raises(FilterSyntaxError, match=f"more than the {MAX_SQL_LENGTH}"):
        compile_sql92("a = 1 AND " * 1_000_000 + "b = 2")


# -- broker.conf --------------------------------------------------------------------------------
KEY_NAMES = sorted(schema.KEYS)
conf_line = st.one_of(
    st.text(max_size=60),
    st.builds(
        lambda k, sep, v: f"{k}{sep}{v}",
        st.sampled_from(KEY_NAMES),
        st.sampled_from(["=", ":", " = "]),
        st.one_of(
            st.text(max_size=30),
            st.sampled_from(["true", "0", "-1", "99999999999999999999", "ASYNC_FLUSH", "1;2", "", "1.5"]),
        ),
    ),
)
conf_text = st.lists(conf_line, max_size=12).map("\n".join)


def _conf_case(text: str) -> None:
    raw = parse_properties(text)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items())
    try:
        config = BrokerConfig.from_properties(raw)
    except ConfError:
        return
    assert isinstance(config, BrokerConfig)
    assert set(config.as_properties()) == set(schema.KEYS)  # every value formats back


@QUICK
@given(conf_text)
def test_any_conf_text_gives_a_config_or_a_conf_error(text):
    _conf_case(text)


@pytest.mark.slow
@LONG
@given(conf_text)
def test_any_conf_text_gives_a_config_or_a_conf_error_long(text):
    _conf_case(text)


@QUICK
@given(st.dictionaries(st.sampled_from(KEY_NAMES), st.text(max_size=20), max_size=4))
def test_any_update_is_typed_or_a_conf_error(updates):
    # UPDATE_BROKER_CONFIG's body, once parsed: the key table answers any value.
    try:
        schema.validate_update(updates)
    except ConfError:
        pass


# -- request headers ------------------------------------------------------------------------------
def _header_classes() -> list[type[CommandHeader]]:
    exported = (getattr(request_headers, name) for name in request_headers.__all__)
    return [
        c for c in exported if isinstance(c, type) and issubclass(c, CommandHeader) and c is not CommandHeader
    ]


HEADERS = _header_classes()
WIRE_NAMES = sorted({name for cls in HEADERS for name in cls.wire_names()} | set("abcdefghijklm"))
field_value = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        ["", "0", "-1", "2147483648", "9223372036854775808", "true", "FALSE", "null", "1.5", " 7"]
    ),
)
ext_fields = st.dictionaries(
    st.one_of(st.sampled_from(WIRE_NAMES), st.text(max_size=8)), field_value, max_size=12
)


@QUICK
@given(st.sampled_from(HEADERS), ext_fields)
def test_any_ext_fields_give_a_header_or_a_header_error(cls, fields):
    try:
        header = cls.from_ext_fields(fields)
    except HeaderError:
        return
    assert isinstance(header, cls)


@QUICK
@given(ext_fields)
def test_any_send_ext_fields_give_a_send_header_or_a_header_error(fields):
    try:
        decode_send_request(fields)
    except HeaderError:
        pass
