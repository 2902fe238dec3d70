"""Browser-side checking of names: every ``pattern`` attribute is a regular expression Chromium
accepts (it compiles them with the ``v`` flag, where an unescaped ``|`` in a class is an error and
the check is silently off), and the topic and group inputs refuse a name the broker would refuse.

The browser only: the embedded stack is enough.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from broker.common.topic_config import validate_topic

pytestmark = pytest.mark.timeout(300)

GOOD_NAMES = ["OrderEvents", "billing-consumers", "%RETRY%group_1", "a|b"]
BAD_NAMES = ["bad name", "naïve", "semi;colon", "slash/name"]


@pytest.fixture(scope="module")
def stack(shared_stacks):
    """The process's embedded stack (the forms only: nothing here is created or changed)."""
    return shared_stacks.get("embedded")


def _compiles_with_v_flag(page) -> list[str]:
    """The pattern of every input on the page, each compiled as Chromium does; raises if one fails."""
    compile_each = "inputs => inputs.map(i => { new RegExp(`^(?:${i.pattern})$`, 'v'); return i.pattern; })"
    return page.eval_on_selector_all("input[pattern]", compile_each)


def _accepts(field, name: str) -> bool:
    field.fill(name)
    return field.evaluate("input => !input.validity.patternMismatch")


@pytest.mark.parametrize(
    ("path", "panel", "field"),
    [
        ("/topics/", "#create-topic summary", "#create-topic input[name=topic]"),
        ("/groups/", "details.panel summary", "details.panel input[name=group]"),
    ],
    ids=["topic", "group"],
)
def test_name_inputs_check_names_as_the_broker_does(page, log_in, path, panel, field):
    log_in(page, "admin")
    page.goto(path)
    assert _compiles_with_v_flag(page)
    page.click(panel)
    name = page.locator(field)
    for good in GOOD_NAMES:
        assert validate_topic(good) is None
        assert _accepts(name, good), good
    for bad in BAD_NAMES:
        assert validate_topic(bad) is not None
        assert not _accepts(name, bad), bad
    # A bad name never leaves the browser: the form stays, the field says why.
    name.fill("bad name")
    page.locator(field).locator("xpath=ancestor::form").locator("button[type=submit]").click()
    expect(page.locator(f"{field}:invalid")).to_have_count(1)
    assert page.url.endswith(path)
