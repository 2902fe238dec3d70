"""The SQL92 filter: grammar, RocketMQ's three-valued semantics, refusals and the compile cache."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.common.filter import FilterCache, FilterSyntaxError, SqlMessageFilter, check_subscription
from broker.common.filter import compile_sql92 as compile_
from broker.common.message import MessageExt
from broker.common.message_codec import encode_message


@pytest.mark.parametrize(
    "expression, properties, expected",
    [
        ("a = 3", {"a": "3"}, True),
        ("a = 3", {"a": "3.0"}, True),
        ("a = 3", {}, None),
        ("a <> 3", {}, None),
        ("NOT a = 3", {}, None),
        ("a IS NULL", {}, True),
        ("a IS NOT NULL", {}, False),
        ("a IS NOT NULL", {"a": ""}, True),
        ("a > 2 AND b = 'x'", {"a": "1"}, False),  # FALSE AND unknown is FALSE
        ("a > 2 OR b = 'x'", {"a": "3"}, True),  # TRUE OR unknown is TRUE
        ("a > 2 OR b = 'x'", {"a": "1"}, None),
        ("a BETWEEN 1 AND 3", {"a": "3"}, True),
        ("a BETWEEN 1 AND 3", {"a": "3.5"}, False),
        ("a NOT BETWEEN 1 AND 3", {"a": "0"}, True),
        ("a BETWEEN -1.5 AND 0", {"a": "-1"}, True),
        ("a > 1", {"a": "abc"}, None),
        ("region IN ('eu', 'us')", {"region": "us"}, True),
        ("region NOT IN ('eu', 'us')", {"region": "us"}, False),
        ("region NOT IN ('eu')", {}, None),
        ("s = 'it''s'", {"s": "it's"}, True),
        ("s = 'EU'", {"s": "eu"}, False),
        ("flag = TRUE", {"flag": "true"}, True),
        ("flag", {"flag": "true"}, True),
        ("TRUE AND NOT FALSE", {}, True),
        ("(a = 1 OR a = 2) AND NOT (b IS NULL)", {"a": "2", "b": "x"}, True),
        ("x.y_z$ >= 1e1", {"x.y_z$": "10"}, True),
        ("a = 10L", {"a": "10"}, True),
        ("android = 1", {"android": "1"}, True),  # keywords only match whole words
        ("A between 0 AND 6 and REGION in ('eu')", {"A": "6", "REGION": "eu"}, True),
    ],
)
def test_evaluates_as_rocketmq(expression, properties, expected):
    compiled = compile_(expression)
    assert compiled.evaluate(properties) is expected
    assert compiled.matches(properties) is (expected is True)


@pytest.mark.parametrize(
    "expression, reason",
    [
        ("", "empty"),
        ("a >", "Unexpected"),
        ("a = 1 AND", "Unexpected"),
        ("(a = 1", "Unexpected"),
        ("a ! 1", "No terminal"),
        ("a > 'x'", "cannot be compared"),
        ("a < TRUE", "cannot be compared"),
        ("a BETWEEN 5 AND 1", "Illegal values of between"),
        ("5", "not a boolean expression"),
        ("'s' IN ('a')", "Expected a property"),
        ("a IN (1, 2)", "Unexpected"),
    ],
)
def test_invalid_expressions_are_refused_with_a_reason(expression, reason):
    with pytest.raises(FilterSyntaxError, match=reason):
        compile_(expression)


def test_check_subscription_tells_unsupported_from_unparsable():
    assert check_subscription("TAG", "a || b", False) is None
    assert check_subscription("SQL92", "a = 1", True) is None
    assert check_subscription("SQL92", "a = 1", False)[0] is True
    assert check_subscription("SQL92", "a =", True)[0] is False


def test_cache_compiles_once_per_subscription_version():
    cache = FilterCache()
    first = cache.get("g", "t", "a = 1", 1)
    assert cache.get("g", "t", "a = 1", 1) is first
    assert cache.compilations == 1
    assert cache.get("g", "t", "a = 2", 2) is not first
    assert cache.compilations == 2
    with pytest.raises(FilterSyntaxError):
        cache.get("g", "t", "a = = 2", 3)


def test_message_filter_reads_the_stored_properties():
    msg = MessageExt("T", b"body", properties={"a": "5", "TAGS": "x"}, store_host=("127.0.0.1", 10911))
    record = bytes(encode_message(msg))
    assert SqlMessageFilter(compile_("a > 4 AND TAGS = 'x'")).is_matched_by_commit_log(record)
    assert not SqlMessageFilter(compile_("a > 5")).is_matched_by_commit_log(record)
    assert not SqlMessageFilter(compile_("a > 4")).is_matched_by_commit_log(b"garbage")


values = st.one_of(st.none(), st.integers(-5, 5).map(str), st.sampled_from(["eu", "us", "x"]))


@given(
    a=values,
    b=values,
    low=st.integers(-5, 5),
    span=st.integers(0, 5),
    words=st.sets(st.sampled_from(["eu", "us", "x"]), min_size=1),
)
def test_matches_a_reference_three_valued_evaluation(a, b, low, span, words):
    high = low + span
    in_list = ", ".join(f"'{w}'" for w in sorted(words))
    expression = f"(a BETWEEN {low} AND {high} OR b IN ({in_list})) AND NOT (a = {low})"
    props = {k: v for k, v in (("a", a), ("b", b)) if v is not None}

    def number(value):
        try:
            return int(value)
        except (TypeError, ValueError):
            return None

    def and_(x, y):
        return False if False in (x, y) else (None if None in (x, y) else True)

    def or_(x, y):
        return True if True in (x, y) else (None if None in (x, y) else False)

    an = number(a)
    between = None if an is None else low <= an <= high
    membership = None if b is None else b in words
    equal = None if a is None else (an is not None and an == low)
    expected = and_(or_(between, membership), None if equal is None else not equal)
    assert compile_(expression).evaluate(props) is expected


sql_alphabet = st.sampled_from(
    ["a", "b", " ", "(", ")", "'", "=", "<", ">", "<>", "AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN",
     "1", "2.5", "-", ",", "TRUE", "x'y", "é", "\x00"]
)  # fmt: skip


@given(st.lists(sql_alphabet, max_size=12).map(" ".join), st.dictionaries(st.sampled_from("ab"), values))
def test_any_text_compiles_or_is_refused_cleanly(text, props):
    try:
        compiled = compile_(text)
    except FilterSyntaxError:
        return
    assert compiled.evaluate({k: v for k, v in props.items() if v is not None}) in (True, False, None)


def test_names_that_start_like_keywords_are_properties():
    compiled = compile_("in.x = 1 AND is$ = 2 AND nota IN ('a') AND true_flag = TRUE")
    assert compiled.matches({"in.x": "1", "is$": "2", "nota": "a", "true_flag": "true"})
