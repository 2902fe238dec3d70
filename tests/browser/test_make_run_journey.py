"""Acceptance of issue 19: one journey through the stack as `make run` starts it (the Procfile's
lines, broker.conf created under a temp var dir, SQLite, Celery's filesystem transport, local
Spark). Traffic from the SDK fills a commit-log segment; the broker archives it once sealed; an
admin runs the default report from the Analytics page and downloads its CSV, whose rows match
what was sent; a viewer sees no mutating button. The shared browser fixtures fail every step on
any console error or failed request.

One test (the steps need each other), written as one function per step.

Before it, on the same stack while it is fresh, issue 32's newcomer journey (its acceptance): the
traffic of ``newcomer_traffic`` (three topics, a keeping-up, a slow and a retrying group, dead
letters, delayed and undecided transactional messages), then every page in Chromium, the figures
of the overview, group and history pages equal to what the engine says was sent and consumed.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from broker.client import Producer
from broker.client.admin import MQAdmin
from broker.common.message import Message
from broker.common.message_codec import decode_offset_msg_id
from broker.local_cluster import wait_until
from broker.store.archive import SegmentArchiver
from tests.browser import newcomer_traffic as traffic
from tests.browser.conftest import ARTIFACTS as BROWSER_ARTIFACTS
from tests.browser.make_run_stack import MakeRunStack
from tests.browser.stack import ADMIN_USER

pytestmark = pytest.mark.timeout(600)

TOPIC = "JourneyOrders"
BODY_BYTES = 4000
SEGMENT_BYTES = 8 * 1024 * 1024  # make run's mappedFileSizeCommitLog
VIEWER, VIEWER_PASSWORD = "vera", "viewer-journey-password-1"
REPORT_TIMEOUT_MS = 300_000
# Forms a viewer may see: log out, and the choice of name server (a preference, not a change).
HARMLESS_FORMS = ("/accounts/logout/", "/namesrv")
MUTATING = re.compile(r"run report|delete|save|replay|commit|roll back|update|reset|send|skip", re.I)
ARTIFACTS = BROWSER_ARTIFACTS / "make-run"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    running = MakeRunStack(tmp_path_factory.mktemp("make-run"))
    try:
        running.start()
        yield running
    finally:
        running.stop()


def _log_in(page, user: str, password: str) -> None:
    page.goto("/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    expect(page.locator(".who")).to_contain_text(user)


# -- issue 32's newcomer journey -------------------------------------------------------------------
CELLS = "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))"


def _sampled_at_rest(stack, journey) -> traffic.Counters:
    """A history cycle taken while the engine's counters stand still; those counters."""

    def read():
        before = traffic.engine_counters(journey.admin, stack.broker_addr)
        traffic.history_sample(stack)
        return before, None, traffic.engine_counters(journey.admin, stack.broker_addr)

    return traffic.steady(read)[0]


def _overview_equals_the_engine(page, stack, journey) -> None:
    def read():
        before = traffic.engine_counters(journey.admin, stack.broker_addr)
        page.goto("/")
        tiles = {
            t: page.locator(f'[data-tile="{t}"] b').inner_text() for t in ("brokers", "in-today", "out-today")
        }
        return before, tiles, traffic.engine_counters(journey.admin, stack.broker_addr)

    counters, tiles = traffic.steady(read)
    # Messages in/out today: everything the broker stored and handed out today (the sends, retries,
    # dead letters, the delayed and half messages), the engine's own counters.
    assert tiles == {"brokers": "1 / 1", "in-today": str(counters.put), "out-today": str(counters.got)}
    lagging = page.locator("#lagging-groups tbody tr").evaluate_all(CELLS)
    slow_lag = journey.sent[traffic.PAYMENTS] - traffic.SLOW_TAKES
    assert [row[:2] for row in lagging] == [[traffic.SLOW, str(slow_lag)]]
    dead = page.locator("#dead-letters tbody tr").evaluate_all(CELLS)
    poison = str(journey.poison_count())
    # "New today" is every dead letter since 00:00 UTC: fixed by item 3 (other branch).
    assert [row[:3] for row in dead] == [[traffic.RETRIES, poison, poison]]


def _group_pages_equal_the_engine(page, journey) -> None:
    for group in (traffic.KEEPING_UP, traffic.SLOW, traffic.RETRIES):
        progress = journey.admin.consumer_progress(group)
        page.goto(f"/groups/{group}/")
        expect(page.locator(".stats div", has_text="lag (messages)").locator("b")).to_have_text(
            str(progress.diff_total)
        )
        table = page.locator("section.card", has_text="Progress per queue").locator("tbody tr")
        rows = sorted(row[:6] for row in table.evaluate_all(CELLS))
        engine = sorted(
            [
                q.topic,
                q.broker_name,
                str(q.queue_id),
                str(q.broker_offset),
                str(q.consumer_offset),
                str(q.diff),
            ]
            for q in progress.queues
        )
        assert rows == engine, group
    assert journey.lag(traffic.SLOW) == journey.sent[traffic.PAYMENTS] - traffic.SLOW_TAKES
    assert journey.lag(traffic.KEEPING_UP) == journey.lag(traffic.RETRIES) == 0


def _history_page_equals_the_engine(page, journey, baseline, final) -> None:
    page.goto("/history/")
    by_lag = page.locator("section.top-table", has_text="Groups by lag").locator("tbody tr")
    slow_lag = journey.sent[traffic.PAYMENTS] - traffic.SLOW_TAKES
    assert [row[1:] for row in by_lag.evaluate_all(CELLS)] == [[traffic.SLOW, f"{slow_lag:.2f}"]]
    # Messages in and out per day (summed: a run may cross midnight), against what the engine
    # stored and handed out between the two samples of this fresh stack's history.
    days = page.locator("#daily tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => Number(c.textContent.trim())))"
    )
    assert [sum(d[1] for d in days), sum(d[2] for d in days)] == [
        final.put - baseline.put,
        final.got - baseline.got,
    ]


def _operations_pages_equal_the_engine(page, journey) -> None:
    page.goto("/ops/dlq/")
    dlq = page.locator("table.ops-table tbody tr").evaluate_all(CELLS)
    assert dlq == [[traffic.RETRIES, str(journey.dead_letters(traffic.RETRIES))]]
    page.goto("/ops/transactions/")
    pending = page.locator("tr[data-msg-id]").evaluate_all("rows => rows.map(r => r.dataset.msgId)")
    assert sorted(pending) == sorted(journey.half_ids)
    broker = journey.admin.consumer_progress(traffic.KEEPING_UP).queues[0].broker_name
    page.goto(f"/ops/delayed/{broker}/{traffic.DELAY_LEVEL}/")
    expect(page.locator("h1")).to_contain_text(f"{journey.delayed_pending()} pending")
    listed = page.locator("table.ops-table tbody tr td:first-child").all_inner_texts()
    assert sorted(listed) == sorted(journey.delayed_ids)


def _every_page_opens(page, journey) -> None:
    """The sidebar's pages, then the pages of what the journey made (the browser fixtures fail the
    test on any console error or failed request)."""
    page.goto("/")
    sidebar = page.locator("nav.mainnav a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert len(sidebar) >= 15, sidebar
    dead = journey.poisoned[0]
    details = [f"/topics/{t}/" for t in traffic.SENT] + [f"/groups/{g}/" for g in traffic.GROUPS]
    details += [
        f"/ops/dlq/{traffic.RETRIES}/",
        "/ops/delayed/",
        f"/messages/{dead.offset_msg_id}/",
        f"/ops/trace/?msgId={dead.msg_id}&topic={traffic.AUDIT}",
        f"/cluster/broker/{journey.broker_addr}/",
        f"/messages/?topic={traffic.ORDERS}",
    ]
    for path in [*sidebar, *details]:
        page.goto(path)
        expect(page.locator("main")).to_be_visible()


def test_newcomer_journey(page, stack):
    """Issue 32's acceptance: the newcomer's traffic, then every page; the overview, group and
    history figures equal to what was sent and consumed, as the engine reports it."""
    with MQAdmin(stack.namesrv_addr) as admin:
        journey = traffic.Journey(stack, admin)
        journey.create_topics()
        baseline = _sampled_at_rest(stack, journey)
        journey.start_consumers()
        try:
            journey.send_all()
            journey.settled()
            final = _sampled_at_rest(stack, journey)
            _log_in(page, ADMIN_USER, stack.password)
            _overview_equals_the_engine(page, stack, journey)
            _group_pages_equal_the_engine(page, journey)
            _history_page_equals_the_engine(page, journey, baseline, final)
            _operations_pages_equal_the_engine(page, journey)
            _every_page_opens(page, journey)
        finally:
            journey.stop_consumers()


# -- issue 19's journey --------------------------------------------------------------------------
def _traffic_from_the_sdk_is_archived_once_its_segment_seals(stack) -> int:
    producer = Producer("JOURNEY_PRODUCER", stack.namesrv_addr).start()
    try:
        offsets: list[int] = []
        # Enough to fill the first 8 MiB segment and roll into the next: it is then sealed.
        while not offsets or max(offsets) < SEGMENT_BYTES:
            message = Message(TOPIC, b"%08d" % len(offsets) + b"x" * (BODY_BYTES - 8))
            message.keys, message.tags = f"order-{len(offsets)}", "journey"
            offsets.append(decode_offset_msg_id(producer.send(message).offset_msg_id)[1])
    finally:
        producer.shutdown()
    archiver = SegmentArchiver(str(stack.var_dir / "archive"))
    first = f"{0:020d}"
    wait_until(lambda: first in archiver.list_archived(), timeout=60, what="the sealed segment archived")
    # The report reads what is archived: the messages stored in the sealed segment.
    archived = sum(1 for offset in offsets if offset < SEGMENT_BYTES)
    assert 0 < archived < len(offsets)
    return archived


def _the_default_report_runs_from_the_analytics_page(page, stack, shot, archived: int) -> str:
    _log_in(page, ADMIN_USER, stack.password)
    page.goto("/analytics/")
    expect(page.locator("#archive-status")).to_contain_text("1 archived segment")
    shot("journey-01-analytics")
    page.get_by_role("button", name="Run report").click()
    expect(page).to_have_url(re.compile(r"/analytics/runs/\d+/$"))
    run_path = page.url.removeprefix(stack.web_url)
    expect(page.locator("#run-status")).to_have_attribute("data-status", "done", timeout=REPORT_TIMEOUT_MS)
    section = page.locator("#section-throughput")
    expect(section).to_be_visible()  # the finished run's page (reloaded once done) shows its tables
    row = section.locator("tbody tr", has_text=TOPIC)
    expect(row.locator("td").first).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:00$"))  # a UTC hour
    shot("journey-02-report-done")

    with page.expect_download() as download:
        section.get_by_role("link", name="throughput.csv").click()
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    ours = [r for r in rows if r["topic"] == TOPIC]
    assert ours and {r["kind"] for r in ours} == {"normal"}
    assert sum(int(r["messages"]) for r in ours) == archived
    assert sum(int(r["bytes"]) for r in ours) == archived * BODY_BYTES
    return run_path


def _a_viewer_sees_no_mutating_button(browser, stack, run_path: str) -> None:
    stack._manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import Group, User; "
        f"u = User.objects.create_user({VIEWER!r}, password={VIEWER_PASSWORD!r}); "
        "u.groups.add(Group.objects.get_or_create(name='viewer')[0])",
    )
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=stack.web_url)
    context.set_default_timeout(20_000)
    page = context.new_page()
    try:
        _log_in(page, VIEWER, VIEWER_PASSWORD)
        pages = ["/analytics/", run_path, "/analytics/schedules/", "/cluster/", "/topics/",
                 f"/topics/{TOPIC}/", "/groups/", "/messages/"]  # fmt: skip
        for path in pages:
            page.goto(path)
            expect(page.locator("main")).to_be_visible()
            actions = [
                action
                for action in page.locator("form[method=post], form[method=POST]").evaluate_all(
                    "forms => forms.map(f => f.getAttribute('action') || location.pathname)"
                )
                if not action.startswith(HARMLESS_FORMS)
            ]
            assert actions == [], f"{path} offers a viewer forms that change things: {actions}"
            buttons = page.locator("main").get_by_role("button", name=MUTATING).all_inner_texts()
            assert buttons == [], f"{path} shows a viewer buttons that change things: {buttons}"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "journey-03-viewer.png"), full_page=True)
    finally:
        context.close()


def test_make_run_journey(page, browser, stack, shot):
    archived = _traffic_from_the_sdk_is_archived_once_its_segment_seals(stack)
    run_path = _the_default_report_runs_from_the_analytics_page(page, stack, shot, archived)
    _a_viewer_sees_no_mutating_button(browser, stack, run_path)
