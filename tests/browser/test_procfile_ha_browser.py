"""The cluster page with a slave (issue 22), in headless Chromium against the stack as
``make run-ha`` starts it (Procfile.ha: name server, controller, the two brokers of one set in
controller mode, web): the replication section shows the master the controller chose and its
slave as they report themselves, refreshes itself under the
Content-Security-Policy with no violation, and a viewer may read it. Any console error or failed
request fails the test (tests/browser/conftest.py)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.ha_stack import HaStack
from tests.browser.test_security_browser import COLLECT_VIOLATIONS

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    running = HaStack(tmp_path_factory.mktemp("make-run-ha"))
    try:
        running.start(("namesrv", "controller", "broker1", "broker2", "web"))
        yield running
    finally:
        running.stop()


def test_cluster_page_shows_the_master_and_its_slave_and_refreshes(page, log_in, stack, shot):
    log_in(page, "viewer")
    page.context.add_init_script(COLLECT_VIOLATIONS)
    page.goto("/cluster/")
    broker_set = page.locator("#replication [data-broker-set=broker-a]")
    # broker1 started first and is master (brokerId 0); broker2 is a slave under the id the
    # controller gave it.
    master = broker_set.locator("tr[data-broker-id='0']")
    slave = broker_set.locator("tr[data-broker-id]", has_text=stack.addrs["broker2"])
    expect(master).to_have_attribute("data-role", "SYNC_MASTER")
    expect(slave).to_have_attribute("data-role", "SLAVE")
    expect(master).to_contain_text(stack.addrs["broker1"])
    # The slave connects to its master within its first HA round (the page may be older).
    with page.expect_response(lambda r: r.request.headers.get("hx-target") == "replication", timeout=15_000):
        pass
    expect(slave.locator(".ha-state .badge")).to_have_text("connected to master", timeout=30_000)
    expect(master.locator(".ha-state .badge")).to_have_text("1 slave connected")
    expect(slave.locator(".lag-bytes")).to_have_attribute("data-bytes", "0", timeout=30_000)
    # The controller's view (make run-ha's brokers run in controller mode): the caught-up slave
    # joins the in-sync set at its master's next check.
    expect(slave.locator(".in-sync")).to_have_text("in sync", timeout=30_000)
    shot("ha-cluster-replication")
    assert page.evaluate("window.__violations || []") == []
