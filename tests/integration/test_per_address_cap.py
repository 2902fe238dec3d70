"""One client address cannot take every connection (issue 31, §5): ``serverMaxConnectionsPerAddress``
on a real broker's and a real name server's port. Linux routes all of 127.0.0.0/8 to loopback, so
connections bound to 127.0.0.2 are a second client host.

Before the per-address cap (serverMaxConnections=40): 40 connections from 127.0.0.1 took every place
and 5 of 5 from 127.0.0.2 were refused. With serverMaxConnectionsPerAddress=10: 127.0.0.1 holds 10,
and 5 of 5 from 127.0.0.2 are admitted and served.
"""

from __future__ import annotations

import socket

from broker.common.codes import RequestCode
from broker.local_cluster import start_namesrv, write_conf
from tests.cluster import ONE_BROKER, cluster_fixture
from tests.integration.test_flood_limits import close_all, eof_count, host_port

OTHER_HOST = "127.0.0.2"
TOTAL_CAP, PER_ADDRESS_CAP = 40, 10
capped = cluster_fixture(
    ONE_BROKER,
    {"serverMaxConnections": TOTAL_CAP, "serverMaxConnectionsPerAddress": PER_ADDRESS_CAP},
    topics={"PerAddressTopic": 1},
)


def connect(addr: str, count: int, source: str = "127.0.0.1") -> list[socket.socket]:
    return [socket.create_connection(host_port(addr), 10, (source, 0)) for _ in range(count)]


def test_one_address_cannot_take_every_broker_connection(capped):
    capped.request(RequestCode.GET_BROKER_RUNTIME_INFO)  # the test's own client holds one place
    flood = connect(capped.broker_addr, TOTAL_CAP)
    others: list[socket.socket] = []
    try:
        others = connect(capped.broker_addr, 5, OTHER_HOST)
        refused = eof_count(flood, 3), eof_count(others, 1)
        # The test's client is one of 127.0.0.1's ten: 9 of the flood admitted, 31 refused;
        # another host still gets in.
        assert refused == (TOTAL_CAP - (PER_ADDRESS_CAP - 1), 0)
        assert capped.request(RequestCode.GET_BROKER_RUNTIME_INFO).ok  # those admitted are served
        assert f"the cap is {PER_ADDRESS_CAP} per address (serverMaxConnectionsPerAddress)" in "".join(
            capped.broker.output
        )
    finally:
        close_all(flood + others)


def test_a_freed_place_lets_the_same_address_in_again(capped):
    capped.request(RequestCode.GET_BROKER_RUNTIME_INFO)
    held = connect(capped.broker_addr, PER_ADDRESS_CAP - 1)
    try:
        assert eof_count(held, 1) == 0
        assert eof_count(connect(capped.broker_addr, 1), 2) == 1  # the eleventh from 127.0.0.1
        close_all(held[:3])
        again = connect(capped.broker_addr, 3)
        assert eof_count(again, 1) == 0  # the count went down as those closed
        close_all(again)
    finally:
        close_all(held)


def test_one_address_cannot_take_every_name_server_connection(tmp_path):
    conf = write_conf(
        tmp_path / "namesrv.conf",
        {"serverMaxConnections": TOTAL_CAP, "serverMaxConnectionsPerAddress": PER_ADDRESS_CAP},
    )
    namesrv = start_namesrv(conf)
    flood: list[socket.socket] = []
    others: list[socket.socket] = []
    try:
        flood = connect(namesrv.addr, TOTAL_CAP)
        others = connect(namesrv.addr, 5, OTHER_HOST)
        assert (eof_count(flood, 3), eof_count(others, 1)) == (TOTAL_CAP - PER_ADDRESS_CAP, 0)
        assert "(serverMaxConnectionsPerAddress)" in "".join(namesrv.output)
    finally:
        close_all(flood + others)
        assert namesrv.stop() == 0
