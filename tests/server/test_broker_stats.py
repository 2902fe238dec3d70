"""The broker's rates (putTps…, a group's consume TPS) on a fake clock and a stand-in store."""

import asyncio
import datetime

import pytest

from broker.common import fastjson
from broker.common.codes import RequestCode
from broker.common.message_codec import decode_messages
from broker.common.request_headers.pull import UpdateConsumerOffsetRequestHeader
from broker.remoting.command import create_request
from broker.remoting.frame import encode_frame
from broker.server.broker_stats import BrokerStats, CounterSamples
from tests.server.test_long_polling import GROUP, TOPIC, connect, pull_frame, send_frame, start_broker


class CountingStore:
    """The store's counters the statistics read, set by hand."""

    def __init__(self) -> None:
        self.put_count = self.get_count = self.get_found_count = self.get_miss_count = 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return 10**9  # every queue long enough for the commits below


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


def test_a_groups_consume_tps_counts_its_committed_progress_over_the_last_minute():
    stats = BrokerStats(CountingStore())
    assert stats.consume_tps("g", "T") == 0.0
    stats.on_committed("T", "g", 0, -1, 500)  # a first commit (from nothing) is no progress
    stats.on_committed("Other", "g", 0, -1, 0)
    for second in range(121):
        stats.on_committed("T", "g", 0, 500 + 30 * second, 530 + 30 * second)  # 30 a second
        stats.on_committed("T", "g", 0, 530 + 30 * second, 530 + 30 * second)  # the same again
        if second >= 90:
            stats.on_committed("Other", "g", 0, 1000 * (second - 90), 1000 * (second - 89))
        stats.sample(float(second))
    assert stats.consume_tps("g", "T") == pytest.approx(30.0)
    # A group's first progress is sampled at once (90 s), then every 10 s: 100 s, 110 s, 120 s.
    assert stats.consume_tps("g", "Other") == pytest.approx(1000.0)
    assert stats.consume_tps("other-group", "T") == 0.0
    stats.on_committed("T", "g", 0, 5000, 0)  # an offset moved back (a reset) is no progress
    stats.sample(121.0)
    assert stats.consume_tps("g", "T") == pytest.approx(30.0)
    stats.forget_group("g")
    assert stats.consume_tps("g", "T") == 0.0
    assert not stats.group_consumed


# -- a broker in this process: its commits feed CONSUME_STATS' consumeTps; its store counters the
# runtime info's rates
async def test_consume_stats_and_runtime_info_report_the_sampled_rates(tmp_path):
    log: list = []
    broker = await start_broker(tmp_path)
    broker.stats_sampler.cancel()  # sampled by hand below, on a fake clock
    try:
        producer, consumer, committer, admin = (
            connect(broker, name, log) for name in ("producer", "consumer", "committer", "admin")
        )
        for i in range(5):
            producer.data_received(send_frame(b"m%d" % i))
        await asyncio.sleep(0)  # dispatched on the loop's next turn
        consumer.data_received(pull_frame(0))
        committer.data_received(commit_frame(1))  # the group's first offset: no progress yet
        committer.data_received(commit_frame(2))
        await committed(broker, 2)
        broker.stats.sample(100.0)
        for i in range(30):
            producer.data_received(send_frame(b"n%d" % i))
        await asyncio.sleep(0)
        consumer.data_received(pull_frame(5))
        for second in range(1, 11):  # a slow consumer: two messages a second, whatever it pulled
            committer.data_received(commit_frame(2 + 2 * second))
            await committed(broker, 2 + 2 * second)
            broker.stats.sample(100.0 + second)  # ten more samples: the group's second one at 110 s
        pulled = [cmd for name, cmd in log if name == "consumer"]
        assert [len(decode_messages(cmd.body)) for cmd in pulled] == [5, 30]
        assert broker.offsets.query(GROUP, TOPIC, 0) == 22

        stats_of_group = {"consumerGroup": GROUP, "topic": TOPIC}
        admin.data_received(admin_frame(RequestCode.GET_CONSUME_STATS, stats_of_group))
        admin.data_received(admin_frame(RequestCode.GET_BROKER_RUNTIME_INFO))
        while len([name for name, _ in log if name == "admin"]) < 2:
            await asyncio.sleep(0)
        consume_stats, runtime = (fastjson.loads(cmd.body) for name, cmd in log if name == "admin")
        assert consume_stats["consumeTps"] == pytest.approx(2.0)  # 20 committed in 10 s
        table = runtime["table"]
        assert table["putTps"] == "3.0  "  # 30 puts in the last 10 s; no minute figure yet
        assert table["getTransferedTps"] == "3.0  "
        assert float(table["getFoundTps"].split()[0]) == pytest.approx(0.1)  # one pull found
    finally:
        await broker.stop()


async def committed(broker, offset: int) -> None:
    """Until the broker holds ``offset`` (a request is served on a later turn of the loop)."""
    for _ in range(1000):
        if broker.offsets.query(GROUP, TOPIC, 0) == offset:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"offset {offset} never committed")


def commit_frame(offset: int) -> bytes:
    header = UpdateConsumerOffsetRequestHeader(GROUP, TOPIC, 0, offset)
    return encode_frame(create_request(RequestCode.UPDATE_CONSUMER_OFFSET, header))


def admin_frame(code: int, fields: dict | None = None) -> bytes:
    return encode_frame(create_request(code, fields or {}))


async def test_offset_commits_alone_never_count_more_than_the_messages_that_exist(tmp_path):
    """Attack finding 5: commits of 0 and 1000 in turn on a queue of five messages, then one of
    Long.MAX, made a consume TPS of thousands (and 4.6e17) with nothing consumed. A commit counts
    only up to the queue's end and from the highest offset the group already reached there."""
    log: list = []
    broker = await start_broker(tmp_path)
    broker.stats_sampler.cancel()  # sampled by hand below, on a fake clock
    try:
        producer, committer, admin = (
            connect(broker, name, log) for name in ("producer", "committer", "admin")
        )
        for i in range(5):
            producer.data_received(send_frame(b"m%d" % i))
        await asyncio.sleep(0)
        committer.data_received(commit_frame(0))  # the group's first offset: no progress yet
        await committed(broker, 0)
        broker.stats.sample(100.0)
        for second in range(1, 11):
            for offset in (1000, 0):  # forward past the end, back again: a seesaw
                committer.data_received(commit_frame(offset))
                await committed(broker, offset)
            broker.stats.sample(100.0 + second)
        for offset in (2**63 - 1, 0, 5):  # a jump to Long.MAX, back, then to the end again
            committer.data_received(commit_frame(offset))
            await committed(broker, offset)
        broker.stats.sample(111.0)
        assert broker.stats.group_consumed[(TOPIC, GROUP)] == 5  # the five messages, once
        admin.data_received(
            admin_frame(RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP, "topic": TOPIC})
        )
        while not log or log[-1][0] != "admin":
            await asyncio.sleep(0)
        # Counted at the first commit past the end (101 s), nothing after: the minute's rate is 0.
        assert fastjson.loads(log[-1][1].body)["consumeTps"] == 0.0
    finally:
        await broker.stop()


def test_resumed_totals_keep_the_days_counts_across_a_restart(tmp_path):
    """What a previous run saved (running_totals): the same UTC day resumes its mornings; a file
    of yesterday makes its totals this morning's and its morning yesterday's; an older one leaves
    nothing for yesterday."""
    from broker.server import running_totals

    monday, tuesday, friday = (datetime.date(2026, 11, day) for day in (23, 24, 27))
    store = CountingStore()
    first = BrokerStats(store)
    first.daily.day = monday
    store.put_count, store.get_count = 100, 40
    first.sample(1.0, monday)
    store.put_count, store.get_count = 250, 90
    first.sample(2.0, tuesday)  # Tuesday morning: 100 in, 40 out
    store.put_count, store.get_count = 300, 95
    first.sample(3.0, tuesday)
    path = running_totals.totals_file(tmp_path)
    running_totals.save(path, first.totals())
    saved = running_totals.load(path)
    assert saved is not None and (saved.put_total, saved.get_total, saved.day) == (300, 95, "2026-11-24")

    def resumed(today: datetime.date) -> dict[str, str]:
        store.put_count = store.get_count = 0  # a new process: the store counts from 0
        stats = BrokerStats(store)
        stats.resume(saved, today)
        store.put_count, store.get_count = 7, 3
        stats.sample(1.0, today)
        info = stats.runtime_info()
        keys = ("msgPutTotalTodayNow", "msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning")
        return {k: info[k] for k in (*keys, "msgGetTotalTodayNow", "msgGetTotalTodayMorning")}

    assert resumed(tuesday) == {
        "msgPutTotalTodayNow": "307",
        "msgPutTotalTodayMorning": "250",
        "msgPutTotalYesterdayMorning": "0",
        "msgGetTotalTodayNow": "98",
        "msgGetTotalTodayMorning": "90",
    }
    wednesday = tuesday + datetime.timedelta(days=1)
    assert resumed(wednesday) == {
        "msgPutTotalTodayNow": "307",
        "msgPutTotalTodayMorning": "300",
        "msgPutTotalYesterdayMorning": "250",
        "msgGetTotalTodayNow": "98",
        "msgGetTotalTodayMorning": "95",
    }
    assert resumed(friday)["msgPutTotalYesterdayMorning"] == "300"


@pytest.mark.parametrize(
    "content",
    [b"{", b'{"put_total": -1}', b"[1]", b"x" * 5000, b'{"put_total": 1, "get_total": true}'],
)
def test_a_totals_file_that_is_not_ours_counts_from_zero(tmp_path, content):
    from broker.server import running_totals

    path = running_totals.totals_file(tmp_path)
    path.write_bytes(content)
    assert running_totals.load(path) is None
    assert running_totals.load(tmp_path / "absent.json") is None
