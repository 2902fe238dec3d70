"""Browser-test fixtures: the stack per backend and one headless Debian Chromium (never downloaded).

Every browser test fails on anything the browser reports as going wrong in any page it opened: a
console message of type error, an uncaught page error, a request that failed, or a response with a
status of 400 or more. A test that means to provoke a 4xx says so first, with
``browser_problems.expect_status(403, "/path/")``; the opt-in lasts until the test ends.
"""

from __future__ import annotations

import re
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from tests.browser.stack import ADMIN_USER, Stack, running_stack

if TYPE_CHECKING:
    from playwright.sync_api import Page, Request

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
# Chromium's own console line for every response of 400 or more that a page loads.
_LOAD_FAILURE = re.compile(r"Failed to load resource: the server responded with a status of (\d+)")


class BrowserProblems:
    """What went wrong in the browser since the last check, over every page of every context the
    ``browser`` fixture opened (pages opened later, popups and new contexts included)."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.expected: list[tuple[int, str]] = []
        self._documents: dict[object, int] = {}  # page -> documents it loaded so far
        self._started_in: dict[object, int] = {}  # request in flight -> its page's document then
        self._aborted: list[tuple[Request, Page, int]] = []  # (request, page, document)
        self._downloads: set[str] = set()

    def expect_status(self, status: int, path: str) -> None:
        """Opt in: a response of ``status`` (>= 400) for URL path ``path`` is what the test wants."""
        if status < 400:
            raise ValueError("only statuses of 400 or more need an opt-in")
        self.expected.append((status, path))

    def watch(self, context) -> None:
        context.on("console", self._on_console)
        context.on("weberror", lambda e: self._add(f"uncaught error in {e.page and e.page.url}: {e.error}"))
        context.on("requestfailed", self._on_request_failed)
        context.on("requestfinished", lambda request: self._started_in.pop(request, None))
        context.on("response", self._on_response)
        context.on("page", self._watch_page)
        for page in context.pages:
            self._watch_page(page)

    def take(self) -> list[str]:
        """The problems so far (then forgotten) and the end of the current test's opt-ins."""
        for request, page, document in self._aborted:
            if not self._left_behind(request, page, document):
                self._add(f"request failed: {request.method} {request.url}: {request.failure}")
        found, self.problems, self.expected, self._aborted = self.problems, [], [], []
        return found

    def _watch_page(self, page) -> None:
        self._documents.setdefault(page, 0)

        def loaded() -> None:
            self._documents[page] += 1

        page.on("domcontentloaded", loaded)
        page.on("request", lambda request: self._started_in.__setitem__(request, self._documents[page]))
        page.on("download", lambda download: self._downloads.add(download.url))

    def _left_behind(self, request, page, document: int) -> bool:
        """A request the browser cancelled because its page went on to another document (a poll or
        a chart sample in flight while the user clicked a link), or a link that turned into a
        download, did not fail: nobody waits for its answer."""
        if request.failure != "net::ERR_ABORTED":
            return False
        return request.url in self._downloads or self._documents.get(page, document) > document

    def _is_expected(self, status: int, url: str) -> bool:
        path = urlsplit(url).path
        return any(status == want and path == want_path for want, want_path in self.expected)

    def _add(self, problem: str) -> None:
        self.problems.append(problem)

    def _on_console(self, message) -> None:
        if message.type != "error":
            return
        url = (message.location or {}).get("url", "")
        failed = _LOAD_FAILURE.search(message.text)
        if failed and self._is_expected(int(failed.group(1)), url):
            return
        self._add(f"console error in {message.page and message.page.url}: {message.text} (at {url})")

    def _on_request_failed(self, request) -> None:
        document = self._started_in.pop(request, None)
        try:
            page = request.frame.page
        except Exception:  # a service worker's request has no frame
            page = None
        if document is None or page is None:
            self._add(f"request failed: {request.method} {request.url}: {request.failure}")
        else:  # judged at the check, once the events of a navigation that cancelled it are in
            self._aborted.append((request, page, document))

    def _on_response(self, response) -> None:
        if response.status >= 400 and not self._is_expected(response.status, response.url):
            self._add(f"HTTP {response.status} for {response.request.method} {response.url}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Fail a test that used the browser if the browser reported a problem while it ran (or while
    its fixtures set up): the problems are the failure, or a note on the test's own failure."""
    problems = item.funcargs.get("browser_problems")
    if problems is None:
        return (yield)
    try:
        result = yield
    except BaseException as failure:
        _settle(item)
        found = problems.take()
        if found:
            failure.add_note("The browser also reported:\n" + "\n".join(found))
        raise
    _settle(item)
    found = problems.take()
    if found:
        pytest.fail("The browser reported problems:\n" + "\n".join(found), pytrace=False)
    return result


def _settle(item) -> None:
    """Let Playwright deliver the events the browser has sent but the test did not wait for: one
    round trip per open page dispatches every event queued before its answer."""
    browser = item.funcargs.get("browser")
    for context in browser.contexts if browser is not None else []:
        for page in context.pages:
            if not page.is_closed():
                page.evaluate("0")


class SharedStacks:
    """The console stacks of one pytest process, one per backend, started when a module first asks
    for it and stopped at the end of the session: a stack takes 15-50 s to start, and the modules
    that use one keep to objects (topics, groups, rules, users) of their own names, so they share it.

    A shared stack's logged-in sessions (``sessions``) are shared with it: its users exist once."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory
        self._running = ExitStack()
        self._stacks: dict[str, Stack] = {}
        self._failed: dict[str, BaseException] = {}
        self._cookies: dict[str, dict[str, list]] = {}

    def get(self, backend: str) -> Stack:
        if backend in self._failed:  # one failed start per backend, not one per module
            raise RuntimeError(f"the shared {backend} stack did not start") from self._failed[backend]
        if backend not in self._stacks:
            try:
                workdir = self._tmp.mktemp(f"stack-{backend}")
                self._stacks[backend] = self._running.enter_context(running_stack(workdir, backend))
            except BaseException as failure:
                self._failed[backend] = failure
                raise
            self._cookies[backend] = {}
        return self._stacks[backend]

    def cookies_of(self, stack) -> dict[str, list] | None:
        """The shared session cookies (by role) of ``stack`` if it is one of these, else None."""
        return next((self._cookies[b] for b, s in self._stacks.items() if s is stack), None)

    def stop(self) -> None:
        self._running.close()


@pytest.fixture(scope="session")
def shared_stacks(tmp_path_factory):
    stacks = SharedStacks(tmp_path_factory)
    yield stacks
    stacks.stop()


@pytest.fixture(scope="module", params=["embedded", "postgres-redis"])
def stack(request, shared_stacks):
    """The process's stack on each backend (module-scoped so a module's tests run per backend)."""
    return shared_stacks.get(request.param)


@pytest.fixture(scope="module")
def browser_problems():
    return BrowserProblems()


@pytest.fixture(scope="module")
def browser(browser_problems):
    """Chromium whose every context (``new_context`` and ``new_page`` alike) is watched."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        open_context, open_page = chromium.new_context, chromium.new_page

        def new_context(**options):
            context = open_context(**options)
            browser_problems.watch(context)
            return context

        def new_page(**options):
            page = open_page(**options)
            browser_problems.watch(page.context)
            return page

        # A deliberate patch of the browser's own methods: every context a test opens is watched.
        chromium.new_context, chromium.new_page = new_context, new_page  # type: ignore[method-assign]
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, stack):
    """A page in a context of its own for each test, logged in as nobody (see ``log_in``)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=stack.web_url)
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())  # confirmations of commit / rollback
    yield page
    context.close()


@pytest.fixture(scope="module")
def sessions(browser, stack, shared_stacks):
    """``sessions(role)``: the cookies of a session logged in (through the login form, once per
    stack) as a user of that role; "admin" is the stack's first admin. On a shared stack they serve
    every module (its users browser-<role> are made once); nothing logs these sessions out."""
    from playwright.sync_api import expect

    shared = shared_stacks.cookies_of(stack)
    cookies: dict[str, list] = {} if shared is None else shared

    def session_of(role: str) -> list:
        if role not in cookies:
            if role == "admin":
                username, password = ADMIN_USER, stack.password
            else:
                username = f"browser-{role}"
                password = stack.add_user(username, role)
            context = browser.new_context(base_url=stack.web_url)
            try:
                page = context.new_page()
                page.goto("/accounts/login/")
                page.fill("input[name=username]", username)
                page.fill("input[name=password]", password)
                page.click("button[type=submit]")
                expect(page.locator(".who")).to_contain_text(username)
                cookies[role] = context.storage_state()["cookies"]
            finally:
                context.close()
        return cookies[role]

    return session_of


@pytest.fixture
def log_in(sessions):
    """``log_in(page, role)``: the page's context logged in as a user of that role (its session
    cookies only: the page stays where it is), so a test selected alone starts logged in too."""

    def log_in_as(page, role: str) -> None:
        page.context.clear_cookies()
        page.context.add_cookies(sessions(role))

    return log_in_as


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
