"""Adaptive busy polling: the loop keeps polling for a window after a read, then sleeps again."""

import asyncio

import pytest

from broker.common.conf_file import ConfError
from broker.remoting.busy_poll import BusyPoll
from broker.remoting.client import RemotingClient
from broker.remoting.command import create_request, response_to
from broker.remoting.server import RemotingServer
from broker.server.config import BrokerConfig

ECHO = 900


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def turns(count: int = 3) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def test_spins_until_the_window_passes_without_a_read():
    clock = FakeClock()
    poll = BusyPoll(0.001, asyncio.get_running_loop(), clock)
    assert not poll.spinning
    poll.touch()
    await turns()
    assert poll.spinning  # time has not moved: still inside the window
    clock.now += 0.0009
    await turns()
    assert poll.spinning
    clock.now += 0.0002
    await turns()
    assert not poll.spinning  # 1.1 ms since the read: back to sleeping in the poller


async def test_a_new_read_extends_the_window():
    clock = FakeClock()
    poll = BusyPoll(0.001, asyncio.get_running_loop(), clock)
    poll.touch()
    clock.now += 0.0008
    poll.touch()
    clock.now += 0.0008  # 1.6 ms after the first read, 0.8 ms after the second
    await turns()
    assert poll.spinning
    clock.now += 0.0003
    await turns()
    assert not poll.spinning


async def test_sparse_traffic_shrinks_the_window_to_nothing():
    clock = FakeClock()
    poll = BusyPoll(0.001, asyncio.get_running_loop(), clock)
    windows = []
    for _ in range(5):  # a read every 3 ms: no spin of at most 1 ms catches the next one
        clock.now += 0.003
        poll.touch()
        windows.append(poll.current_s)
    assert windows == pytest.approx([0.001, 0.0005, 0.00025, 0.000125, 0.0])
    await turns()
    assert not poll.spinning  # nothing to spin for: the loop sleeps at once


async def test_reads_just_after_the_window_grow_it_back_to_the_most():
    clock = FakeClock()
    poll = BusyPoll(0.001, asyncio.get_running_loop(), clock)
    poll.touch()  # a first read only starts the clock
    poll.current_s = 0.0  # as after a quiet spell
    windows = []
    for _ in range(5):  # a read every 0.6 ms: a 1 ms spin would catch each one
        clock.now += 0.0006
        poll.touch()
        windows.append(poll.current_s)
    assert windows == pytest.approx([0.000125, 0.00025, 0.0005, 0.001, 0.001])
    await turns()
    assert poll.spinning


async def test_reads_caught_by_the_spin_leave_the_window_as_it_is():
    clock = FakeClock()
    poll = BusyPoll(0.001, asyncio.get_running_loop(), clock)
    for _ in range(10):
        clock.now += 0.0002
        poll.touch()
    assert poll.current_s == 0.001


async def test_a_zero_window_never_spins():
    poll = BusyPoll(0.0, asyncio.get_running_loop(), FakeClock())
    poll.touch()
    await turns()
    assert not poll.spinning


def test_a_negative_window_is_refused():
    with pytest.raises(ValueError, match="negative"):
        BusyPoll(-0.1, asyncio.new_event_loop())


def test_broker_config_key():
    assert BrokerConfig.from_properties({}).busy_poll_window_micros == 250
    config = BrokerConfig.from_properties({"busyPollWindowMicros": "0"})
    assert config.busy_poll_window_micros == 0
    assert config.as_properties()["busyPollWindowMicros"] == "0"
    with pytest.raises(ConfError, match="busyPollWindowMicros"):
        BrokerConfig.from_properties({"busyPollWindowMicros": "-5"})
    with pytest.raises(ConfError, match="busyPollWindowMicros"):
        BrokerConfig.from_properties({"busyPollWindowMicros": "fast"})


async def serve(window_s: float) -> tuple[RemotingServer, str]:
    server = RemotingServer(busy_poll_window_s=window_s)

    def echo(conn, request):
        return response_to(request, ext_fields={"n": request.field("n")})

    server.register_processor(ECHO, echo)
    port = await server.start()
    return server, f"127.0.0.1:{port}"


async def test_a_request_starts_the_servers_busy_poll():
    server, addr = await serve(60.0)  # a window far longer than the test
    client = RemotingClient()
    poll = server.busy_poll
    assert poll is not None
    try:
        assert not poll.spinning
        response = await client.invoke(addr, create_request(ECHO, {"n": "1"}), 3000)
        assert response.field("n") == "1"
        assert poll.spinning
        connection = next(iter(server.connections))
        assert connection.busy_poll is server.busy_poll  # one per server, shared
    finally:
        await client.close()
        await server.stop()
    await turns()
    assert not poll.spinning  # a stopped server lets its loop sleep


async def test_without_a_window_the_server_has_no_busy_poll():
    server, addr = await serve(0.0)
    client = RemotingClient()
    try:
        response = await client.invoke(addr, create_request(ECHO, {"n": "2"}), 3000)
        assert response.field("n") == "2"
        assert server.busy_poll is None
        assert next(iter(server.connections)).busy_poll is None
    finally:
        await client.close()
        await server.stop()
