"""The web tier on two processes (issue 24, item 2), in Chromium: two daphne processes on the Redis
channel layer and PostgreSQL, one Celery worker, a real broker.

- One login serves both processes (the session lives in PostgreSQL).
- A live tail open on each process receives every message exactly once, whichever process's send
  form (each its own producer) or outside producer sent it: each process runs its own reader for
  the sockets it serves, and their channel-layer groups must not mix on the shared Redis (were
  they one group, each socket would get every message once per process).
- A DLQ replay started on one process shows its progress on the other: the job page of the second
  process follows the worker's progress (read from PostgreSQL) while it runs, then its end.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.browser.stack import ADMIN_USER
from tests.cluster import make_dead_letters, send
from tests.scaleout.web_tier import start_web_tier

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def tier(tmp_path_factory):
    running = start_web_tier(tmp_path_factory.mktemp("web-tier"))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def context(browser, tier):
    """A browser context logged in once, through web process 1's form; its cookie (127.0.0.1, any
    port) is presented to both processes. Fails the test on any console error or failed response."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(20_000)
    problems: list[str] = []

    def console_error(m) -> None:
        if m.type == "error":
            problems.append(f"{m.page.url}: {m.text}")

    def failed_response(r) -> None:
        if r.status >= 400:
            problems.append(f"HTTP {r.status} {r.url}")

    context.on("console", console_error)
    context.on("weberror", lambda e: problems.append(f"uncaught: {e.error}"))
    context.on("response", failed_response)
    page = context.new_page()
    page.goto(f"{tier.web_urls[0]}/accounts/login/?next=/ops/jobs/")
    page.fill("input[name=username]", ADMIN_USER)
    page.fill("input[name=password]", tier.password)
    page.click("button[type=submit]")
    expect(page.locator(".who")).to_contain_text(ADMIN_USER)
    page.close()
    yield context
    context.close()
    assert not problems, "the browser reported problems:\n" + "\n".join(problems)


def _rows(page, key: str):
    return page.locator("#tail-log tr", has_text=key)


def _send_from_console(page, web_url: str, topic: str, key: str) -> None:
    page.goto(f"{web_url}/topics/{topic}/")
    page.fill("#send-message textarea[name=body]", f"sent through {web_url}")
    page.fill("#send-message input[name=keys]", key)
    page.click("#send-message button[type=submit]")
    expect(page).to_have_url(re.compile(r"/messages/"))  # the sent message's page: it was stored


def test_a_tail_on_either_process_gets_each_message_once(context, tier):
    topic = "WebTierTail"
    send(tier.namesrv_addr, topic, 1, keys="seed")  # the topic exists before tailing starts
    tails = []
    for url in tier.web_urls:
        tail = context.new_page()
        tail.goto(f"{url}/ops/tail/?topic={topic}")
        expect(tail.locator("#tail-status")).to_contain_text("live", timeout=30_000)
        tails.append(tail)

    sender = context.new_page()
    keys = []
    for number, url in enumerate(tier.web_urls, start=1):
        keys.append(f"via-web{number}")
        _send_from_console(sender, url, topic, keys[-1])
    keys.append("via-sdk")
    send(tier.namesrv_addr, topic, 1, keys="via-sdk")  # keys via-sdk-0

    for tail in tails:
        for key in keys:
            expect(_rows(tail, key)).to_have_count(1, timeout=15_000)
    # A message sent after those, once shown, means any duplicate of the earlier ones came too.
    send(tier.namesrv_addr, topic, 1, keys="last")
    for tail in tails:
        expect(_rows(tail, "last-0")).to_have_count(1, timeout=15_000)
        expect(tail.locator("#tail-count")).to_have_text(str(len(keys) + 1))
        for key in keys:
            expect(_rows(tail, key)).to_have_count(1)


def test_a_replay_started_on_one_process_shows_its_progress_on_the_other(context, tier):
    group, topic, count, rate = "WebTierDlqGroup", "WebTierDlq", 40, 10
    make_dead_letters(tier.namesrv_addr, topic, group, count)

    starter = context.new_page()
    starter.goto(f"{tier.web_urls[0]}/ops/dlq/{group}/")
    starter.click("button:has-text('readable')")  # brokers create a DLQ topic write-only
    expect(starter.locator("#dlq-table")).to_contain_text(f"{count} dead letters", timeout=15_000)
    starter.select_option("#replay-form select[name=scope]", "all")
    starter.fill("#replay-form input[name=rate]", str(rate))
    starter.click("#replay-form button[type=submit]")
    expect(starter).to_have_url(re.compile(r"/ops/jobs/\d+/$"))
    job_path = "/ops/jobs/" + starter.url.rstrip("/").rsplit("/", 1)[1] + "/"

    watcher = context.new_page()
    watcher.goto(f"{tier.web_urls[1]}{job_path}")
    # The page on process 2 polls process 2 every second; the worker saves progress every 0.5 s
    # and needs about count / rate = 4 s: it is seen part-way, then done.
    partial = []

    def seen_part_way() -> bool:
        status = watcher.locator(".job-status").inner_text()
        sent = int(watcher.locator(".job-sent").inner_text())
        if status == "running" and 0 < sent < count:
            partial.append(sent)
        return status == "done"

    deadline_polls = 600  # 0.1 s each: a minute at most
    for _ in range(deadline_polls):
        if seen_part_way():
            break
        watcher.wait_for_timeout(100)
    expect(watcher.locator(".job-status")).to_have_text("done")
    expect(watcher.locator(".job-sent")).to_have_text(str(count))
    expect(watcher.locator(".job-failed")).to_have_text("0")
    assert partial, "process 2 never showed the replay part-way"
    print(f"progress seen on web process 2 while running: {sorted(set(partial))} of {count}")
