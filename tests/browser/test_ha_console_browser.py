"""The cluster page with a controller (issue 22) in headless Chromium: the console stack (name
server, broker, daphne web, Celery worker) started with ``CONSOLE_CONTROLLER_ADDR`` naming a real
controller process, on which a broker set of three is registered by hand (tests/console/
controller_sets.py). An admin sees the controller leader and the set's master, epoch and in-sync
set, follows a switchover through its confirmation to the controller's answer, and the page shows
the new master. Any console error, failed request or CSP violation fails the test."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.stack import Stack
from tests.browser.test_security_browser import COLLECT_VIOLATIONS
from tests.console.controller_sets import running_controller, three_replicas

pytestmark = pytest.mark.timeout(300)

SET_NAME = "broker-ha-ui"


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    with running_controller(tmp_path_factory.mktemp("ui-controller")) as group:
        yield group.listen["n0"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory, controller):
    running = Stack(tmp_path_factory.mktemp("stack-controller"), "embedded")
    try:
        with pytest.MonkeyPatch.context() as env:  # the web process reads it at its start
            env.setenv("CONSOLE_CONTROLLER_ADDR", controller)
            running.start()
        yield running
    finally:
        running.stop()


@pytest.fixture
def hand_set(controller):
    replicas = three_replicas([controller], SET_NAME)
    yield replicas
    replicas.stop()


def test_an_admin_switches_a_broker_sets_master_over_from_the_cluster_page(
    page, log_in, stack, controller, hand_set, shot
):
    log_in(page, "admin")
    page.context.add_init_script(COLLECT_VIOLATIONS)
    page.goto("/cluster/")
    expect(page.locator("#replication [data-controller=ok]")).to_be_visible()
    expect(page.locator("#replication .controller-leader")).to_have_text(f"n0 ({controller})")
    block = page.locator(f"#replication [data-broker-set='{SET_NAME}']")
    facts = block.locator(".controller-set")
    expect(facts).to_have_attribute("data-master-id", "1")
    expect(facts).to_have_attribute("data-master-epoch", "1")
    expect(facts.locator(".in-sync-set [data-replica]")).to_have_count(2)
    expect(facts.locator(".not-in-sync [data-replica='3']")).to_have_attribute("data-alive", "false")
    block.locator("details.epoch-history summary").click()
    expect(block.locator("table.epochs tr[data-epoch='1']")).to_have_attribute("data-start", "0")
    # The section refreshes itself with the controller's view too.
    with page.expect_response(lambda r: r.request.headers.get("hx-target") == "replication", timeout=15_000):
        pass
    shot("ha-controller-cluster")

    block.locator("a.switchover[data-target='2']").click()
    expect(page.locator("h1")).to_have_text(f"Switch the master of {SET_NAME}")
    expect(page.locator(".switchover-confirm")).to_contain_text(hand_set.addrs[2])
    expect(page.locator(".switchover-doubts")).to_have_count(0)
    assert hand_set.replicas().master_id == 1  # confirming is a separate step
    page.get_by_role("button", name="Make broker 2 the master").click()

    expect(page).to_have_url(f"{stack.web_url}/cluster/")
    expect(page.locator(".flash")).to_contain_text(
        f"Broker 2 ({hand_set.addrs[2]}) is the master of {SET_NAME}"
    )
    block = page.locator(f"#replication [data-broker-set='{SET_NAME}'] .controller-set")
    expect(block).to_have_attribute("data-master-id", "2")
    expect(block).to_have_attribute("data-master-epoch", "2")
    after = hand_set.replicas()
    assert (after.master_id, after.master_epoch) == (2, 2)
    page.goto("/audit/")
    expect(page.locator("body")).to_contain_text("broker.switchover")
    shot("ha-controller-switchover")
    assert page.evaluate("window.__violations || []") == []
