"""The overview in headless Chromium (issue 23, acceptance 4): a group really behind (its consumer
read, committed and stopped; more messages came) and a lag rule fired by the alerts evaluator on
two sampling cycles of the history sampler under a fake clock (the first three minutes back, so the
rule's two minutes have passed at the second): the home page shows the firing alert, the header
badge counts it, the lagging group is listed from the history. The layout holds at 1280x800 and
1440x900: no horizontal scroll, the sidebar beside the content, no section over another. Zero
console errors or failed requests (the fixtures fail the test on any)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from playwright.sync_api import expect

from broker.client.admin import MQAdmin
from broker.local_cluster import ROOT
from tests.lagging_group import make_lagging_group

pytestmark = pytest.mark.timeout(600)

TOPIC, GROUP, RULE = "OverviewBrowserOrders", "overview-browser-group", "Overview browser lag"
VIEWPORTS = [(1280, 800), (1440, 900)]

FIRE = """
from datetime import timedelta
from alerts.models import AlertEvent, AlertRule
from core import cluster_access
from history import sampler
from core import clock

namesrv, rule, group = {namesrv!r}, {rule!r}, {group!r}
AlertRule.objects.create(name=rule, kind="group_lag", threshold=0, for_minutes=2, group_pattern=group,
                         severity="critical")
real_now = clock.now
admin = cluster_access.admin_for(namesrv)
try:
    start = real_now() - timedelta(minutes=3)
    clock.now = lambda: start
    sampler.sample(namesrv, admin)  # the lag is there: pending
    assert AlertEvent.objects.get(rule_name=rule).state == "pending"
    clock.now = real_now
    sampler.sample(namesrv, admin)  # three minutes on: past the rule's two, firing
    assert AlertEvent.objects.get(rule_name=rule).state == "firing"
finally:
    clock.now = real_now
    cluster_access.close_all()
"""


@pytest.fixture(scope="module")
def firing_lag_alert(stack):
    """GROUP behind on TOPIC, sampled twice into the stack's history, its lag rule firing."""
    with MQAdmin(stack.namesrv_addr) as admin:
        lag = make_lagging_group(stack.namesrv_addr, admin, TOPIC, GROUP)
    code = FIRE.format(namesrv=stack.namesrv_addr, rule=RULE, group=GROUP)
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return lag


LAYOUT_CHECK = """() => {
    const problems = [];
    const root = document.documentElement, width = root.clientWidth;
    const name = (el) => el.id || el.dataset.tile;
    if (root.scrollWidth > width) problems.push(`page scrolls: ${root.scrollWidth} > ${width}`);
    const nav = document.querySelector("nav.mainnav").getBoundingClientRect();
    const content = document.querySelector(".content").getBoundingClientRect();
    if (nav.right > content.left + 0.5) problems.push(`sidebar ends at ${nav.right} > ${content.left}`);
    const boxes = [...document.querySelectorAll(".overview-grid > .card, .tiles > .tile")];
    const rects = boxes.map((el) => el.getBoundingClientRect());
    const apart = (a, b) => a.right <= b.left + 0.5 || b.right <= a.left + 0.5
        || a.bottom <= b.top + 0.5 || b.bottom <= a.top + 0.5;
    rects.forEach((a, i) => {
        if (a.right > width + 0.5) problems.push(`${name(boxes[i])} leaves the page`);
        rects.slice(i + 1).forEach((b, k) => {
            if (!apart(a, b)) problems.push(`${name(boxes[i])} overlaps ${name(boxes[i + 1 + k])}`);
        });
    });
    // The overview's own tables fit their sections (the lists' wide tables may scroll in theirs).
    document.querySelectorAll(".overview-grid .tablewrap").forEach((wrap) => {
        const id = wrap.closest("section").id;
        if (wrap.scrollWidth > wrap.clientWidth + 1) problems.push(`${id} table scrolls`);
    });
    return problems;
}"""


def _layout_problems(page) -> list[str]:
    """No horizontal scroll; the sidebar left of the content; no overview section over another, none
    of its tables wider than its section."""
    return page.evaluate(LAYOUT_CHECK)


def test_overview_shows_the_firing_alert_and_the_lagging_group(page, log_in, stack, firing_lag_alert, shot):
    log_in(page, "viewer")
    page.goto("/")
    expect(page.locator("h1")).to_have_text("Overview")
    firing = page.locator('#firing-alerts tr[data-alert-state="firing"]', has_text=RULE)
    expect(firing).to_have_count(1)
    expect(firing).to_contain_text(f"group {GROUP}")
    ours = page.locator("#firing-alerts tr[data-alert-state]", has_text=f"group {GROUP}")
    expect(ours).to_have_count(2)
    expect(ours.filter(has_text="Consumer not consuming")).to_have_attribute("data-alert-state", "pending")
    # The stack is shared with other modules, whose groups the sampler may alert on too: the tile and
    # the badge count the firing alerts the table lists (firing first, up to 20), not the pending one.
    firing_rows = page.locator('#firing-alerts tr[data-alert-state="firing"]').count()
    assert 1 <= firing_rows < 20
    expect(page.locator('[data-tile="alerts"] b')).to_have_text(str(firing_rows))
    expect(page.locator(".alerts-badge.firing [data-alerts-firing]")).to_have_text(str(firing_rows))
    row = page.locator(f'#lagging-groups tr[data-group="{GROUP}"]')
    expect(row).to_be_visible()
    expect(row.locator("td.num").first).to_have_text(str(firing_lag_alert))
    expect(row).to_contain_text("offline")
    expect(page.locator("#lagging-groups .source")).to_contain_text("history, sampled")
    expect(page.locator('[data-tile="brokers"] b')).to_have_text("1 / 1")
    shot("overview")
    # The alert's subject leads to the group, whose page shows the lag.
    firing.locator(f'a[href="/groups/{GROUP}/"]').click()
    expect(page.locator("h1")).to_contain_text(GROUP)


@pytest.mark.parametrize(("width", "height"), VIEWPORTS)
def test_the_layout_holds_on_a_laptop(page, log_in, stack, firing_lag_alert, width, height, shot):
    log_in(page, "operator")
    page.set_viewport_size({"width": width, "height": height})
    for path in ("/", "/topics/", "/groups/", "/cluster/", "/export/"):
        page.goto(path)
        expect(page.locator("nav.mainnav a.active")).to_have_count(1)
        assert _layout_problems(page) == [], path
    page.goto("/")
    shot(f"overview-{width}x{height}")
    page.goto(f"/groups/?q={GROUP}")
    actions = page.locator(f'tr:has(a[href="/groups/{GROUP}/"]) td.actions')
    expect(actions.locator("a", has_text="Reset offset")).to_be_visible()
    expect(actions.locator("a", has_text="View lag")).to_be_visible()
