"""Login throttling (django-axes) and the password rules for every user the console makes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.password_validation import validate_password
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from tests.cluster import create_user
from tests.console.conftest import PASSWORD

pytestmark = pytest.mark.django_db

LIMIT = 5  # CONSOLE_LOGIN_FAILURE_LIMIT's default


def _login(username: str, password: str, address: str = "127.0.0.1", path: str = "/accounts/login/"):
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password})


def _fail(username: str, times: int, address: str = "127.0.0.1") -> None:
    """``times`` failed logins; the one that reaches the limit is answered with the lockout itself."""
    for attempt in range(1, times + 1):
        response = _login(username, "wrong password", address)
        if attempt < LIMIT:
            assert response.status_code == 200 and b"Wrong user name or password" in response.content
        else:
            assert response.status_code == 429 and b"Too many failed logins" in response.content


def test_the_limit_of_failed_logins_locks_out_that_user_from_that_address():
    create_user("lola", "viewer", PASSWORD)
    _fail("lola", LIMIT - 1)
    assert _login("lola", PASSWORD).status_code == 302  # still in: a success clears the failures
    _fail("lola", LIMIT)
    locked = _login("lola", PASSWORD)  # even the right password is refused now
    assert locked.status_code == 429
    html = locked.content.decode()
    assert "Too many failed logins" in html and "<code>lola</code>" in html
    assert f"after {LIMIT} failed attempts" in html and "Try again in 0:15:00" in html
    assert "axes_reset_username" in html
    assert "sessionid" not in locked.cookies
    # So is the Django admin's login, which authenticates through the same backends.
    assert _login("lola", PASSWORD, path="/admin/login/").status_code == 429


def test_the_lockout_is_of_the_user_and_address_together():
    create_user("mia", "viewer", PASSWORD)
    create_user("noor", "viewer", PASSWORD)
    _fail("mia", LIMIT, address="10.9.9.9")
    assert _login("mia", PASSWORD, address="10.9.9.9").status_code == 429
    assert _login("mia", PASSWORD, address="127.0.0.1").status_code == 302  # the user elsewhere
    assert _login("noor", PASSWORD, address="10.9.9.9").status_code == 302  # another user there


def test_a_user_name_that_does_not_exist_is_locked_out_alike():
    """No difference tells a prober which names exist."""
    _fail("ghost", LIMIT)
    assert _login("ghost", "anything").status_code == 429


def test_an_admin_unlocks_with_axes_management_command(capsys):
    create_user("omar", "operator", PASSWORD)
    _fail("omar", LIMIT)
    assert _login("omar", PASSWORD).status_code == 429
    call_command("axes_reset_username", "omar")
    assert _login("omar", PASSWORD).status_code == 302


def test_the_lockout_ends_after_the_cool_off():
    create_user("pia", "viewer", PASSWORD)
    _fail("pia", LIMIT)
    assert _login("pia", PASSWORD).status_code == 429
    # The attempts as if made 16 minutes ago (no waiting in a test): past the 15-minute cool-off.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert _login("pia", PASSWORD).status_code == 302


# -- password rules -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("password", "reasons"),
    [
        ("a", ["too short", "at least 10 characters"]),
        ("password123", ["too common"]),
        ("12345678901234", ["entirely numeric"]),
        ("admin1", ["too similar to the username", "too short"]),
    ],
)
def test_ensure_admin_refuses_a_weak_admin_password_with_the_reasons(monkeypatch, password, reasons):
    from django.contrib.auth.models import User

    monkeypatch.setenv("CONSOLE_ADMIN_PASSWORD", password)
    with pytest.raises(CommandError) as refused:
        call_command("ensure_admin")
    message = str(refused.value)
    assert message.startswith("CONSOLE_ADMIN_PASSWORD is refused:")
    for reason in reasons:
        assert reason in message, message
    assert not User.objects.exists()  # nothing made: the next run can try again


def test_the_generated_admin_password_passes_the_rules(monkeypatch, capsys):
    from django.contrib.auth.models import User

    monkeypatch.delenv("CONSOLE_ADMIN_PASSWORD", raising=False)
    call_command("ensure_admin")
    password = capsys.readouterr().out.split("Password: ")[1].split()[0]
    admin = User.objects.get(username="admin")
    validate_password(password, admin)
    assert admin.check_password(password) and admin.is_superuser and admin.is_staff


def test_the_admin_pages_refuse_a_weak_password_for_a_new_user():
    admin = create_user("root-admin", "admin", PASSWORD)
    admin.is_superuser = admin.is_staff = True
    admin.save()
    client = Client()
    client.force_login(admin)
    form = {"username": "newbie", "password1": "a", "password2": "a", "usable_password": "true"}
    response = client.post("/admin/auth/user/add/", form)
    assert response.status_code == 200 and b"This password is too short" in response.content
    from django.contrib.auth.models import User

    assert not User.objects.filter(username="newbie").exists()
    form.update(password1="a long and unusual passphrase 7", password2="a long and unusual passphrase 7")
    assert client.post("/admin/auth/user/add/", form).status_code == 302
    assert User.objects.filter(username="newbie").exists()


def test_changing_ones_own_password_follows_the_rules():
    user = create_user("quinn", None, PASSWORD)  # no role needed to change one's own password
    client = Client()
    client.force_login(user)
    refused = client.post(
        "/accounts/password_change/",
        {"old_password": PASSWORD, "new_password1": "quinn1234", "new_password2": "quinn1234"},
    )
    assert refused.status_code == 200 and b"too short" in refused.content
    user.refresh_from_db()
    assert user.check_password(PASSWORD)


def test_behind_a_proxy_the_forwarded_client_address_is_the_one_locked_out(settings):
    """CONSOLE_TRUSTED_PROXY_COUNT=1: the address the proxy appends to X-Forwarded-For counts, so
    one client's failures do not lock the name out for every client of the proxy."""
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 1
    create_user("rosa", "viewer", PASSWORD)

    def login(password: str, forwarded_for: str):
        client = Client(REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded_for)
        return client.post("/accounts/login/", {"username": "rosa", "password": password})

    for attempt in range(LIMIT - 1):
        # What the client wrote itself (left of the proxy's entry) changes nothing.
        assert login("wrong password", f"198.51.100.{attempt}, 203.0.113.7").status_code == 200
    assert login("wrong password", "203.0.113.7").status_code == 429
    assert login(PASSWORD, "203.0.113.7").status_code == 429
    assert login(PASSWORD, "203.0.113.8").status_code == 302  # another client of the same proxy


def test_a_forwarded_address_is_believed_only_behind_a_trusted_proxy(settings):
    from django.test import RequestFactory

    from core.client_address import client_address

    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.7")
    assert client_address(request) == "10.0.0.1"  # no proxy configured: the header is the client's
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 1
    assert client_address(request) == "203.0.113.7"
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 2
    assert client_address(request) == "6.6.6.6"
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 3  # fewer entries than proxies: misconfigured, not trusted
    assert client_address(request) == "10.0.0.1"
    settings.CONSOLE_TRUSTED_PROXY_COUNT = 1
    garbage = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="x; DROP TABLE")
    assert client_address(garbage) == "10.0.0.1"
