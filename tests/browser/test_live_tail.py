"""The live-tail page in Chromium against make-run-style processes: saving a filter applies it in
place (no reload, the rows stay), and messages that match while the tail is paused are shown when
it resumes."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.cluster import send

pytestmark = pytest.mark.timeout(300)


def _open_tail(page, stack, topic: str) -> None:
    send(stack.namesrv_addr, topic, 1, keys="seed")  # the topic exists before tailing starts
    page.goto(f"/ops/tail/?topic={topic}")
    expect(page.locator("#tail-status")).to_contain_text("live", timeout=30_000)


def _row(page, sent):
    return page.locator(f'#tail-log tr[data-msg-id="{sent.msg_id}"]')


def test_saving_a_filter_applies_it_and_keeps_the_rows(page, stack, log_in, shot):
    log_in(page, "operator")
    topic = "BrowserTailSave"
    _open_tail(page, stack, topic)
    shown = send(stack.namesrv_addr, topic, 1, keys="before-save", tags="keep")[0]
    expect(_row(page, shown)).to_be_visible(timeout=15_000)
    page.evaluate("window.tailPageNotReloaded = true")

    page.fill("#filter-form input[name=tags]", "keep")  # typed, not applied yet: saving applies it
    page.click("summary:has-text('Save this filter')")
    page.fill("#save-filter input[name=name]", "only keep")
    page.click("#save-filter button[type=submit]")

    expect(page.locator("#save-filter-result")).to_contain_text("“only keep” saved and applied")
    expect(page.locator("#saved-filters")).to_contain_text("only keep")
    expect(page.locator("#tail-filter")).to_have_text("tags keep")
    assert page.evaluate("window.tailPageNotReloaded") is True
    expect(_row(page, shown)).to_be_visible()
    assert page.url.endswith(f"/ops/tail/?topic={topic}")

    other = send(stack.namesrv_addr, topic, 1, keys="other", tags="other")[0]
    expect(page.locator("#tail-skipped")).to_have_text("1", timeout=15_000)
    kept = send(stack.namesrv_addr, topic, 1, keys="kept", tags="keep")[0]
    expect(_row(page, kept)).to_be_visible(timeout=15_000)
    expect(_row(page, other)).to_have_count(0)
    shot("tail-filter-saved")

    # Picking the saved filter applies it in place too; opening its link applies it from the start.
    page.fill("#filter-form input[name=tags]", "")
    page.click("#filter-form button[type=submit]")
    expect(page.locator("#tail-filter")).to_have_text("none")
    saved_link = page.locator("#saved-filters a:has-text('only keep')")
    saved_link.click()
    expect(page.locator("#tail-filter")).to_have_text("tags keep")
    expect(page.locator("#filter-form input[name=tags]")).to_have_value("keep")
    assert page.evaluate("window.tailPageNotReloaded") is True
    page.goto(saved_link.get_attribute("href"))
    expect(page.locator("#filter-form input[name=tags]")).to_have_value("keep")
    expect(page.locator("#tail-filter")).to_have_text("tags keep")


def test_messages_arriving_while_paused_are_shown_on_resume(page, stack, log_in, shot):
    log_in(page, "viewer")
    topic = "BrowserTailPause"
    _open_tail(page, stack, topic)
    page.click("#pause")
    expect(page.locator("#tail-status")).to_have_text("paused")

    sent = send(stack.namesrv_addr, topic, 3, keys="while-paused")
    expect(page.locator("#tail-status")).to_contain_text("3 matching messages held", timeout=15_000)
    expect(page.locator("#tail-log tr")).to_have_count(0)
    shot("tail-paused")

    page.click("#pause")  # now labelled Resume
    for message in sent:
        expect(_row(page, message)).to_be_visible()
    expect(page.locator("#tail-count")).to_have_text("3")
    after = send(stack.namesrv_addr, topic, 1, keys="after-resume")[0]
    expect(_row(page, after)).to_be_visible(timeout=15_000)
    shot("tail-resumed")
