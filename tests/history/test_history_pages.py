"""History charts' JSON and the history page (Django's test client) over points written directly
for a fake clock; roles; bad parameters; the pages of a real cluster include the charts, and a real
broker sampled by the history sampler gives the group's lag chart its points."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import DatabaseError

from history import charts, views
from history.models import Cycle, Point, Rollup, Series
from tests.cluster import logged_in_client

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple 42"
viewer_client = logged_in_client("vera", "viewer", PASSWORD)
roleless_client = logged_in_client("nora", None, PASSWORD)
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture(autouse=True)
def _no_cached_rankings():
    """The history page keeps its rankings per sampling cycle; each test starts without any."""
    from django.core.cache import cache

    cache.clear()


def _series(cluster: str, metric: str, scope: str, name: str) -> Series:
    return Series.objects.get_or_create(cluster=cluster, metric=metric, scope=scope, name=name)[0]


def _raw(cluster, metric, scope, name, until, minutes, value=lambda i: float(i)):
    """A point every 30 s over the ``minutes`` before ``until`` (the newest at ``until``)."""
    series = _series(cluster, metric, scope, name)
    count = minutes * 2
    Point.objects.bulk_create(
        Point(series=series, taken_at=until - timedelta(seconds=30 * (count - 1 - i)), value=value(i))
        for i in range(count)
    )


def _rollups(cluster, metric, scope, name, until, hours, value=lambda i: float(i), last=None):
    series = _series(cluster, metric, scope, name)
    buckets = hours * 12
    first = until - timedelta(minutes=5 * buckets)
    Rollup.objects.bulk_create(
        Rollup(
            series=series,
            start=first + timedelta(minutes=5 * i),
            count=10,
            value_avg=value(i),
            value_min=value(i),
            value_max=value(i),
            value_last=last(i) if last else value(i),
        )
        for i in range(buckets)
    )


def _chart(client, page, chart, **params):
    return client.get(f"/history/charts/{page}/{chart}.json", params, **JSON)


# -- charts' JSON ----------------------------------------------------------------------------------


def test_group_lag_hour_is_the_raw_points(viewer_client, fake_clock, one_cluster):
    now = fake_clock.moment
    _raw(one_cluster, "lag", "group", "orders", now, 90)
    _raw(one_cluster, "lag", "group", "other", now, 90, value=lambda i: 7.0)
    data = _chart(viewer_client, "group", "lag", name="orders").json()
    assert data["window"] == "hour" and data["step_seconds"] is None and data["sample_seconds"] == 30
    (line,) = data["lines"]
    assert line["label"] == "lag" and line["unit"] == "msg"
    # 90 minutes stored, the last hour shown: 121 points (both ends included), newest last.
    assert data["points"] == len(line["points"]) == 121
    assert line["points"][-1] == [int(now.timestamp() * 1000), 179.0]
    assert line["points"][0][0] == int((now - timedelta(hours=1)).timestamp() * 1000)


def test_day_and_week_come_from_rollups(viewer_client, fake_clock, one_cluster):
    now = fake_clock.moment
    _rollups(one_cluster, "consume_tps", "group", "orders", now, 24 * 8, value=lambda i: 5.0)
    day = _chart(viewer_client, "group", "consume-tps", name="orders", window="day").json()
    assert day["step_seconds"] == 300 and 280 <= day["points"] <= 290
    assert {v for _, v in day["lines"][0]["points"]} == {5.0}
    week = _chart(viewer_client, "group", "consume-tps", name="orders", window="week").json()
    assert week["step_seconds"] > 300 and week["points"] <= 300


def test_no_history_yet_is_said_not_drawn(viewer_client, fake_clock, one_cluster):
    data = _chart(viewer_client, "group", "dlq", name="never-sampled").json()
    assert data["points"] == 0 and data["lines"][0]["points"] == []
    assert data["sample_seconds"] == 30  # the page says "the sampler runs every 30 s"


def test_cluster_charts_draw_every_broker_member(viewer_client, fake_clock, one_cluster):
    now = fake_clock.moment
    for member in ("broker-a:0", "broker-a:1", "broker-b:0"):
        _raw(one_cluster, "tps_in", "broker", member, now, 10)
        _raw(one_cluster, "tps_out", "broker", member, now, 10)
        _raw(one_cluster, "disk_ratio", "broker", member, now, 10, value=lambda i: 0.25)
    tps = _chart(viewer_client, "cluster", "broker-tps").json()
    assert [line["label"] for line in tps["lines"]] == [
        "broker-a:0 in",
        "broker-a:0 out",
        "broker-a:1 in",
        "broker-a:1 out",
        "broker-b:0 in",
        "broker-b:0 out",
    ]
    disk = _chart(viewer_client, "cluster", "disk").json()
    assert disk["lines"][0]["unit"] == "%" and disk["lines"][0]["points"][0][1] == 25.0


def test_broker_charts_two_units(viewer_client, fake_clock, one_cluster):
    now = fake_clock.moment
    _raw(one_cluster, "replication_lag_bytes", "broker", "broker-a:0", now, 5)
    _raw(one_cluster, "replication_lag_seconds", "broker", "broker-a:0", now, 5)
    data = _chart(viewer_client, "broker", "replication-lag", name="broker-a:0").json()
    assert [line["unit"] for line in data["lines"]] == ["bytes", "s"]
    assert data["points"] == 20


def test_another_clusters_history_is_not_shown(viewer_client, fake_clock, one_cluster):
    _raw("10.0.0.9:9876", "lag", "group", "orders", fake_clock.moment, 10)
    assert _chart(viewer_client, "group", "lag", name="orders").json()["points"] == 0


@pytest.mark.parametrize(
    ("path", "params", "status", "reason"),
    [
        (
            "/history/charts/group/lag.json",
            {"name": "g", "window": "year"},
            400,
            "window must be one of hour, day, week",
        ),
        ("/history/charts/group/lag.json", {"window": "hour"}, 400, "name is required"),
        ("/history/charts/group/lag.json", {"name": "g" * 256}, 400, "at most 255 printable"),
        ("/history/charts/group/lag.json", {"name": "a\tb"}, 400, "printable"),
        ("/history/charts/group/size.json", {"name": "g"}, 404, "no history chart 'size' on the group page"),
        ("/history/charts/nowhere/lag.json", {"name": "g"}, 404, "no history chart"),
        ("/history/daily.json", {"days": "0"}, 400, "days must be a whole number from 1 to 30"),
        ("/history/daily.json", {"days": "31"}, 400, "days must be a whole number from 1 to 30"),
        ("/history/daily.json", {"days": "-1"}, 400, "days must be"),
        ("/history/", {"window": "month"}, 400, "window must be one of hour, day, week"),
    ],
)
def test_bad_parameters_are_refused_with_a_reason(viewer_client, one_cluster, path, params, status, reason):
    response = viewer_client.get(path, params, **JSON)
    assert response.status_code == status
    assert reason in response.json()["error"]


def test_a_failing_database_is_a_503_with_its_reason(viewer_client, one_cluster, monkeypatch):
    def broken(*args, **kwargs):
        raise DatabaseError("connection refused")

    monkeypatch.setattr(charts, "chart_data", broken)
    monkeypatch.setattr(views.query, "daily_totals", broken)
    response = _chart(viewer_client, "group", "lag", name="g")
    assert response.status_code == 503 and "connection refused" in response.json()["error"]
    assert viewer_client.get("/history/daily.json", **JSON).status_code == 503
    page = viewer_client.get("/history/")
    assert page.status_code == 200 and b"history database did not answer: connection refused" in page.content


def test_roles_viewer_reads_everything_others_not(viewer_client, roleless_client, client, one_cluster):
    paths = [
        "/history/",
        "/history/daily.json",
        "/history/charts/group/lag.json?name=g",
        "/history/charts/cluster/disk.json",
    ]
    for path in paths:
        assert viewer_client.get(path).status_code == 200, path
        assert roleless_client.get(path).status_code == 403, path
        anonymous = client.get(path)
        assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"], path
    assert viewer_client.post("/history/charts/group/lag.json?name=g").status_code == 405


# -- the history page -----------------------------------------------------------------------------


def test_history_page_top_ten_and_days(viewer_client, fake_clock, one_cluster):
    now = fake_clock.moment
    for i in range(12):
        _raw(one_cluster, "tps_in", "topic", f"Topic{i:02d}", now, 10, value=lambda _, i=i: float(i))
        _raw(one_cluster, "lag", "group", f"group-{i:02d}", now, 10, value=lambda _, i=i: 100.0 * i)
    # RocketMQ's own topics and groups are not ranked, however busy.
    for topic in (
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "%RETRY%group-01",
        "DefaultCluster",
        "DefaultCluster_REPLY_TOPIC",
    ):
        _raw(one_cluster, "tps_in", "topic", topic, now, 10, value=lambda _: 1000.0)
    _raw(one_cluster, "lag", "group", "CID_RMQ_SYS_TRANS", now, 10, value=lambda _: 1e6)
    # Two days of a master's put counter: 1 message per 5 minutes = 288 a day. Its slave's count
    # is the same messages, not more of them.
    for member in ("broker-a:0", "broker-a:1"):
        _rollups(one_cluster, "messages_in", "broker", member, now, 48, last=lambda i: float(i))
    # The cluster's total is not what the days are summed from (see test_sampler's restart test).
    _rollups(one_cluster, "messages_in", "cluster", "DefaultCluster", now, 48, last=lambda i: 2.0 * i)
    Cycle.objects.create(cluster=one_cluster, taken_at=now, points=24)
    page = viewer_client.get("/history/")
    assert page.status_code == 200
    tables = page.context["tables"]
    topics, _, lag = tables
    assert [name for name, _ in topics["rows"]] == [f"Topic{i:02d}" for i in range(11, 1, -1)]
    # group-00's lag is 0: an idle group is not among the "top" ones.
    assert [name for name, _ in lag["rows"]] == [f"group-{i:02d}" for i in range(11, 1, -1)]
    assert lag["rows"][0] == ("group-11", 1100.0)
    assert tables[1]["rows"] == []  # no consume TPS stored: a note, not an empty table
    assert b"None above zero over the last hour" in page.content
    days = viewer_client.get("/history/daily.json", {"days": "3"}).json()["days"]
    assert [row["day"] for row in days] == ["2026-11-18", "2026-11-19", "2026-11-20"]
    # The first rollup only starts the counter; a bucket's growth belongs to the day it starts in.
    assert [row["in"] for row in days] == [287, 288, 0]
    week = viewer_client.get("/history/", {"window": "week"})
    assert week.status_code == 200 and week.context["window"] == "week"


# -- a real broker, sampled by the history sampler ------------------------------------------------

TOPIC, GROUP = "HistoryOrders", "history-orders"


@pytest.fixture(scope="module")
def lagging_cluster(tmp_path_factory):
    """A real name server and broker; a group whose committed offsets are 0 on a topic of 6 messages."""
    from core import cluster_access
    from tests.cluster import CLI_CLUSTER, console_preset, send, start

    cluster = start(console_preset(), tmp_path_factory.mktemp("history-cluster"), brokers=("broker-a",))
    try:
        admin = cluster_access.admin_for(cluster.namesrv_addr)
        (master,) = admin.resolve_masters(None, CLI_CLUSTER)
        admin.create_or_update_topic(master, TOPIC, 2, 2)

        async def group_at_zero():
            await admin.core.create_or_update_subscription_group(master, GROUP)
            for queue_id in range(2):
                await admin.core.update_consumer_offset(master, GROUP, TOPIC, queue_id, 0)

        admin.run(group_at_zero())
        send(cluster.namesrv_addr, TOPIC, 6)
        yield cluster
    finally:
        cluster_access.close_all()
        cluster.stop()


def test_real_broker_sampled_lag_shows_on_the_group_page(viewer_client, lagging_cluster, settings):
    from broker.local_cluster import wait_until
    from core import clock, cluster_access
    from history import query, sampler

    namesrv = lagging_cluster.namesrv_addr
    settings.BROKER_NAMESRV = namesrv
    admin = cluster_access.admin_for(namesrv)
    assert wait_until(lambda: admin.consumer_progress(GROUP, TOPIC).diff_total == 6, timeout=20, interval=0.2)
    sampler.sample(namesrv, admin)
    time.sleep(0.01)  # two cycles, two distinct timestamps
    sampler.sample(namesrv, admin)
    stored = query.series("lag", "group", GROUP, clock.now() - timedelta(minutes=10))
    assert [value for _, value in stored] == [6.0, 6.0]

    # What a reload of the group page does: the page names the chart, the chart's JSON has the points.
    page = viewer_client.get(f"/groups/{GROUP}/").content.decode()
    url = f"/history/charts/group/lag.json?name={GROUP}"
    assert f'data-history-url="{url}"' in page
    data = viewer_client.get(url, **JSON).json()
    assert data["points"] == 2 and [p[1] for p in data["lines"][0]["points"]] == [6.0, 6.0]
    # The other pages name their charts too, and the broker's answer its member's history.
    assert (
        'data-history-url="/history/charts/cluster/broker-tps.json"'
        in viewer_client.get("/cluster/").content.decode()
    )
    assert (
        f"/history/charts/topic/size.json?name={TOPIC}"
        in viewer_client.get(f"/topics/{TOPIC}/").content.decode()
    )
    master = admin.cluster_info().brokers["broker-a"].broker_addrs[0]
    broker_page = viewer_client.get(f"/cluster/broker/{master}/").content.decode()
    assert "/history/charts/broker/tps.json?name=broker-a%3A0" in broker_page
    tps = viewer_client.get("/history/charts/broker/tps.json", {"name": "broker-a:0"}, **JSON).json()
    assert tps["points"] >= 2


def test_rankings_are_computed_once_per_sampling_cycle(viewer_client, fake_clock, one_cluster):
    now = fake_clock.moment
    _raw(one_cluster, "tps_in", "topic", "Steady", now, 10, value=lambda _: 5.0)
    Cycle.objects.create(cluster=one_cluster, taken_at=now, points=1)
    assert viewer_client.get("/history/").context["tables"][0]["rows"] == [("Steady", 5.0)]
    _raw(one_cluster, "tps_in", "topic", "Burst", now, 10, value=lambda _: 50.0)
    assert viewer_client.get("/history/").context["tables"][0]["rows"] == [("Steady", 5.0)]  # same cycle
    Cycle.objects.create(cluster=one_cluster, taken_at=fake_clock.advance(seconds=30), points=2)
    rows = viewer_client.get("/history/").context["tables"][0]["rows"]
    assert [name for name, _ in rows] == ["Burst", "Steady"]
