"""The overview (the console's home): broker health, the groups with most lag (history, or a live
read without recent history), firing alerts, dead letters today; the sidebar; per-row actions of
the topic and group lists; a section that fails shows its error while the rest of the page stays."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from broker.client.admin import MQClientError
from core.cluster_access import admin_for
from tests.lagging_group import make_lagging_group

pytestmark = pytest.mark.django_db

TOPIC, GROUP = "OverviewLagTopic", "overview-lagging-group"


@pytest.fixture(scope="module")
def lagging(live_cluster):
    """GROUP really behind on TOPIC (a stopped consumer); its lag."""
    admin = admin_for(live_cluster.namesrv_addr)
    return make_lagging_group(live_cluster.namesrv_addr, admin, TOPIC, GROUP)


def _sections(response):
    assert response.status_code == 200
    assert response.templates[0].name == "console/overview.html"
    return response.context["sections"]


def test_the_home_page_is_the_overview_with_the_live_lagging_group(viewer_client, live_cluster, lagging):
    response = viewer_client.get("/")
    sections = _sections(response)
    brokers = sections["brokers"].data
    assert brokers.up == len(brokers.rows) >= 2 and brokers.down == 0
    assert 0 <= brokers.max_disk < 1
    rows = {g.group: g for g in sections["lagging"].data}
    assert rows[GROUP].lag >= lagging and rows[GROUP].clients == 0
    assert sections["lagging"].source.startswith("live")  # no history sampled in this test
    html = response.content.decode()
    assert f'data-group="{GROUP}"' in html and "offline" in html
    # A viewer may look at the lag, not reset it.
    assert f'href="/groups/{GROUP}/">View lag' in html and "Reset offset" not in html
    assert 'data-tile="brokers"' in html and f"<b>{brokers.up} / {len(brokers.rows)}</b>" in html


def test_an_operator_is_offered_the_offset_reset_of_a_lagging_group(operator_client, lagging):
    html = operator_client.get("/").content.decode()
    assert f'href="/groups/{GROUP}/#reset-offset">Reset offset' in html


def test_the_sidebar_names_the_sections_and_marks_the_page(viewer_client, live_cluster):
    html = viewer_client.get("/topics/").content.decode()
    nav = html.split('<nav class="mainnav"')[1].split("</nav>")[0]
    for heading in ("Cluster", "Messages", "Monitoring"):
        assert f"<h2>{heading}</h2>" in nav
    assert 'href="/topics/" class="active" aria-current="page"' in nav
    assert 'href="/export/"' in nav and 'href="/acl/"' not in nav  # ACL is the admins'


def test_firing_and_pending_alerts_are_listed_firing_first(viewer_client, live_cluster):
    from alerts.models import AlertEvent, AlertRule

    rule = AlertRule.objects.create(name="lag of the overview group", kind="group_lag", threshold=5)
    now = datetime.now(UTC)
    common = {"rule": rule, "rule_name": rule.name, "last_evaluated_at": now, "threshold": 5}
    common["cluster"] = live_cluster.namesrv_addr
    AlertEvent.objects.create(**common, subject="g:pending", group="pending-group", state="pending",
                              value=6, started_at=now)  # fmt: skip
    AlertEvent.objects.create(**common, subject="g:firing", group=GROUP, state="firing", value=9,
                              started_at=now - timedelta(minutes=6), firing_at=now)  # fmt: skip
    response = viewer_client.get("/")
    events = _sections(response)["alerts"].data
    assert [e.state for e in events] == ["firing", "pending"]
    assert _sections(response)["alerts"].count == 1
    html = response.content.decode()
    assert 'data-alert-state="firing"' in html and f'group <a href="/groups/{GROUP}/">{GROUP}</a>' in html
    # Another name server's events are that name server's overview's.
    AlertEvent.objects.filter(state="pending").update(cluster="10.0.0.1:9876")
    assert [e.state for e in _sections(viewer_client.get("/"))["alerts"].data] == ["firing"]


def test_recent_history_stands_for_now_and_gives_dead_letters_of_today(
    viewer_client, live_cluster, monkeypatch
):
    from core import clock
    from history.models import Cycle, Point, Series

    noon = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    monkeypatch.setattr(clock, "now", lambda: noon + timedelta(seconds=10))
    cluster = live_cluster.namesrv_addr

    def store(metric: str, name: str, values: list[tuple[datetime, float]], scope: str = "group") -> None:
        series = Series.objects.create(cluster=cluster, metric=metric, scope=scope, name=name)
        Point.objects.bulk_create(Point(series=series, taken_at=at, value=v) for at, v in values)

    earlier = noon - timedelta(hours=3)
    Cycle.objects.create(cluster=cluster, taken_at=earlier)
    Cycle.objects.create(cluster=cluster, taken_at=noon)
    store("lag", "history-group", [(earlier, 10), (noon, 4321)])
    store("lag", "caught-up-group", [(noon, 0)])
    store("consume_tps", "history-group", [(noon, 0)])
    store("clients", "history-group", [(noon, 1)])
    store("dlq_messages", "history-group", [(earlier, 3), (noon, 10)])
    sections = _sections(viewer_client.get("/"))
    assert [(g.group, g.lag, g.clients) for g in sections["lagging"].data] == [("history-group", 4321, 1)]
    assert sections["lagging"].source == "history, sampled 10 s ago"
    [dead] = sections["dead_letters"].data
    # What the DLQ holds is the history's; "New today" is the brokers' (this group has no DLQ
    # topic on them: unknown, never a made-up 0).
    assert (dead.group, dead.total, dead.today) == ("history-group", 10, None)


def test_stale_history_is_not_taken_for_now(viewer_client, live_cluster, lagging, monkeypatch):
    from core import clock
    from history.models import Cycle, Point, Series

    long_ago = datetime.now(UTC) - timedelta(hours=2)
    cluster = live_cluster.namesrv_addr
    Cycle.objects.create(cluster=cluster, taken_at=long_ago)
    series = Series.objects.create(cluster=cluster, metric="lag", scope="group", name="old-group")
    Point.objects.create(series=series, taken_at=long_ago, value=99)
    monkeypatch.setattr(clock, "now", lambda: datetime.now(UTC))
    sections = _sections(viewer_client.get("/"))
    assert sections["lagging"].source.startswith("live")
    assert GROUP in {g.group for g in sections["lagging"].data}


def test_a_section_that_fails_shows_its_error_and_the_rest_of_the_page(
    viewer_client, live_cluster, monkeypatch
):
    from console.services import overview

    def refused(*args, **kwargs):
        raise MQClientError("consume stats refused: broker busy")

    monkeypatch.setattr(overview, "group_rows", refused)
    response = viewer_client.get("/")
    sections = _sections(response)
    assert sections["lagging"].error == "consume stats refused: broker busy"
    assert sections["brokers"].data.up >= 2
    html = response.content.decode()
    assert "Consumer lag could not be read." in html and "broker busy" in html and 'id="brokers"' in html


def test_a_user_without_a_role_gets_what_to_do_and_anonymous_users_the_login(client, live_cluster):
    from tests.cluster import create_user

    assert client.get("/")["Location"].startswith("/accounts/login/")
    client.force_login(create_user("newbie", None, "pw-of-the-newbie-42"))
    assert "has no console role yet" in client.get("/").content.decode()


def test_topic_rows_offer_send_query_delete_by_role(viewer_client, operator_client, lagging):
    viewer = viewer_client.get("/topics/", {"q": TOPIC}).content.decode()
    operator = operator_client.get("/topics/", {"q": TOPIC}).content.decode()
    query = f'href="/messages/?mode=time&amp;topic={TOPIC}">Query'
    assert query in viewer and query in operator
    assert f'href="/topics/{TOPIC}/#send-message">Send' in operator and "#send-message" not in viewer
    assert f'action="/topics/{TOPIC}/delete"' in operator and "/delete" not in viewer


def test_group_rows_offer_the_lag_and_the_reset_by_role(viewer_client, operator_client, lagging):
    viewer = viewer_client.get("/groups/", {"q": GROUP}).content.decode()
    operator = operator_client.get("/groups/", {"q": GROUP}).content.decode()
    assert f'href="/groups/{GROUP}/">View lag' in viewer and "#reset-offset" not in viewer
    assert f'href="/groups/{GROUP}/#reset-offset">Reset offset' in operator
