"""README, High availability, "Trying it: `make run-ha`" (issue 32 item 8), step by step in headless
Chromium against ``make run-ha`` itself (tests/browser/make_run_ha.py): messages sent with the SDK,
the master found on the console's Cluster page and with ``mqadmin getSyncStateSet``, the master
``kill -9``-ed, the page shows the other broker as master, sends resume, the runner restarts the
killed broker, which comes back as the new master's slave, and a consumer gets every acknowledged
message. Before, the runner stopped the whole stack at the master's death ("broker1 exited by
itself, stopping the others"): later sends failed and the console refused connections. Any console
error or failed request fails the test (tests/browser/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from broker.client import CONSUME_FROM_FIRST_OFFSET, ConsumeConcurrentlyStatus, PushConsumer
from broker.client.admin import MQAdmin
from broker.local_cluster import ROOT, wait_until
from broker.local_failover import QUEUES, TOPIC, KeyedLoad
from tests.browser.ha_stack import REPLICAS
from tests.browser.make_run_ha import MakeRunHa

pytestmark = pytest.mark.timeout(420)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    running = MakeRunHa(tmp_path_factory.mktemp("make-run-ha-runner"))
    try:
        running.start()
        yield running
    finally:
        running.stop()


def mqadmin(*argv: str) -> str:
    """The venv's ``mqadmin`` (what the README's commands run); its output."""
    done = subprocess.run([str(Path(sys.executable).parent / "mqadmin"), *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def sync_state_set(stack: MakeRunHa) -> dict[str, str]:
    """``mqadmin getSyncStateSet -a <controller> -b broker-a`` as ``{field: value}``."""
    lines = mqadmin("getSyncStateSet", "-a", stack.controller_addr, "-b", "broker-a").splitlines()
    return dict(line.lstrip("#").split("\t", 1) for line in lines if line.startswith("#"))


def create_topic(stack: MakeRunHa, master: str, slave: str) -> None:
    """On the master; its slave copies it (metadata follows the master every 10 s), so the topic
    is there whichever broker is master later."""
    with MQAdmin(stack.namesrv_addr) as admin:
        admin.create_or_update_topic(stack.addrs[master], TOPIC, QUEUES, QUEUES)
        wait_until(lambda: TOPIC in admin.all_topic_configs(stack.addrs[slave]), timeout=60,
                   interval=0.5, what=f"{TOPIC} copied to the slave")  # fmt: skip


def role(stack: MakeRunHa, name: str) -> str:
    with MQAdmin(stack.namesrv_addr) as admin:
        return admin.broker_runtime_info(stack.addrs[name]).get("brokerRole", "")


def consume_keys(stack: MakeRunHa, wanted: set[str], timeout: float = 60) -> set[str]:
    """A new group reading the topic from its start until it has every key of ``wanted``."""
    received: set[str] = set()
    changed = threading.Condition()

    def listener(messages, context):
        with changed:
            received.update(" ".join(m.keys) for m in messages)
            changed.notify_all()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    first = CONSUME_FROM_FIRST_OFFSET
    consumer = PushConsumer(
        "run-ha-readers", stack.namesrv_addr, consume_from_where=first, rebalance_interval_ms=500
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        with changed:
            changed.wait_for(lambda: wanted <= received, timeout)
            return set(received)
    finally:
        consumer.shutdown()


def test_the_readme_failover_walk_through_in_make_run_ha(page, log_in, stack, shot):
    log_in(page, "viewer")
    page.goto("/cluster/")
    broker_set = page.locator("#replication [data-broker-set=broker-a]")
    # Only a broker of the in-sync set can be elected: the slave joins it once caught up.
    expect(broker_set.locator("tr[data-role=SLAVE] .in-sync")).to_have_text("in sync", timeout=60_000)
    master_row = broker_set.locator("tr[data-broker-id='0']")
    expect(master_row).to_have_attribute("data-role", "SYNC_MASTER")
    master = next(name for name in REPLICAS if stack.addrs[name] in master_row.inner_text())
    other = next(name for name in REPLICAS if name != master)
    before = sync_state_set(stack)
    assert (before["MasterAddr"], before["SyncStateSetNums"]) == (stack.addrs[master], "2"), before

    create_topic(stack, master, other)
    load = KeyedLoad(stack.namesrv_addr, threads=2, pause_s=0.01).start()  # ~200 sends/s at most
    try:
        wait_until(lambda: len(load.acks()) >= 50, timeout=60, what="acknowledged sends before the kill")
        stack.kill_dash_9(master)
        killed_at = time.monotonic()

        # The console shows the other broker as master, as the controller and name server say.
        expect(master_row).to_contain_text(stack.addrs[other], timeout=30_000)
        expect(master_row).to_have_attribute("data-role", "SYNC_MASTER")
        after = sync_state_set(stack)
        assert after["MasterAddr"] == stack.addrs[other], after
        assert int(after["MasterEpoch"]) > int(before["MasterEpoch"]), (before, after)
        assert stack.master() == other
        # Sends resume by themselves (the SDK's producer, retries off).
        wait_until(
            lambda: load.every_thread_acked_after(killed_at), timeout=60, what="sends acknowledged again"
        )
        shot("make-run-ha-failover")

        # The runner restarts the killed broker; the controller makes it the new master's slave.
        stack.wait_for_output("system", f"restarting {master} in 10 s", 30)
        stack.wait_for_output(master, f"listening on {stack.addrs[master]}", 120)
        slave_row = broker_set.locator("tr[data-broker-id]", has_text=stack.addrs[master])
        expect(slave_row).to_have_attribute("data-role", "SLAVE", timeout=60_000)
        expect(slave_row.locator(".in-sync")).to_have_text("in sync", timeout=60_000)
        wait_until(
            lambda: role(stack, master) == "SLAVE", timeout=30, what=f"{master} a slave by its own word"
        )
        assert sync_state_set(stack)["SyncStateSetNums"] == "2"
        assert stack.master() == other
        rejoined = time.monotonic()
        wait_until(lambda: load.first_ack_started_after(rejoined), timeout=30, what="a send after the rejoin")
    finally:
        load.stop()
    shot("make-run-ha-rejoined")

    acked = {ack.key for ack in load.acks()}
    received = consume_keys(stack, acked)
    assert sorted(acked - received) == [], (
        f"{len(acked - received)} of {len(acked)} acknowledged keys not consumed"
    )
    # The stack ran on throughout: nothing but the killed broker ended. Ctrl-C stops all cleanly
    # (the page first leaves the console, whose polls would fail once web stops).
    page.goto("about:blank")
    stack.stop_with_ctrl_c()
    output = stack.output()
    assert "stopping the others" not in output
    assert output.count("exited by itself") == 1, output[-4000:]
    for name in stack.pids():
        assert f"{name} stopped (rc=0)" in output, output[-4000:]
    assert "SIGKILL" not in output.partition("SIGINT received")[2], output[-4000:]
    print(f"\nmake run-ha walk-through: {len(acked)} acknowledged, {load.failed} failed sends, all consumed")
