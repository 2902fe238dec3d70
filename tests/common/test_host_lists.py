"""RocketMQ's ``host:port;host:port`` lists (namesrvAddr, controllerAddr, ``-n``, ``-a``): one
parser, the same answer wherever a list is read."""

import pytest

from broker.client.admin.controller import controller_addresses
from broker.client.admin.core import AdminCore
from broker.client.errors import MQClientError
from broker.client.instance import MQClientInstance
from broker.common.broker_config_keys import AddrList
from broker.common.hosts import MAX_LIST_HOSTS, parse_host_list


def test_a_list_keeps_its_addresses_in_order_ipv6_in_brackets():
    text = " 127.0.0.1:9876;[::1]:9877 ; ns.example:9878;"  # a trailing ';' as Java's split drops it
    assert parse_host_list(text) == ["127.0.0.1:9876", "[::1]:9877", "ns.example:9878"]
    assert parse_host_list("") == [] and parse_host_list("  ") == []


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("127.0.0.1:9876;;127.0.0.2:9876", "empty entry"),
        (";127.0.0.1:9876", "empty entry"),
        ("127.0.0.1", "'127.0.0.1' has no port"),
        ("127.0.0.1:x", "'127.0.0.1:x' has no port"),
        ("127.0.0.1:0", "port 0 is not in 1-65535"),
        ("127.0.0.1:65536", "port 65536 is not in 1-65535"),
        (":9876", "':9876' has no host"),
        ("::1:9876", "IPv6 address in brackets"),
        ("[::1:9876", "IPv6 address in brackets"),
        ("h" * 300 + ":1", "longer than 255"),
        (";".join(f"10.0.0.{i}:1" for i in range(MAX_LIST_HOSTS + 1)), f"more than {MAX_LIST_HOSTS}"),
    ],
)
def test_a_bad_list_is_refused_saying_what_is_wrong(text, says):
    with pytest.raises(ValueError, match="namesrvAddr") as refused:
        parse_host_list(text, "namesrvAddr")
    assert says in str(refused.value)


def test_every_reader_of_a_list_uses_the_one_parser():
    bad = "127.0.0.1:9876;;127.0.0.1:65536"
    with pytest.raises(ValueError, match="empty entry"):
        AddrList().parse(bad)  # broker.conf's namesrvAddr and controllerAddr
    with pytest.raises(MQClientError, match="empty entry"):
        controller_addresses(bad)  # mqadmin -a
    with pytest.raises(MQClientError, match="empty entry"):
        AdminCore(bad)  # mqadmin -n, the console
    with pytest.raises(MQClientError, match="empty entry"):
        MQClientInstance(bad, "hosts-test")  # producers and consumers
    assert AddrList().parse("[::1]:9876;127.0.0.1:9876") == ["[::1]:9876", "127.0.0.1:9876"]
