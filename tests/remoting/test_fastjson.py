"""The fastjson dialect: ``dumps`` writes bodies as RocketMQ's Java peers do, ``loads`` reads them."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.common import fastjson


def test_null_fields_are_left_out_at_every_depth():
    route = {
        "orderTopicConf": None,
        "queueDatas": [{"brokerName": "broker-a", "perm": 6, "extra": None}],
        "filterServerTable": {},
    }
    assert fastjson.dumps(route) == (
        b'{"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6}]}'
    )


def test_integer_map_keys_are_written_bare_in_numeric_order():
    broker_data = {"cluster": "c", "brokerName": "b", "brokerAddrs": {10: "x:2", 0: "x:1", 2: "x:3"}}
    assert fastjson.dumps(broker_data) == (
        b'{"brokerAddrs":{0:"x:1",2:"x:3",10:"x:2"},"brokerName":"b","cluster":"c"}'
    )
    assert fastjson.dumps({"offsetTable": {"t@g": {1: 5, 0: -1}}}) == b'{"offsetTable":{"t@g":{0:-1,1:5}}}'


def test_fields_in_name_order_and_typed_as_java_writes_them():
    assert fastjson.dumps({"writeQueueNums": 4, "order": False, "consumeTps": 0.0, "perm": 6}) == (
        b'{"consumeTps":0.0,"order":false,"perm":6,"writeQueueNums":4}'
    )
    assert fastjson.dumps({"topicList": {"b", "a"}}) == b'{"topicList":["a","b"]}'


def test_object_keyed_maps_write_the_key_object_itself():
    entries = [({"topic": "t", "brokerName": "b", "queueId": 1}, {"maxOffset": 3, "minOffset": 0})]
    body = fastjson.dumps({"offsetTable": fastjson.ObjectKeyMap(entries)})
    key_object = b'{"brokerName":"b","queueId":1,"topic":"t"}'
    assert body == b'{"offsetTable":{' + key_object + b':{"maxOffset":3,"minOffset":0}}}'
    key = (("brokerName", "b"), ("queueId", 1), ("topic", "t"))
    assert fastjson.loads(body) == {"offsetTable": {key: {"maxOffset": 3, "minOffset": 0}}}


def test_strings_are_escaped_and_keys_must_be_str_or_int():
    assert fastjson.dumps({"remark": 'say "hi",\n1:'}) == b'{"remark":"say \\"hi\\",\\n1:"}'
    try:
        fastjson.dumps({1.5: "x"})
    except TypeError as exc:
        assert "float" in str(exc)
    else:
        raise AssertionError("a float key was written")


def test_loads_never_takes_text_inside_a_string_for_a_key():
    # A value that looks like a bare key must not change how the body's real keys come back.
    assert fastjson.loads(b'{0:"a,1:b",1:"{2:c"}') == {"0": "a,1:b", "1": "{2:c"}


_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8)
_scalars |= st.floats(allow_nan=False, allow_infinity=False)


def _maps(values):
    """Java maps are keyed by one type: strings (beans, String maps) or numbers (Integer, Long)."""
    by_name = st.dictionaries(st.text(max_size=6), values, max_size=4)
    return by_name | st.dictionaries(st.integers(-(2**31), 2**31 - 1), values, max_size=4)


_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | _maps(inner), max_leaves=20)


def _as_read_back(value):
    """What ``loads`` gives for a written value: no null entries, integer keys as strings."""
    if isinstance(value, dict):
        return {str(k): _as_read_back(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_as_read_back(v) for v in value]
    return value


@given(_maps(_values))
def test_what_dumps_writes_loads_reads_back(value):
    assert _same(fastjson.loads(fastjson.dumps(value)), _as_read_back(value))


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-15) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b and type(a) is type(b)


def _arrays(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _object_keyed(depth: int) -> bytes:  # read by the module's own parser, not orjson
    return b'{{"a":1}:' + _arrays(depth - 1) + b"}"


def test_nesting_is_bounded_at_fastjsons_512_levels_without_recursion_errors():
    """Attack finding 7: past Python's stack the object-key parser raised RecursionError."""
    assert fastjson.loads(_arrays(512)) and fastjson.loads(_object_keyed(512))
    for body in (_object_keyed(513), _object_keyed(100_000), _arrays(1025), _arrays(100_000)):
        with pytest.raises(fastjson.JsonBodyError, match=r"deeper than fastjson reads \(512 levels\)"):
            fastjson.loads(body)


def test_whole_numbers_past_64_bits_stay_ints():
    assert fastjson.loads(b'{"a":1180591620717411303424,"b":-9223372036854775809,"c":1.5}') == {
        "a": 2**70,
        "b": -(2**63) - 1,
        "c": 1.5,
    }
    assert fastjson.loads(b"{1:1180591620717411303424}") == {"1": 2**70}  # a bare key too
    assert fastjson.loads(b'{"id":"12345678901234567890"}') == {"id": "12345678901234567890"}
    assert fastjson.dumps({"a": 2**70}) == b'{"a":1180591620717411303424}'  # and written back whole
