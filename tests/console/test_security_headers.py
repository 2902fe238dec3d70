"""Security headers, the Content-Security-Policy, templates without inline script, and
``manage.py check --deploy`` clean with the production settings the README documents."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client, override_settings

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"

pytestmark = pytest.mark.django_db

PRODUCTION_ENV = {
    "DJANGO_DEBUG": "0",
    "DJANGO_ALLOWED_HOSTS": "console.example.com",
    "CONSOLE_SECURE_COOKIES": "1",
    "CONSOLE_SSL_REDIRECT": "1",
    "CONSOLE_HSTS_SECONDS": "31536000",
}


def _policy(response) -> dict[str, str]:
    header = response["Content-Security-Policy"]
    return {part.split()[0]: part.strip() for part in header.split(";") if part.strip()}


def test_every_answer_carries_the_security_headers():
    for path in ("/accounts/login/", "/cluster/", "/healthz", "/no-such-page/"):
        response = Client().get(path)
        assert response["X-Frame-Options"] == "DENY", path
        assert response["X-Content-Type-Options"] == "nosniff", path
        assert response["Referrer-Policy"] == "same-origin", path
        assert response["Cross-Origin-Opener-Policy"] == "same-origin", path
        policy = _policy(response)
        assert policy["default-src"] == "default-src 'self'", path
        assert policy["script-src"] == "script-src 'self'", path
        assert policy["style-src"] == "style-src 'self'", path
        assert policy["frame-ancestors"] == "frame-ancestors 'none'", path
        assert policy["object-src"] == "object-src 'none'", path
        assert "unsafe-inline" not in response["Content-Security-Policy"]
        assert "unsafe-eval" not in response["Content-Security-Policy"]


# An inline <script> (one without src), an on…= handler, a javascript: URL or a style attribute:
# each is refused by the policy in the browser (a console error), so none may be in a template.
INLINE = re.compile(
    r"<script(?![^>]*\bsrc=)[^>]*>|\son[a-z]+\s*=|hx-on[:-]|javascript:|\sstyle\s*=|<style", re.IGNORECASE
)


def test_no_template_has_inline_script_or_style():
    found = []
    for template in sorted(TEMPLATES.rglob("*.html")):
        for number, line in enumerate(template.read_text().splitlines(), 1):
            if INLINE.search(line):
                found.append(f"{template.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_htmx_is_told_not_to_inject_styles_or_evaluate_code():
    html = Client().get("/accounts/login/").content.decode()
    config = re.search(r'<meta name="htmx-config" content=\'([^\']*)\'', html).group(1)
    assert '"includeIndicatorStyles":false' in config and '"allowEval":false' in config


def test_https_settings_redirect_and_mark_cookies_secure(django_user_model):
    with override_settings(
        SECURE_SSL_REDIRECT=True,
        SESSION_COOKIE_SECURE=True,
        CSRF_COOKIE_SECURE=True,
        SECURE_HSTS_SECONDS=31536000,
        SECURE_HSTS_INCLUDE_SUBDOMAINS=True,
        SECURE_HSTS_PRELOAD=True,
    ):
        plain = Client().get("/accounts/login/")
        assert plain.status_code == 301 and plain["Location"].startswith("https://")
        secure = Client().get("/accounts/login/", secure=True)
        assert secure.status_code == 200
        assert secure["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
        assert secure.cookies["csrftoken"]["secure"]


def _check_deploy(env_overrides: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CONSOLE_"))}
    env.update(CONSOLE_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="project.settings")
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_production_settings(tmp_path):
    result = _check_deploy({**PRODUCTION_ENV, "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_names_what_local_http_defaults_leave_off(tmp_path):
    """The defaults serve plain http on loopback (make run): check --deploy lists exactly the
    HTTPS settings the README says to turn on in production."""
    result = _check_deploy({}, tmp_path)
    assert result.returncode != 0
    warned = set(re.findall(r"\(security\.(W\d+)\)", result.stderr + result.stdout))
    assert warned == {"W004", "W008", "W012", "W016"}, result.stderr
