"""The broker's rates (putTps…, a group's consume TPS) on a fake clock and a stand-in store."""

import asyncio
import datetime

import pytest

from broker.common.codes import RequestCode
from broker.common.message_codec import decode_messages
from broker.remoting import fastjson
from broker.remoting.command import create_request
from broker.remoting.frame import encode_frame
from broker.server.broker_stats import BrokerStats, CounterSamples
from tests.server.test_long_polling import GROUP, TOPIC, connect, pull_frame, send_frame, start_broker


class CountingStore:
    """The store's counters the statistics read, set by hand."""

    def __init__(self) -> None:
        self.put_count = self.get_count = self.get_found_count = self.get_miss_count = 0


def test_a_rate_needs_as_many_samples_as_its_window():
    samples = CounterSamples(keep=4)
    samples.add(0.0, 0)
    assert samples.rate(1) is None
    samples.add(1.0, 50)
    samples.add(2.0, 150)
    assert samples.rate(1) == 100.0
    assert samples.rate(2) == 75.0
    assert samples.rate(3) is None
    for second in range(3, 10):  # older snapshots leave: the oldest kept is 3 back
        samples.add(float(second), 150)
    assert samples.rate(3) == 0.0
    assert samples.rate_over_all() == 0.0


def test_midnight_totals_tell_each_days_messages_in_and_out():
    store = CountingStore()
    stats = BrokerStats(store)
    monday, tuesday, wednesday = (datetime.date(2026, 11, day) for day in (23, 24, 25))
    stats.daily.day = monday
    store.put_count, store.get_count = 100, 40
    stats.sample(1.0, monday)
    daily = stats.runtime_info()
    # No midnight yet: both mornings are 0, so "today" is everything since the start.
    assert [daily[k] for k in ("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning")] == ["0", "0"]
    store.put_count, store.get_count = 250, 90
    stats.sample(2.0, tuesday)  # the first sample after midnight notes the totals then
    store.put_count, store.get_count = 300, 95
    stats.sample(3.0, tuesday)
    daily = stats.runtime_info()
    assert (daily["msgPutTotalTodayMorning"], daily["msgGetTotalTodayMorning"]) == ("250", "90")
    assert (daily["msgPutTotalYesterdayMorning"], daily["msgGetTotalYesterdayMorning"]) == ("0", "0")
    stats.sample(4.0, wednesday)
    daily = stats.runtime_info()
    assert (daily["msgPutTotalTodayMorning"], daily["msgGetTotalTodayMorning"]) == ("300", "95")
    assert (daily["msgPutTotalYesterdayMorning"], daily["msgGetTotalYesterdayMorning"]) == ("250", "90")


def test_runtime_info_gives_10s_1min_10min_figures_once_the_broker_ran_that_long():
    store = CountingStore()
    stats = BrokerStats(store)
    assert stats.runtime_info()["putTps"] == "  "  # nothing sampled yet: three empty figures
    for second in range(61):
        store.put_count = 20 * second
        store.get_count = 10 * second
        store.get_found_count, store.get_miss_count = 5 * second, 2 * second
        stats.sample(float(second))
    info = stats.runtime_info()
    assert info["putTps"] == "20.0 20.0 "  # no 10-minute figure before ten minutes
    assert info["getTransferedTps"] == "10.0 10.0 "
    assert info["getFoundTps"] == "5.0 5.0 "
    assert info["getMissTps"] == "2.0 2.0 "
    assert info["getTotalTps"] == "7.0 7.0 0.0"


def test_a_groups_consume_tps_counts_what_its_pulls_carried_over_the_last_minute():
    stats = BrokerStats(CountingStore())
    assert stats.consume_tps("g", "T") == 0.0
    for second in range(121):
        stats.on_pulled("T", "g", 30)  # 30 messages a second
        if second >= 90:
            stats.on_pulled("Other", "g", 1000)
        stats.sample(float(second))
    assert stats.consume_tps("g", "T") == pytest.approx(30.0)
    # Sampled every 10 s, from its first pull: 90 s, 100 s, 110 s and 120 s.
    assert stats.consume_tps("g", "Other") == pytest.approx(1000.0)
    assert stats.consume_tps("other-group", "T") == 0.0
    stats.forget_group("g")
    assert stats.consume_tps("g", "T") == 0.0
    assert not stats.group_gets


# -- a broker in this process: its pulls feed the figures that CONSUME_STATS and the runtime info report
async def test_consume_stats_and_runtime_info_report_the_sampled_rates(tmp_path):
    log: list = []
    broker = await start_broker(tmp_path)
    broker.stats_sampler.cancel()  # sampled by hand below, on a fake clock
    try:
        producer, consumer, admin = (connect(broker, name, log) for name in ("producer", "consumer", "admin"))
        for i in range(5):
            producer.data_received(send_frame(b"m%d" % i))
        await asyncio.sleep(0)  # dispatched on the loop's next turn
        consumer.data_received(pull_frame(0))
        broker.stats.sample(100.0)
        for i in range(10):
            producer.data_received(send_frame(b"n%d" % i))
        await asyncio.sleep(0)
        consumer.data_received(pull_frame(5))
        for second in range(1, 11):  # ten more samples: the group's second one at 110 s
            broker.stats.sample(100.0 + second)
        pulled = [cmd for name, cmd in log if name == "consumer"]
        assert [len(decode_messages(cmd.body)) for cmd in pulled] == [5, 10]

        stats_of_group = {"consumerGroup": GROUP, "topic": TOPIC}
        admin.data_received(admin_frame(RequestCode.GET_CONSUME_STATS, stats_of_group))
        admin.data_received(admin_frame(RequestCode.GET_BROKER_RUNTIME_INFO))
        while len([name for name, _ in log if name == "admin"]) < 2:
            await asyncio.sleep(0)
        consume_stats, runtime = (fastjson.loads(cmd.body) for name, cmd in log if name == "admin")
        assert consume_stats["consumeTps"] == pytest.approx(1.0)  # 10 messages in 10 s
        table = runtime["table"]
        assert table["putTps"] == "1.0  "  # 10 puts in the last 10 s; no minute figure yet
        assert table["getTransferedTps"] == "1.0  "
        assert float(table["getFoundTps"].split()[0]) == pytest.approx(0.1)  # one pull found
    finally:
        await broker.stop()


def admin_frame(code: int, fields: dict | None = None) -> bytes:
    return encode_frame(create_request(code, fields or {}))
