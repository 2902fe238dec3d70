"""The acceptance walk through the console in headless Chromium, against make-run-style processes
(name server, broker, daphne, Celery worker), once on embedded defaults and once on PostgreSQL +
Redis. Each step starts on a page of its own logged in as the admin, so any step runs alone too;
each page visited is saved as a screenshot, and each action a step takes is checked in the audit log.

"""

from __future__ import annotations

import threading

import pytest
from playwright.sync_api import expect

from broker.client import ConsumeConcurrentlyStatus, PushConsumer
from broker.client.admin import MQAdmin
from broker.common.message import Message, MessageExt
from broker.local_cluster import wait_until
from tests.browser.stack import ADMIN_USER
from tests.cluster import OPS, make_dead_letters, send, send_pending_transactions

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def page(page, log_in):
    log_in(page, "admin")
    return page


def _expect_audited(page, shot, *actions: str) -> None:
    """The audit log lists each of ``actions`` (the Celery worker records a job's end itself)."""

    def listed() -> bool:
        page.goto("/audit/")
        text = page.locator("main").inner_text()
        return all(action in text for action in actions)

    wait_until(listed, timeout=20, interval=0.5, what=f"{', '.join(actions)} in the audit log")
    shot("24-audit")


def test_01_log_in(page, stack, shot):
    page.context.clear_cookies()  # the login form itself, on a fresh session
    page.goto("/accounts/login/")
    shot("01-login")
    page.fill("input[name=username]", ADMIN_USER)
    page.fill("input[name=password]", stack.password)
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{stack.web_url}/")  # the home page: the overview
    expect(page.locator("h1")).to_have_text("Overview")
    expect(page.locator(".who")).to_contain_text(ADMIN_USER)
    shot("02-overview")


def test_02_create_topic_send_find_by_key_and_open_detail(page, shot):
    page.goto("/topics/")
    page.click("#create-topic summary")
    page.fill("#create-topic input[name=topic]", "BrowserTopic")
    page.fill("#create-topic input[name=read_queue_nums]", "4")
    page.fill("#create-topic input[name=write_queue_nums]", "4")
    page.click("#create-topic button[type=submit]")
    expect(page.locator("h1")).to_contain_text("BrowserTopic")
    shot("03-topic-created")
    page.fill("#send-message textarea[name=body]", '{"hello": "browser"}')
    page.fill("#send-message input[name=tags]", "bt")
    page.fill("#send-message input[name=keys]", "browser-key-1")
    page.click("#send-message button[type=submit]")
    expect(page.locator("h1")).to_contain_text("Message")
    shot("04-test-message-sent")

    def found_by_key():
        page.goto("/messages/?mode=key&topic=BrowserTopic&key=browser-key-1")
        return page.locator("table tbody tr").count() == 1

    wait_until(found_by_key, timeout=20, interval=0.5, what="the message found by its key")
    expect(page.locator("table tbody tr")).to_contain_text("browser-key-1")
    shot("05-found-by-key")
    link = page.locator("table tbody tr td.mono a").first
    link.click()
    expect(page.locator("h1")).to_contain_text("Message")
    expect(page.locator("main")).to_contain_text('{"hello": "browser"}')
    shot("06-message-detail")
    _expect_audited(page, shot, "topic.save", "topic.send")


def _group_lag(page) -> int:
    return int(page.locator(".stats div:has-text('lag') b").first.inner_text().strip())


def test_03_group_lag_falls_and_reset_to_earliest_with_preview(page, stack, shot):
    topic, group = "BrowserLag", "browser-lag"
    send(stack.namesrv_addr, topic, 1, keys="lag-seed")  # the topic exists before the group subscribes
    gate = threading.Event()

    def slow_listener(messages, context):
        gate.wait(60)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    # Short rebalance interval: a consumer that starts before the broker lists it as a member gets
    # its queues at the next rebalance, which should not be 20 s away in a test.
    consumer = PushConsumer(
        group, stack.namesrv_addr, persist_interval_ms=200, consume_threads=2, rebalance_interval_ms=1000
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(slow_listener)
    consumer.start()
    try:
        send(stack.namesrv_addr, topic, 20, keys="lag")

        def lag_at_least(n):
            page.goto(f"/groups/{group}/")
            return _group_lag(page) >= n

        wait_until(lambda: lag_at_least(15), timeout=30, interval=0.5, what="a lag on the group page")
        shot("07-group-lag")
        gate.set()
        wait_until(lambda: not lag_at_least(1), timeout=30, interval=0.5, what="the lag to fall to 0")
        shot("08-group-lag-consumed")
        page.select_option("#reset-offset select[name=topic]", topic)
        page.select_option("#reset-offset select[name=mode]", "earliest")
        page.click("#reset-offset button[type=submit]")
        expect(page.locator("#reset-preview")).to_contain_text("consumed again")
        shot("09-reset-preview")
        page.click("#reset-preview button:has-text('Apply this reset')")
        expect(page.locator(".flash")).to_be_visible()
        shot("10-reset-applied")
        _expect_audited(page, shot, "group.reset_offset")
    finally:
        gate.set()
        consumer.shutdown()


def test_04_live_tail_shows_a_message_sent_afterwards(page, stack, shot):
    send(stack.namesrv_addr, "BrowserTail", 1, keys="tail-before")  # the topic exists before tailing
    page.goto("/ops/tail/?topic=BrowserTail")
    expect(page.locator("#tail-status")).to_contain_text("live", timeout=30_000)
    sent = send(stack.namesrv_addr, "BrowserTail", 1, keys="tail-after", tags="browser")[0]
    row = page.locator(f'#tail-log tr[data-msg-id="{sent.msg_id}"]')
    expect(row).to_be_visible(timeout=15_000)
    expect(row).to_contain_text("tail-after-0")
    expect(page.locator('#tail-log tr:has-text("tail-before-0")')).to_have_count(0)
    page.fill("#filter-form input[name=tags]", "nothing-has-this-tag")
    page.click("#filter-form button[type=submit]")
    shot("11-live-tail")


class _Collector:
    def __init__(self) -> None:
        self.messages: list[MessageExt] = []
        self.lock = threading.Lock()

    def __call__(self, messages, context):
        with self.lock:
            self.messages.extend(messages)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def copy_of(self, new_msg_id: str):
        with self.lock:
            return [m for m in self.messages if m.client_msg_id == new_msg_id]


def test_05_replay_a_dead_letter_and_see_it_consumed(page, stack, shot):
    topic, group = "BrowserOrders", "browser-billing"
    make_dead_letters(stack.namesrv_addr, topic, group, 2, keys="bdead")
    collector = _Collector()
    healthy = PushConsumer(group, stack.namesrv_addr, rebalance_interval_ms=1000)
    healthy.subscribe(topic, "*")
    healthy.register_message_listener(collector)
    healthy.start()
    try:
        page.goto("/ops/dlq/")
        shot("12-dlq-groups")
        page.click(f"text={group}")
        expect(page.locator("h1")).to_contain_text(group)
        if page.locator("text=is write-only").count():
            shot("13-dlq-write-only")
            page.click("button:has-text('readable')")
        rows = page.locator("#dlq-table tbody tr")
        expect(rows).to_have_count(2)
        shot("14-dlq-list")
        page.check("#dlq-table tbody tr:first-child input[name=ids]")
        page.click("button:has-text('Preview')")
        expect(page.locator("#preview")).to_contain_text("Dry run: 1 would be sent")
        expect(page.locator("#preview")).to_contain_text(topic)
        shot("15-dlq-preview")
        page.click("#dlq-table tbody tr:first-child td.mono a")
        expect(page.locator("h1")).to_contain_text("Dead letter")
        shot("16-dlq-message")
        page.click("button:has-text('Replay this message')")
        expect(page.locator("h1")).to_have_text("Replayed")
        new_id = page.locator("#new-msg-id").inner_text().strip()
        shot("17-dlq-replayed")
        consumed = wait_until(
            lambda: collector.copy_of(new_id), timeout=30, what="the replayed copy consumed"
        )
        assert consumed[0].get_property("ORIGIN_MESSAGE_ID")
        # Bulk replay of every dead letter, run by the Celery worker, progress polled by htmx.
        page.goto(f"/ops/dlq/{group}/")
        page.select_option("select[name=scope]", "all")
        page.fill("input[name=rate]", "20")
        page.click("button:has-text('Replay'):not(:has-text('this'))")
        expect(page.locator(".job-status")).to_have_text("done", timeout=60_000)
        expect(page.locator(".job-sent")).to_have_text("2")
        shot("18-replay-job")
        _expect_audited(page, shot, "dlq.make_readable", "dlq.replay", "dlq.replay.finished")
    finally:
        healthy.shutdown()


def test_06_commit_a_pending_transaction(page, stack, shot):
    msg = Message("BrowserPayments", b"pay 42")
    msg.keys = "browser-pay"
    [msg_id] = send_pending_transactions(stack.namesrv_addr, "browser-tx", [msg])
    page.goto("/ops/transactions/")
    row = page.locator(f'tr[data-msg-id="{msg_id}"]')
    expect(row).to_contain_text("browser-tx")
    shot("19-transactions")
    row.locator("button[value=commit]").click()
    expect(page.locator(".flash")).to_contain_text("Commit of")
    expect(page.locator(f'tr[data-msg-id="{msg_id}"]')).to_have_count(0)
    with MQAdmin(stack.namesrv_addr) as admin:
        found = wait_until(
            lambda: admin.query_message_by_key("BrowserPayments", "browser-pay"), what="commit"
        )
    assert found[0].body == b"pay 42"
    shot("20-transaction-committed")
    _expect_audited(page, shot, "transaction.end")


def test_07_delayed_and_trace_pages(page, stack, shot):
    sent = send(stack.namesrv_addr, "BrowserLater", 1, keys="later", DELAY=3)[0]
    page.goto("/ops/delayed/")
    expect(page.locator("main")).to_contain_text("1h")
    expect(page.locator("main")).to_contain_text("1 pending")
    shot("21-delayed")
    page.click("td a >> text=3")
    expect(page.locator("main")).to_contain_text("BrowserLater")
    shot("22-delayed-level")
    page.goto(f"/ops/trace/?msgId={sent.msg_id}&topic=SCHEDULE_TOPIC_XXXX")
    expect(page.locator(".timeline")).to_contain_text("Delayed (level 3)")
    shot("23-trace")


def test_08_acl_page_of_a_broker_without_acl(page, stack, shot):
    """The admins' ACL page loads cleanly (no console error, CSP) and says ACL is off and how to turn
    it on, with no account form; its Refresh (htmx) swaps the brokers' section in place."""
    page.goto("/acl/")
    expect(page.locator("h1")).to_contain_text("ACL")
    expect(page.locator("#acl-brokers")).to_contain_text("ACL is off on this broker (aclEnable=false)")
    expect(page.locator(".acl-off")).to_contain_text("set aclEnable=true in each broker's broker.conf")
    expect(page.locator("#account-form")).to_have_count(0)
    expect(page.locator(".alert-error")).to_have_count(0)
    shot("24-acl")
    with page.expect_response(lambda r: r.url.endswith("/acl/") and r.status == 200):
        page.get_by_role("button", name="Refresh").click()
    expect(page.locator("#acl-brokers h2")).to_have_count(1)
    expect(page.locator("#acl-brokers")).to_contain_text("aclEnable=false")


_LONG_NAMESRVS = ";".join(
    f"rocketmq-namesrv-{i}.rocketmq-namesrv-headless.messaging-production.svc.cluster.local:9876"
    for i in range(3)
)
_OVERFLOW = """() => {
    const cards = [...document.querySelectorAll("section.card")];
    const runtime = cards.find((c) => c.querySelector("h2")?.textContent === "Runtime");
    const box = runtime.getBoundingClientRect();
    const table = runtime.querySelector("table.kv").getBoundingClientRect();
    const rows = [...runtime.querySelectorAll("table.kv tr")];
    const cells = rows.slice(0, 3).map((tr) => {
        const r = tr.getBoundingClientRect();
        return { left: r.left, right: r.right, height: r.height };
    });
    const wraps = [...document.querySelectorAll(".broker-grid .tablewrap")];
    return {
        wide: document.documentElement.scrollWidth,
        clipped: wraps.filter((w) => w.scrollWidth > w.clientWidth + 1).length,
        blank: box.bottom - table.bottom,
        rows: rows.length,
        cells: cells,
    };
}"""


def test_09_the_broker_page_fits_a_1440_px_window(page, stack, shot):
    """The broker page in a 1440 px window, with what real brokers have: a long config value (three
    name servers by their cluster DNS names, pending a restart) and every runtime key. No sideways
    scrolling, and the runtime card shows its figures."""
    with MQAdmin(stack.namesrv_addr) as admin:
        (addr,) = admin.resolve_masters(None, OPS.cluster_name)
        current = admin.broker_config(addr)["namesrvAddr"]
        runtime_keys = len(admin.broker_runtime_info(addr))
        admin.update_broker_config(addr, {"namesrvAddr": _LONG_NAMESRVS})
        try:
            page.set_viewport_size({"width": 1440, "height": 900})
            page.goto(f"/cluster/broker/{addr}/")
            expect(page.locator(".broker-config")).to_contain_text(_LONG_NAMESRVS.split(";")[2])
            shot("25-broker-1440")
            figures = page.evaluate(_OVERFLOW)
            assert figures["wide"] <= 1440, figures
            assert figures["blank"] < 100, figures  # the card ends with its table, no blank under it
            assert figures["clipped"] == 0, figures  # nor a table scrolling sideways in its card
            assert figures["rows"] == runtime_keys
            for row in figures["cells"]:
                assert row["height"] > 0 and row["left"] >= 0 and row["right"] <= 1440, figures
        finally:
            admin.update_broker_config(addr, {"namesrvAddr": current})
