"""Browser-test fixtures: the stack per backend and one headless Debian Chromium (never downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.stack import Stack

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "browser"


@pytest.fixture(scope="module", params=["embedded", "postgres-redis"])
def stack(request, tmp_path_factory):
    running = Stack(tmp_path_factory.mktemp(f"stack-{request.param}"), request.param)
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def page(browser, stack):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=stack.web_url)
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())  # confirmations of commit / rollback
    yield page
    context.close()


@pytest.fixture
def shot(page, stack, request):
    """``shot("name")`` saves a full-page screenshot under tests/artifacts/browser/<backend>/."""
    folder = ARTIFACTS / stack.backend
    folder.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
