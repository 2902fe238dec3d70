"""One sampling cycle against a real name server and two real brokers with traffic: the stored
figures are the engine's (checked against the brokers' own answers, not the sampler's snapshot);
topic TPS from two cycles; a broker that stops answering is stored as down."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from alerts.models import AlertEvent
from broker.common.message import Message
from broker.local_cluster import wait_until
from core import clock, cluster_access
from core.signals import sample_stored
from history import query, sampler, tasks
from history.models import Cycle, Point
from tests.cluster import (
    CLI,
    console_preset,
    logged_in_client,
    make_dead_letters,
    send,
    send_pending_transactions,
    start,
)

pytestmark = pytest.mark.django_db

TOPIC, GROUP, DEAD_GROUP = "HistOrders", "hist-orders", "hist-dead"
viewer_client = logged_in_client("hist-vera", "viewer", "hist-vera-password")
SENT = 12


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    cluster = start(console_preset(), tmp_path_factory.mktemp("history-cluster"))
    try:
        admin = cluster_access.admin_for(cluster.namesrv_addr)
        masters = admin.resolve_masters(None, CLI.cluster_name)
        for addr in masters:
            admin.create_or_update_topic(addr, TOPIC, 2, 2)
            admin.create_or_update_subscription_group(addr, GROUP)
        cluster.wait_for_route(TOPIC, broker_sets=len(masters))
        send(cluster.namesrv_addr, TOPIC, SENT)
        # The group has consumed one message of every queue: its lag is the rest.
        for addr in masters:
            for queue_id in range(2):
                admin.update_consumer_offset(addr, GROUP, TOPIC, queue_id, 1)
        make_dead_letters(cluster.namesrv_addr, "HistDeadTopic", DEAD_GROUP, 2, keys="hist-dead")
        send_pending_transactions(cluster.namesrv_addr, "hist-tx", [Message("HistPayments", b"pending")] * 2)
        yield cluster, admin, masters
    finally:
        cluster_access.close_all()
        cluster.stop()


@pytest.fixture
def namesrv(live, settings):
    settings.BROKER_NAMESRV = live[0].namesrv_addr
    return live[0].namesrv_addr


def _engine_lag(admin, masters) -> int:
    """The brokers' own figures: max offset minus the committed offset, every queue."""
    return sum(
        admin.max_offset(addr, TOPIC, q) - admin.query_consumer_offset(addr, GROUP, TOPIC, q)
        for addr in masters
        for q in range(2)
    )


def test_one_cycle_stores_the_engines_figures(live, namesrv, django_capture_on_commit_callbacks):
    _, admin, masters = live
    heard = []

    def receiver(sender, taken_at, cluster, **kwargs):
        heard.append((taken_at, cluster))

    sample_stored.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            result = sampler.sample(namesrv, admin)
    finally:
        sample_stored.disconnect(receiver)
    cycle = result.cycle
    assert heard == [(cycle.taken_at, namesrv)]
    assert cycle.requests > 0 and cycle.points == len(result.figures)

    def stored(metric, scope):
        return {name: value for name, (_, value) in query.latest(metric, scope, namesrv).items()}

    lag = stored("lag", "group")[GROUP]
    assert lag == _engine_lag(admin, masters) == SENT - 4
    assert lag == admin.consumer_progress(GROUP).diff_total
    written = sum(admin.max_offset(addr, TOPIC, q) for addr in masters for q in range(2))
    assert stored("messages", "topic")[TOPIC] == written == SENT
    assert stored("dlq_messages", "group")[DEAD_GROUP] == 2
    assert set(stored("up", "broker")) == {"broker-a:0", "broker-b:0"}
    assert set(stored("up", "broker").values()) == {1.0}
    assert stored("brokers_up", "cluster") == {CLI.cluster_name: 2.0}
    assert stored("lag", "cluster")[CLI.cluster_name] >= lag
    # The brokers count the puts themselves: at least this test's messages (dead letters and
    # half messages are puts too).
    assert sum(stored("messages_in", "broker").values()) >= SENT + 2
    assert all(0 < ratio <= 1 for ratio in stored("disk_ratio", "broker").values())
    assert stored("half_messages", "cluster")[CLI.cluster_name] >= 2
    assert stored("tps_in", "topic") == {}  # a rate needs a previous cycle


def test_topic_tps_from_two_cycles(live, namesrv, monkeypatch):
    _, admin, _ = live
    from core import clock

    # Later than any real cycle of the module, so "the previous cycle" is the one below.
    moment = [datetime.now(UTC) + timedelta(days=1)]
    monkeypatch.setattr(clock, "now", lambda: moment[0])
    sampler.sample(namesrv, admin)
    send(live[0].namesrv_addr, TOPIC, 30)
    moment[0] += timedelta(seconds=10)
    result = sampler.sample(namesrv, admin)
    assert result.figures[("tps_in", "topic", TOPIC)] == pytest.approx(3.0)
    points = query.series("tps_in", "topic", TOPIC, since=moment[0] - timedelta(minutes=1), cluster=namesrv)
    assert points == [(moment[0], pytest.approx(3.0))]


BURST = 600
# The module's two undecided half messages: the broker's transaction checker may put a copy of each
# while a test runs (RocketMQ keeps a check count that way), besides the test's own messages.
CHECKER_COPIES = 2


def _at(moment: list[datetime], monkeypatch, start: datetime) -> None:
    from core import clock

    moment.append(start)
    monkeypatch.setattr(clock, "now", lambda: moment[-1])


def _roll_and_prune(settings, keep: timedelta) -> datetime:
    """Roll up every complete bucket, then prune the raw points older than ``keep`` that are
    rolled up; the time before which only rollups are left."""
    from core import clock
    from history import retention

    while retention.rollup()[0]:  # bounded steps: as many runs as the history needs
        pass
    settings.HISTORY_RAW_DAYS = keep / timedelta(days=1)
    retention.prune()
    until = retention.rolled_until()
    assert until is not None  # the rollup above ran
    rolled = min(until, clock.now() - keep)
    assert not Point.objects.filter(taken_at__lt=rolled).exists()
    return rolled


def test_broker_tps_comes_from_counter_differences_and_keeps_a_burst(live, namesrv, monkeypatch):
    """A burst sent within seconds, sampled 30 s apart: the broker and cluster series count it all
    (rate x interval = the messages put), not the brokers' 10 s putTps of the sampling moment."""
    moment: list[datetime] = []
    _at(moment, monkeypatch, datetime.now(UTC) + timedelta(days=2))
    sampler.sample(namesrv, admin=live[1])
    send(live[0].namesrv_addr, TOPIC, BURST)
    moment.append(moment[-1] + timedelta(seconds=30))
    burst = sampler.sample(namesrv, live[1]).figures
    moment.append(moment[-1] + timedelta(seconds=30))
    quiet = sampler.sample(namesrv, live[1]).figures
    cluster_rates = [
        burst[("tps_in", "cluster", CLI.cluster_name)],
        quiet[("tps_in", "cluster", CLI.cluster_name)],
    ]
    assert sum(rate * 30 for rate in cluster_rates) == pytest.approx(BURST, abs=CHECKER_COPIES)
    assert cluster_rates[0] == pytest.approx(BURST / 30, abs=CHECKER_COPIES / 30)
    brokers = [burst[("tps_in", "broker", b)] for b in ("broker-a:0", "broker-b:0")]
    assert sum(brokers) == pytest.approx(cluster_rates[0])
    # The topic series of the same samples says the same.
    assert burst[("tps_in", "topic", TOPIC)] == pytest.approx(BURST / 30)
    # Reads are counted the same way: nothing consumed here, whatever the 10 s window said.
    assert quiet[("tps_out", "cluster", CLI.cluster_name)] == 0.0


def test_dead_letters_new_today_are_the_stores_count_whatever_the_samples(live, namesrv, settings):
    """Dead letters of a group first seen in the same sample as its DLQ topic (the newcomer's case:
    no earlier point to count from): "New today" is what the brokers stored in the DLQ topic since
    00:00 UTC, so no sampling, rollup or restart changes it. The
    count from a moment between two batches is the second batch exactly."""
    from console.services.dead_letters_today import dead_letters_since
    from console.services.overview import dead_letters

    cluster, admin, _ = live
    group, first, second = "hist-dead-today", 3, 4
    make_dead_letters(cluster.namesrv_addr, "HistDeadToday", group, first, keys="dead-today-1")
    sampler.sample(namesrv, admin)  # the group and its DLQ topic appear in this sample
    between = datetime.now(UTC)
    make_dead_letters(cluster.namesrv_addr, "HistDeadToday", group, second, "dead-today-2", already=first)
    sampler.sample(namesrv, admin)
    engine = sum(q.max_offset for q in admin.topic_status(f"%DLQ%{group}").queues)
    assert engine == first + second
    assert dead_letters_since(admin, [group], between) == {group: second}
    rows = {row.group: row for row in dead_letters(admin, namesrv).data}
    if clock.day_start() <= between:  # not across midnight
        assert (rows[group].today, rows[group].total) == (engine, engine)
        assert rows[DEAD_GROUP].today == 2  # the module's dead letters, made today as well
    # A group without a DLQ topic in the engine is unknown, not 0.
    assert dead_letters_since(admin, ["hist-never-dead"], between) == {"hist-never-dead": None}


def test_messages_in_today_survive_a_broker_restart(live, namesrv, monkeypatch, settings):
    """What was written today, across a restart of broker-a between two samples: the history's
    count; still so once the samples around the
    restart are only a rollup (the bucket's last value alone would lose the puts before it)."""
    from console.services.overview import broker_health

    cluster, admin, _ = live
    day = (datetime.now(UTC) + timedelta(days=4)).replace(hour=0, minute=0, second=0, microsecond=0)
    moment: list[datetime] = []
    _at(moment, monkeypatch, day - timedelta(seconds=20))
    sampler.sample(namesrv, admin)
    before, after = 40, 30
    send(cluster.namesrv_addr, TOPIC, before)
    moment.append(day + timedelta(seconds=10))
    sampler.sample(namesrv, admin)
    cluster.restart_broker("broker-a")
    cluster.wait_for_route(TOPIC, broker_sets=2)  # broker-a and broker-b
    wait_until(lambda: len(admin.resolve_masters(None, CLI.cluster_name)) == 2, what="broker-a back")
    send(cluster.namesrv_addr, TOPIC, after)
    moment.append(day + timedelta(seconds=40))
    sampler.sample(namesrv, admin)
    health = broker_health(admin, namesrv)
    assert health.data.in_today == pytest.approx(before + after, abs=CHECKER_COPIES)
    assert health.data.in_today >= before + after
    moment.append(day + timedelta(minutes=15))
    sampler.sample(namesrv, admin)  # history stays "now" for the overview
    assert _roll_and_prune(settings, timedelta(minutes=5)) >= day + timedelta(minutes=5)
    rolled = broker_health(admin, namesrv).data.in_today
    assert rolled == pytest.approx(before + after, abs=CHECKER_COPIES) and rolled >= before + after


def test_the_task_samples_every_configured_cluster(live, namesrv, settings):
    settings.BROKER_NAMESRV = f"{namesrv},127.0.0.1:1"  # a second cluster nobody answers for
    summary = tasks.sample_clusters()
    assert summary["clusters"][namesrv]["points"] > 0
    unreachable = summary["clusters"]["127.0.0.1:1"]
    assert unreachable["points"] == 0 and unreachable["errors"] == 1
    assert Cycle.objects.filter(cluster="127.0.0.1:1").exists()


def test_consume_tps_is_committed_progress_and_only_a_stopped_group_is_stalled(
    live, namesrv, fake_clock, django_capture_on_commit_callbacks
):
    """Two lagging groups, sampled every 30 s for 6 minutes: one commits a message a cycle (a slow
    consumer: the brokers' pulls see nothing of it), one stopped. The stored consume TPS is what
    the committed offsets advanced by between cycles; "Consumer not consuming" fires for the
    stopped group after its 5 minutes, never for the slow one."""
    _, admin, masters = live
    topic, slow, stopped = "HistSlow", "hist-slow", "hist-stopped"
    for addr in masters:
        admin.create_or_update_topic(addr, topic, 2, 2)
        for group in (slow, stopped):
            admin.create_or_update_subscription_group(addr, group)
            for queue_id in range(2):
                admin.update_consumer_offset(addr, group, topic, queue_id, 0)
    live[0].wait_for_route(topic)
    send(namesrv, topic, 60)
    fake_clock.moment = started = datetime.now(UTC) + timedelta(days=2)  # after any other cycle
    results = []
    for cycle in range(13):
        if cycle:
            fake_clock.advance(seconds=30)
            admin.update_consumer_offset(masters[0], slow, topic, 0, cycle)
        with django_capture_on_commit_callbacks(execute=True):
            results.append(sampler.sample(namesrv, admin))
    engine = sum(admin.query_consumer_offset(addr, slow, topic, q) for addr in masters for q in range(2))
    assert results[-1].figures[("consumed", "group", slow)] == engine == 12
    for result in results[1:]:
        assert result.figures[("consume_tps", "group", slow)] == pytest.approx(1 / 30, abs=1e-3)
        assert result.figures[("consume_tps", "group", stopped)] == 0.0
        assert result.figures[("lag", "group", slow)] > 0
    stalled = AlertEvent.objects.filter(rule__kind="consume_stalled", cluster=namesrv)
    assert not stalled.filter(group=slow, state__in=[AlertEvent.FIRING, AlertEvent.RESOLVED]).exists()
    assert not stalled.filter(group=slow, state=AlertEvent.PENDING).exists()
    [fired] = stalled.filter(group=stopped)
    assert (fired.state, fired.started_at, fired.firing_at) == (
        AlertEvent.FIRING,
        started,
        started + timedelta(minutes=5),
    )


def test_dead_letters_alert_from_the_cycle_that_sees_them_for_its_window(
    live, namesrv, fake_clock, django_capture_on_commit_callbacks
):
    """Real dead letters between two cycles 30 s apart: "Dead letters arriving" fires at the cycle
    that first counts them and resolves at the first cycle 5 minutes later (its window then holds
    no new ones)."""
    _, admin, masters = live
    topic, group = "HistDeadLater", "hist-dead-later"
    for addr in masters:
        admin.create_or_update_subscription_group(addr, group)  # known (no dead letters) before
    fake_clock.moment = start = datetime.now(UTC) + timedelta(days=3)  # after any other cycle
    seen = {}
    for cycle in range(16):
        fake_clock.moment = start + cycle * timedelta(seconds=30)
        if cycle == 4:
            make_dead_letters(namesrv, topic, group, 2, keys="hist-dead-later")
        with django_capture_on_commit_callbacks(execute=True):
            seen[cycle] = sampler.sample(namesrv, admin).figures[("dlq_messages", "group", group)]
    assert [seen[c] for c in (0, 3, 4, 15)] == [0, 0, 2, 2]
    arrived = start + 4 * timedelta(seconds=30)
    events = AlertEvent.objects.filter(rule__kind="dlq_receiving", group=group)
    assert list(events.values_list("state", "started_at", "firing_at", "resolved_at")) == [
        (AlertEvent.RESOLVED, arrived, arrived, arrived + timedelta(minutes=5))
    ]


def _totals(admin, broker: str) -> dict[str, int]:
    """The broker's own put/get totals and mornings (brokerStatus), read now."""
    addr = admin.cluster_info().brokers[broker].broker_addrs[0]
    info = admin.broker_runtime_info(addr)
    keys = (
        "msgPutTotalTodayNow",
        "msgGetTotalTodayNow",
        "msgPutTotalTodayMorning",
        "msgGetTotalTodayMorning",
    )
    return {key: int(info[key]) for key in keys}


def _back(cluster, admin, name: str) -> None:
    cluster.wait_for_route(TOPIC, broker_sets=2)  # broker-a and broker-b
    wait_until(lambda: name in admin.cluster_info().brokers, what=f"{name} back")


def test_the_brokers_totals_go_on_across_a_clean_stop_and_a_kill(live, namesrv):
    """brokerStatus's msgPutTotalTodayNow/msgGetTotalTodayNow and the day's count the Cluster page
    shows (now - morning) are the broker's since its first start, not since its last: a clean stop
    keeps every count, a kill those the broker saved (once a second) before it."""
    cluster, admin, _ = live
    send(cluster.namesrv_addr, TOPIC, 40)
    before = _totals(admin, "broker-a")
    assert before["msgPutTotalTodayNow"] > 0
    cluster.restart_broker("broker-a")
    _back(cluster, admin, "broker-a")
    after = _totals(admin, "broker-a")
    put, morning = after["msgPutTotalTodayNow"], after["msgPutTotalTodayMorning"]
    assert before["msgPutTotalTodayNow"] <= put <= before["msgPutTotalTodayNow"] + CHECKER_COPIES
    assert after["msgGetTotalTodayNow"] >= before["msgGetTotalTodayNow"]
    if morning == before["msgPutTotalTodayMorning"]:  # not across midnight
        assert put - morning >= before["msgPutTotalTodayNow"] - before["msgPutTotalTodayMorning"]
    send(cluster.namesrv_addr, TOPIC, 30)
    now = _totals(admin, "broker-a")["msgPutTotalTodayNow"]
    saved = cluster.workdir / "broker-a" / "config" / "brokerStats.json"
    wait_until(lambda: json.loads(saved.read_text())["put_total"] >= now, what="the totals saved")
    cluster.brokers["broker-a"].kill()
    cluster.start_broker("broker-a")
    _back(cluster, admin, "broker-a")
    assert now <= _totals(admin, "broker-a")["msgPutTotalTodayNow"] <= now + CHECKER_COPIES


def test_day_totals_and_tps_span_a_broker_stop_exactly(live, namesrv, monkeypatch):
    """A burst between a sample and broker-a's stop, a cycle while it is down, a burst after its
    start: the day's messages in (Overview, History) count both bursts, and the broker's and the
    topic's TPS points after the restart integrate to what was put since their previous points."""
    from console.services.overview import broker_health

    cluster, admin, _ = live
    day = (datetime.now(UTC) + timedelta(days=6)).replace(hour=0, minute=0, second=0, microsecond=0)
    moment: list[datetime] = []
    _at(moment, monkeypatch, day + timedelta(seconds=10))
    sampler.sample(namesrv, admin)
    start = {b: _totals(admin, b)["msgPutTotalTodayNow"] for b in ("broker-a", "broker-b")}
    topic_start = sum(q.max_offset for q in admin.topic_status(TOPIC).queues)
    burst, after = 500, 300
    send(cluster.namesrv_addr, TOPIC, burst)
    if cluster.brokers["broker-a"].stop() != 0:
        raise RuntimeError("broker-a did not stop cleanly")
    moment.append(day + timedelta(seconds=80))
    down = sampler.sample(namesrv, admin).figures
    assert down[("up", "broker", "broker-a:0")] == 0.0
    cluster.start_broker("broker-a")
    _back(cluster, admin, "broker-a")
    send(cluster.namesrv_addr, TOPIC, after)
    moment.append(day + timedelta(seconds=100))
    figures = sampler.sample(namesrv, admin).figures
    end = {b: _totals(admin, b)["msgPutTotalTodayNow"] for b in ("broker-a", "broker-b")}
    put = sum(end.values()) - sum(start.values())
    assert burst + after <= put <= burst + after + 2 * CHECKER_COPIES
    assert broker_health(admin, namesrv).data.in_today >= put  # the module's earlier puts are today too
    grown = query.growth_since("messages_in", "broker", day + timedelta(seconds=11), namesrv)
    assert grown["broker-a:0"] + grown["broker-b:0"] == put
    # broker-a's first point after its restart spans the 90 s since its previous one
    rate = figures[("tps_in", "broker", "broker-a:0")]  # stored to 3 decimals
    assert rate * 90 == pytest.approx(end["broker-a"] - start["broker-a"], abs=0.1)
    topic_end = sum(q.max_offset for q in admin.topic_status(TOPIC).queues)
    points = query.series("tps_in", "topic", TOPIC, since=day + timedelta(seconds=11), cluster=namesrv)
    assert points == [(moment[-1], pytest.approx((topic_end - topic_start) / 90, abs=0.001))]
    assert topic_end - topic_start == burst + after


def _killed_with_totals(cluster, admin, name: str, edit) -> None:
    """Kill broker ``name`` once its totals file holds its put total, ``edit`` the file as the kill
    could have left it, start the broker again."""
    saved = cluster.workdir / name / "config" / "brokerStats.json"
    now = _totals(admin, name)["msgPutTotalTodayNow"]
    wait_until(lambda: json.loads(saved.read_text())["put_total"] >= now, what="the totals saved")
    cluster.brokers[name].kill()
    edit(saved)
    cluster.start_broker(name)
    _back(cluster, admin, name)


def test_a_killed_brokers_lost_second_is_not_counted_as_its_whole_total(live, namesrv, monkeypatch):
    """A kill can lose the puts of the broker's last second (its totals file is saved once a
    second): its total then comes back below the history's last figure. The history counts no
    growth until the total passes that figure again, not the broker's whole total; a lost file
    (totals from zero since the start) still counts what was put since."""
    cluster, admin, _ = live
    day = (datetime.now(UTC) + timedelta(days=8)).replace(hour=0, minute=0, second=0, microsecond=0)
    moment: list[datetime] = []
    _at(moment, monkeypatch, day + timedelta(seconds=10))
    send(cluster.namesrv_addr, TOPIC, 10)
    first = sampler.sample(namesrv, admin).figures[("messages_in", "broker", "broker-a:0")]
    lost = 5

    def lose_a_second(saved):
        totals = json.loads(saved.read_text())
        saved.write_text(json.dumps(totals | {"put_total": totals["put_total"] - lost}))

    _killed_with_totals(cluster, admin, "broker-a", lose_a_second)
    # A second later (the broker's totals have counted for longer: they were resumed).
    moment.append(day + timedelta(seconds=11))
    figures = sampler.sample(namesrv, admin).figures
    assert figures[("messages_in", "broker", "broker-a:0")] == first
    assert figures[("tps_in", "broker", "broker-a:0")] == 0.0
    before = _totals(admin, "broker-a")["msgPutTotalTodayNow"]
    assert before < first
    _killed_with_totals(cluster, admin, "broker-a", lambda saved: saved.unlink())
    assert _totals(admin, "broker-a")["msgPutTotalTodayNow"] <= CHECKER_COPIES
    send(cluster.namesrv_addr, TOPIC, 4)  # fewer than broker-a had: its total went down
    put = _totals(admin, "broker-a")["msgPutTotalTodayNow"]
    assert put < first
    # Two minutes later (its totals have counted for less: from zero, since this start).
    moment.append(day + timedelta(minutes=2, seconds=11))
    figures = sampler.sample(namesrv, admin).figures
    assert figures[("messages_in", "broker", "broker-a:0")] == put
    # the rate is stored to 3 decimals
    assert figures[("tps_in", "broker", "broker-a:0")] * 120 == pytest.approx(put, abs=0.06)


def test_a_commit_past_the_queues_end_counts_only_the_messages_there(live, namesrv, fake_clock):
    """Attack finding 5: a group's ``consumed`` (its committed offsets summed) took a commit of
    2^62 as it came, so the next cycle's consume TPS was 2^62 / 30 s with nothing consumed. As
    Apache's lag does, an offset past the queue's end counts as the end."""
    _, admin, masters = live
    liar = "hist-past-the-end"
    for addr in masters:
        admin.create_or_update_subscription_group(addr, liar)
        for queue_id in range(2):
            admin.update_consumer_offset(addr, liar, TOPIC, queue_id, 0)
    # An hour back: before the next tests' real-time cycles, so their newest points stay theirs.
    fake_clock.moment = datetime.now(UTC) - timedelta(hours=1)
    sampler.sample(namesrv, admin)
    fake_clock.advance(seconds=30)
    admin.update_consumer_offset(masters[0], liar, TOPIC, 0, 2**62)
    result = sampler.sample(namesrv, admin)
    end = admin.max_offset(masters[0], TOPIC, 0)
    assert admin.query_consumer_offset(masters[0], liar, TOPIC, 0) == 2**62  # kept as committed
    assert result.figures[("consumed", "group", liar)] == end
    assert result.figures[("consume_tps", "group", liar)] == pytest.approx(end / 30, abs=1e-3)


def test_a_broker_that_stops_answering_is_stored_as_down(
    live, namesrv, viewer_client
):  # last: broker-b stays down
    cluster, admin, _ = live
    sampler.sample(namesrv, admin)  # heard once (the test may run alone)
    cluster.brokers["broker-b"].kill()
    result = sampler.sample(namesrv, admin)
    assert result.figures[("up", "broker", "broker-b:0")] == 0.0
    assert result.figures[("up", "broker", "broker-a:0")] == 1.0
    assert result.figures[("last_heard_seconds", "broker", "broker-b:0")] > 0
    assert result.figures[("brokers_down", "cluster", CLI.cluster_name)] == 1.0
    assert query.latest("up", "broker", namesrv)["broker-b:0"][1] == 0.0
    # Once the name server has dropped it too, it is still reported down (not silently gone).
    wait_until(
        lambda: (
            "broker-b" not in admin.cluster_info().brokers
            or not admin.cluster_info().brokers["broker-b"].broker_addrs
        ),
        timeout=60,
        what="the name server to drop broker-b",
    )
    later = sampler.sample(namesrv, admin)
    assert later.figures[("up", "broker", "broker-b:0")] == 0.0
    # The Overview's broker tiles count it: down, of two (not "1 / 1" up).
    from console.services.overview import broker_health

    health = broker_health(admin, namesrv).data
    assert (health.up, health.total, health.down) == (1, 2, 1)
    html = viewer_client.get("/").content.decode()
    assert '<div class="tile tile-bad" data-tile="brokers">' in html
    assert "<b>1 / 2</b><span>brokers up · 1 down</span>" in html
