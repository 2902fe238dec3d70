import pytest

from broker.common.conf_file import (
    ConfError,
    get_bool,
    get_int,
    get_list,
    load_conf,
    parse_properties,
    write_properties,
)


def test_properties_syntax():
    text = "# comment\n! also comment\n\nbrokerName = broker-a\nlistenPort:10911\nnamesrvAddr=a:1;b:2\nflag\n"
    values = parse_properties(text)
    assert values == {"brokerName": "broker-a", "listenPort": "10911", "namesrvAddr": "a:1;b:2", "flag": ""}
    assert get_list(values, "namesrvAddr") == ["a:1", "b:2"]
    assert get_int(values, "listenPort", 0) == 10911 and get_int(values, "missing", 7) == 7


def test_overrides_and_errors(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=1\nautoCreateTopicEnable=maybe\n")
    values = load_conf(conf, {"listenPort": 2, "unset": None})
    assert values["listenPort"] == "2" and "unset" not in values
    with pytest.raises(ConfError, match="autoCreateTopicEnable"):
        get_bool(values, "autoCreateTopicEnable", True)
    with pytest.raises(ConfError, match="cannot read"):
        load_conf(tmp_path / "missing.conf")


def test_write_back_keeps_comments(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("# my broker\nbrokerName=a\nflushDiskType=ASYNC_FLUSH\n")
    write_properties(conf, {"flushDiskType": "SYNC_FLUSH", "newKey": "1"})
    assert conf.read_text() == "# my broker\nbrokerName=a\nflushDiskType=SYNC_FLUSH\nnewKey=1\n"
