"""The shared browser check (conftest): a browser test fails on a console error, an uncaught page
error, a failed request or an unexpected 4xx/5xx, in any page it opens; an announced status and a
request cancelled by leaving its page do not fail it.

The check is a pytest hook, so it is exercised the way a test meets it: a small test file using
the fixtures of ``tests/browser/conftest.py`` runs in a pytest of its own, against a local HTTP
server and the real Chromium, and each of its tests must pass or fail as the rule says.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from broker.local_cluster import ROOT

pytestmark = pytest.mark.timeout(300)

INNER_CONFTEST = "from tests.browser.conftest import *  # noqa: F403 (the fixtures and the hook under test)\n"
INNER_TESTS = textwrap.dedent(
    """
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import pytest

    from broker.local_cluster import free_port

    RELEASE = threading.Event()


    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/favicon.ico":  # the browser's own fetch, as the console's pages
                self.send_response(204)     # avoid with an empty icon: not a request of the page
                self.end_headers()
                return
            if self.path == "/hang":  # answers only when the test ends
                RELEASE.wait(60)
            pages = {
                "/": "<p>home</p>",
                "/poller": "<script>fetch('/hang')</script><p>polling</p>",
                "/hang": "late",
            }
            body = pages.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write((body or "not here").encode())

        def log_message(self, *args):
            pass


    @pytest.fixture(scope="module")
    def server():
        httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
        RELEASE.set()
        httpd.shutdown()


    @pytest.fixture
    def tab(browser):
        page = browser.new_page()
        yield page
        page.context.close()


    def test_console_error_fails(tab):
        tab.set_content("<script>console.error('boom from the page')</script>")


    def test_uncaught_error_fails(tab):
        tab.set_content("<script>throw new Error('thrown by the page')</script>")


    def test_invalid_pattern_fails(tab):
        tab.set_content('<input id="name" pattern="[%|a-z]+">')
        tab.fill("#name", "abc")
        tab.evaluate("document.getElementById('name').checkValidity()")


    def test_unexpected_404_fails(tab, server):
        tab.goto(server + "/missing")


    def test_failed_request_fails(tab, server):
        tab.goto(server + "/")
        tab.evaluate("fetch('http://127.0.0.1:1/').catch(() => null)")


    def test_announced_404_passes(tab, server, browser_problems):
        browser_problems.expect_status(404, "/missing")
        tab.goto(server + "/missing")
        tab.evaluate("fetch('/missing')")


    def test_request_cancelled_by_leaving_the_page_passes(tab, server):
        with tab.expect_request("**/hang"):
            tab.goto(server + "/poller")
        tab.goto(server + "/")


    def test_clean_page_passes(tab, server):
        tab.goto(server + "/")
    """
)
FAILING = {
    "test_console_error_fails": "boom from the page",
    "test_uncaught_error_fails": "thrown by the page",
    "test_invalid_pattern_fails": "not a valid regular expression",
    "test_unexpected_404_fails": "HTTP 404",
    "test_failed_request_fails": "request failed: GET http://127.0.0.1:1/",
}
PASSING = [
    "test_announced_404_passes",
    "test_request_cancelled_by_leaving_the_page_passes",
    "test_clean_page_passes",
]


@pytest.fixture(scope="module")
def inner_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("browser-check")
    (folder / "conftest.py").write_text(INNER_CONFTEST)
    (folder / "test_inner.py").write_text(INNER_TESTS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(folder),
            "-p",
            "no:cacheprovider",
            "-rA",
            "-q",
            "--rootdir",
            str(folder),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    return result.stdout + result.stderr


@pytest.mark.parametrize("name", FAILING)
def test_a_browser_problem_fails_the_test(inner_run, name):
    assert re.search(rf"^FAILED \S*::{name}\b", inner_run, re.M), inner_run[-3000:]
    section = inner_run.split(f"_ {name} _", 1)[1].split("\n____", 1)[0]
    assert "The browser reported problems" in section
    assert FAILING[name] in section


@pytest.mark.parametrize("name", PASSING)
def test_what_is_not_a_problem_passes(inner_run, name):
    assert re.search(rf"^PASSED \S*::{name}\b", inner_run, re.M), inner_run[-3000:]
