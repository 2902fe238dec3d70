"""Metric history in headless Chromium (W16, acceptance 1): a group with lag on a real broker, sampled
by the history task; the group page's lag chart shows the stored points after a reload, the window
switch redraws it from the rollups' side, a topic not sampled yet says so instead of drawing an
empty canvas, and the history page lists the group. As a viewer; zero console errors or failed
requests (the fixtures fail the test on any)."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from playwright.sync_api import expect

from broker.client.admin import MQAdmin
from broker.local_cluster import ROOT, wait_until
from tests.cluster import OPS, send

pytestmark = pytest.mark.timeout(600)

TOPIC, GROUP, LATE_TOPIC = "HistoryBrowserOrders", "history-browser-group", "HistoryBrowserLate"
SAMPLE = "from history.tasks import sample_clusters; sample_clusters()"


def _sample(stack) -> None:
    """One run of the beat task, in a process of the stack's own (its database, its settings)."""
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SAMPLE],
        cwd=ROOT,
        env=stack.env,
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=120,
    )


@pytest.fixture(scope="module")
def sampled_group(stack):
    """A group 5 messages behind on a topic of the stack's broker, sampled twice."""
    with MQAdmin(stack.namesrv_addr) as admin:
        (master,) = admin.resolve_masters(None, OPS.cluster_name)
        admin.create_or_update_topic(master, TOPIC, 1, 1)

        async def group_at_zero():
            await admin.core.create_or_update_subscription_group(master, GROUP)
            await admin.core.update_consumer_offset(master, GROUP, TOPIC, 0, 0)

        admin.run(group_at_zero())
        send(stack.namesrv_addr, TOPIC, 5)
        wait_until(lambda: admin.consumer_progress(GROUP, TOPIC).diff_total == 5, timeout=20, what="lag 5")
    _sample(stack)
    _sample(stack)  # a rate (the brokers' TPS) is the growth between two cycles
    return GROUP


def _drawn_points(page, figure: str) -> int:
    """Points Chart.js holds for the figure's canvas (0 when no chart is drawn)."""
    return page.evaluate(
        """(selector) => {
            const canvas = document.querySelector(selector + " canvas");
            const chart = window.Chart && Chart.getChart(canvas);
            if (!chart) return 0;
            return chart.data.datasets.reduce((n, set) => n + set.data.filter((p) => p.y !== null).length, 0);
        }""",
        figure,
    )


def test_group_lag_chart_shows_history_after_reload(page, log_in, stack, sampled_group, shot):
    log_in(page, "viewer")
    page.goto(f"/groups/{sampled_group}/")
    lag = page.locator("#history-lag")
    expect(lag).to_have_attribute("data-state", "drawn")
    first = _drawn_points(page, "#history-lag")
    assert first >= 1
    expect(lag.locator(".chart")).to_be_visible()

    _sample(stack)  # the sampler goes on while nobody looks; a reload shows what it stored
    page.reload()
    expect(lag).to_have_attribute("data-state", "drawn")
    assert _drawn_points(page, "#history-lag") == first + 1
    shot("history-group-lag")

    lag.locator("button[data-window=day]").click()
    expect(lag.locator("button[data-window=day]")).to_have_attribute("aria-pressed", "true")
    expect(lag).to_have_attribute("data-state", "drawn")
    assert _drawn_points(page, "#history-lag") >= 1  # raw points newer than any rollup, in 5-min steps


def test_a_topic_not_sampled_yet_says_so(page, log_in, stack, sampled_group):
    with MQAdmin(stack.namesrv_addr) as admin:
        (master,) = admin.resolve_masters(None, OPS.cluster_name)
        admin.create_or_update_topic(master, LATE_TOPIC, 1, 1)
    log_in(page, "viewer")
    page.goto(f"/topics/{LATE_TOPIC}/")
    size = page.locator("#history-size")
    expect(size).to_have_attribute("data-state", "empty")
    expect(size.locator(".history-status")).to_contain_text(
        "No history for the last hour yet — the sampler runs every"
    )
    expect(size.locator(".chart")).to_be_hidden()


def test_cluster_page_and_history_page(page, log_in, stack, sampled_group, shot):
    log_in(page, "viewer")
    page.goto("/cluster/")
    expect(page.locator("#history-broker-tps")).to_have_attribute("data-state", "drawn")
    expect(page.locator("#history-disk")).to_have_attribute("data-state", "drawn")
    shot("history-cluster")
    page.click("text=Top topics and groups, messages per day")
    expect(page.locator("h1")).to_have_text("History")
    expect(page.locator(".top-table", has_text="Groups by lag")).to_contain_text(sampled_group)
    expect(page.locator("canvas[data-daily-url]")).to_have_attribute("data-state", "drawn")
    shot("history-page")


def test_a_failing_history_query_shows_its_reason(page, log_in, sampled_group, browser_problems):
    """The error state: the chart's JSON answering 503 (the history database down) is said in place
    of the chart, with the server's reason; the other charts of the page are drawn as usual."""
    path = "/history/charts/group/dlq.json"
    browser_problems.expect_status(503, path)
    body = '{"title": "History unavailable", "error": "the history database did not answer: test"}'
    page.route(
        f"**{path}?*", lambda route: route.fulfill(status=503, content_type="application/json", body=body)
    )
    log_in(page, "viewer")
    page.goto(f"/groups/{sampled_group}/")
    dlq = page.locator("#history-dlq")
    expect(dlq).to_have_attribute("data-state", "error")
    expect(dlq.locator(".history-status")).to_contain_text(
        "History could not be loaded: the history database did not answer: test. Trying again in 30 s."
    )
    expect(dlq.locator(".chart")).to_be_hidden()
    expect(page.locator("#history-lag")).to_have_attribute("data-state", "drawn")


_CHART_TIMES = """(selector) => {
    const chart = Chart.getChart(document.querySelector(selector + " canvas"));
    const ticks = chart.scales.x.ticks;
    const title = chart.options.plugins.tooltip.callbacks.title([{ parsed: { x: ticks[0].value } }]);
    return { ticks: ticks.map((t) => [t.value, t.label]), title: title, first: ticks[0].value };
}"""


def test_chart_times_are_24_hour_utc_like_the_tables(browser, stack, sessions, sampled_group):
    """A browser in New York with an en-US locale (whose own times read "9:10 AM"): the history
    chart's ticks and tooltip and the live TPS chart's labels are 24-hour UTC, as every table."""
    context = browser.new_context(
        viewport={"width": 1280, "height": 900},
        base_url=stack.web_url,
        timezone_id="America/New_York",
        locale="en-US",
    )
    try:
        context.add_cookies(sessions("viewer"))
        page = context.new_page()
        page.goto(f"/topics/{TOPIC}/")
        size = page.locator("#history-size")
        expect(size).to_have_attribute("data-state", "drawn")
        drawn = page.evaluate(_CHART_TIMES, "#history-size")
        assert drawn["ticks"]
        for value, label in drawn["ticks"]:
            assert label == datetime.fromtimestamp(value / 1000, UTC).strftime("%H:%M"), drawn["ticks"]
        first = datetime.fromtimestamp(drawn["first"] / 1000, UTC)
        assert drawn["title"] == first.strftime("%Y-%m-%d %H:%M:%S UTC")

        # The live chart: its first rate needs two samples of the topic's running totals.
        page.wait_for_function(
            "() => { const c = Chart.getChart(document.querySelector('canvas[data-sample-url]'));"
            " return c && c.data.labels.length > 0; }"
        )
        label = page.evaluate(
            "Chart.getChart(document.querySelector('canvas[data-sample-url]')).data.labels[0]"
        )
        assert re.fullmatch(r"\d\d:\d\d:\d\d", label), label
        at = datetime.strptime(label, "%H:%M:%S").replace(tzinfo=UTC)
        now = datetime.now(UTC)
        seconds_of_day = (now.hour * 3600 + now.minute * 60 + now.second) - (
            at.hour * 3600 + at.minute * 60 + at.second
        )
        assert seconds_of_day % 86400 < 600, (label, now)  # UTC, not New York's clock five hours off
    finally:
        context.close()
