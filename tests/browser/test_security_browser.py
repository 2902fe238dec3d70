"""The console's security in a real browser (headless Chromium, make-run-style processes on the
embedded defaults): every page works under the Content-Security-Policy with no violation, the
confirmations that replaced inline handlers keep a dismissed action unsent, a login lockout is a
page the user can read, and a user without a role is told what to do.

Any console error fails a test here (tests/browser/conftest.py); a CSP violation is one, and is
also collected from the page's ``securitypolicyviolation`` events, so the test names it.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from broker.client.admin import MQAdmin
from broker.local_cluster import wait_until

pytestmark = pytest.mark.timeout(600)

# Runs before any page script (Playwright injects it outside the page's policy).
COLLECT_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  const where = `${e.sourceFile}:${e.lineNumber}`;
  window.__violations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${where}`);
});
"""
PAGES = [
    "/cluster/",
    "/topics/",
    "/topics/TBW102/",
    "/groups/",
    "/producers/",
    "/messages/",
    "/ops/dlq/",
    "/ops/jobs/",
    "/ops/delayed/",
    "/ops/transactions/",
    "/ops/trace/",
    "/analytics/",
    "/analytics/schedules/",
    "/analytics/schedules/new",
    "/audit/",
    "/admin/",
    "/admin/auth/user/add/",
]


@pytest.fixture(scope="module")
def stack(shared_stacks):
    """The process's stack on the embedded defaults (the policy does not depend on the backend). It
    changes no setting the other modules see: the lockout holds one user name from one address
    (AXES_LOCKOUT_PARAMETERS), its users and its topic are its own."""
    return shared_stacks.get("embedded")


def _violations(page) -> list[str]:
    return page.evaluate("window.__violations || []")


def test_every_page_works_under_the_policy(page, log_in, stack):
    log_in(page, "admin")
    page.context.add_init_script(COLLECT_VIOLATIONS)
    for path in PAGES:
        response = page.goto(path)
        assert response.status == 200, path
        assert "default-src 'self'" in response.headers["content-security-policy"], path
        page.wait_for_load_state("networkidle")
        assert _violations(page) == [], path
    # The live tail's websocket (ws: to the page's own host) is allowed by connect-src 'self'.
    page.goto("/ops/tail/?topic=TBW102")
    expect(page.locator("#tail-status")).to_contain_text("live")
    assert _violations(page) == []


def test_a_dismissed_confirmation_sends_nothing_and_an_accepted_one_does(browser, sessions, stack):
    with MQAdmin(stack.namesrv_addr) as admin:
        for addr in admin.resolve_masters(None, stack.engines[0].cluster_name):
            admin.create_or_update_topic(addr, "ConfirmMe", 1, 1)
        wait_until(lambda: "ConfirmMe" in admin.topic_list(), what="the topic")
    context = browser.new_context(base_url=stack.web_url)
    context.add_cookies(sessions("admin"))
    context.add_init_script(COLLECT_VIOLATIONS)
    page = context.new_page()
    answers = []

    def answer(dialog) -> None:
        answers.append(dialog.message)
        dialog.accept() if len(answers) > 1 else dialog.dismiss()

    page.on("dialog", answer)
    try:
        page.goto("/topics/ConfirmMe/")
        page.click("text=Delete topic")
        expect(page).to_have_url(re.compile(r"/topics/ConfirmMe/$"))
        assert answers == [
            "Delete topic ConfirmMe from every broker and the name server? Its messages become unreachable."
        ]
        with MQAdmin(stack.namesrv_addr) as admin:
            assert "ConfirmMe" in admin.topic_list()  # dismissed: nothing was sent
        page.click("text=Delete topic")
        expect(page).to_have_url(re.compile(r"/topics/$"))
        expect(page.locator(".flash")).to_contain_text("ConfirmMe")
        assert _violations(page) == []
    finally:
        context.close()


def test_a_locked_out_login_is_a_page_that_says_what_to_do(page, stack, browser_problems):
    password = stack.add_user("browser-throttled", "viewer")
    browser_problems.expect_status(429, "/accounts/login/")
    page.goto("/accounts/login/")
    for attempt in range(1, 6):
        page.fill("input[name=username]", "browser-throttled")
        page.fill("input[name=password]", f"wrong {attempt}")
        page.click("button[type=submit]")
        if attempt < 5:
            expect(page.locator(".error")).to_contain_text("Wrong user name or password")
    expect(page.locator("h1")).to_have_text("Too many failed logins")
    expect(page.locator("main")).to_contain_text("Try again in 0:15:00")
    page.goto("/accounts/login/")
    page.fill("input[name=username]", "browser-throttled")
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Too many failed logins")  # the right password too


def test_a_user_without_a_role_is_told_whom_to_ask(page, stack, browser_problems):
    password = stack.add_user("browser-newcomer", None)
    page.goto("/accounts/login/")
    page.fill("input[name=username]", "browser-newcomer")
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("No role yet")
    expect(page.locator("main")).to_contain_text("Ask an admin")
    expect(page.locator("nav.mainnav a")).to_have_count(0)
    browser_problems.expect_status(403, "/analytics/")
    page.goto("/analytics/")
    expect(page.locator("main")).to_contain_text("no console role yet")
