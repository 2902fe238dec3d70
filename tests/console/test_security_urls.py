"""Every URL pattern of the project, walked as each kind of user: anonymous, without a role, viewer,
operator and admin (a superuser in the admin group, as ``ensure_admin`` makes it).

The URL resolver is introspected, path parameters filled with sample values, and each answer
checked against what the view's guard promises (``core.roles``: the ``required_role`` a view
carries), Django admin's staff check, or the short list of public pages below. A view added
without a guard is found here: it is in none of these, and the walk fails naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.resolvers import RegexPattern

from core.roles import ADMIN, OPERATOR, ROLE_ORDER, VIEWER
from tests.console.conftest import PASSWORD

pytestmark = pytest.mark.django_db

ANONYMOUS, NO_ROLE = "anonymous", "no role"
USERS = (ANONYMOUS, NO_ROLE, VIEWER, OPERATOR, ADMIN)

# Path parameters by converter (names from the cluster are "x": they exist nowhere, so pages that
# show one answer 404 after the guard let the request through).
SAMPLE_BY_CONVERTER = {
    "IntConverter": "1",
    "NameConverter": "x",
    "SlugConverter": "x",
    "PathConverter": "1",
    "StringConverter": "1",
}
MSG_ID = "7F00000100002A9F0000000000000000"  # well formed, stored nowhere
SAMPLE_BY_NAME = {"fmt": "csv", "msg_id": MSG_ID, "offset_msg_id": MSG_ID}
# Django admin's regex patterns, by group name.
SAMPLE_BY_REGEX_GROUP = {"app_label": "auth", "url": "no-such-admin-page/"}

# Pages open without a role (views of django.contrib.auth and the probe): url name -> what they do.
PUBLIC = {"healthz": {200}, "favicon": {204}, "login": {200}, "logout": {405}}  # GET; logging out is a POST
LOGIN_ONLY = {"password_change", "password_change_done"}  # one's own password, whatever one's role
# Pages that refuse a request without their query parameters (400 with the reason) once the guard let it in.
NEEDS_QUERY = {"group_reset_preview": {400}}


@dataclass(frozen=True)
class Route:
    namespace: str
    name: str | None
    url: str
    view: Any  # the resolved view function, with what its decorators attached (command_action…)

    @property
    def methods(self) -> set[str]:
        """Methods a require_http_methods-style decorator of the view allows; empty: not restricted."""
        allowed: set[str] = set()
        layer = self.view
        while layer is not None:
            for cell in getattr(layer, "__closure__", None) or ():
                contents = cell.cell_contents
                if isinstance(contents, list) and contents and set(contents) <= {"GET", "POST", "HEAD"}:
                    allowed |= set(contents)
            layer = getattr(layer, "__wrapped__", None)
        return allowed

    def __str__(self) -> str:
        return f"{self.namespace}:{self.name} {self.url}"


def _fill(pattern) -> str:
    if isinstance(pattern, RegexPattern):
        text = pattern.regex.pattern.lstrip("^").rstrip("$")
        for group in pattern.regex.groupindex:
            assert group in SAMPLE_BY_REGEX_GROUP, f"no sample for regex group {group!r} of {text}"
            text = re.sub(rf"\(\?P<{group}>[^)]*\)\*?", SAMPLE_BY_REGEX_GROUP[group], text)
        return text.replace(".*", "")

    def sample(match: re.Match) -> str:
        converter, name = match.group(1), match.group(2)
        if name in SAMPLE_BY_NAME:
            return SAMPLE_BY_NAME[name]
        type_name = type(pattern.converters[name]).__name__
        assert type_name in SAMPLE_BY_CONVERTER, f"no sample for <{converter}:{name}>"
        return SAMPLE_BY_CONVERTER[type_name]

    return re.sub(r"<(?:(\w+):)?(\w+)>", sample, str(pattern))


def _routes(resolver=None, prefix="/", namespace="") -> list[Route]:
    routes = []
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            routes += _routes(entry, prefix + _fill(entry.pattern), entry.namespace or namespace)
        elif isinstance(entry, URLPattern):
            url = prefix + _fill(entry.pattern)
            assert resolve(url).func is entry.callback, f"sample URL {url} resolves elsewhere"
            routes.append(Route(namespace, entry.name, url, entry.callback))
    return routes


ROUTES = _routes()


def _rank(user: str) -> int:
    return ROLE_ORDER.index(user) if user in ROLE_ORDER else -1


def expected(route: Route, user: str, method: str) -> set[int] | None:
    """The statuses ``user`` may get; None: not requested (a change a permitted user would make)."""
    if route.namespace == "admin":
        return _expected_admin(route, user, method)
    if route.name in PUBLIC:
        return PUBLIC[route.name] if method == "GET" else None
    if route.name in LOGIN_ONLY:
        return {302} if user == ANONYMOUS else ({200} if method == "GET" else None)
    assert hasattr(route.view, "required_role"), (
        f"{route}: no guard; wrap the view in core.roles.require_role / core.boundary.serves "
        "(or list it here as public, with the reason)"
    )
    minimum = route.view.required_role
    if route.name == "metrics":  # a scraper without a token is told how to authenticate
        guard = {401} if user == ANONYMOUS else ({403} if user == NO_ROLE else None)
    elif user == ANONYMOUS:
        guard = {302}
    elif minimum is None:  # any logged-in user: the home page
        guard = None
    elif _rank(user) < ROLE_ORDER.index(minimum):
        guard = {403}
    else:
        guard = None
    if route.methods and method not in route.methods:
        # Refused for the method, before or after the guard (the decorators' order): either tells nothing.
        return {405} | (guard or set())
    if guard is not None:
        return guard
    if method == "POST":
        return None
    if minimum is None:  # the home page: what to do for a user without a role, else the overview
        return {200}
    return {200, 404} | NEEDS_QUERY.get(route.name or "", set())


def _expected_admin(route: Route, user: str, method: str) -> set[int] | None:
    if method == "POST":
        return None  # Django admin's own POSTs are CSRF- and staff-checked by Django
    if route.name == "login":
        return {200, 302} if user == ADMIN else {200}  # a staff user is sent on to the index
    if user != ADMIN:
        return {302}  # to the admin's login: every admin page needs a staff account
    # The admin's own answers (403: axes' records are not added by hand; 405: logging out is a POST).
    return {200, 302, 403, 404, 405}


@pytest.fixture
def clients(db) -> dict[str, Client]:
    out = {ANONYMOUS: Client()}
    for user in (NO_ROLE, VIEWER, OPERATOR, ADMIN):
        name, superuser = f"walk-{user.replace(' ', '-')}", user == ADMIN
        account = User.objects.create_user(name, password=PASSWORD, is_staff=superuser)
        account.is_superuser = superuser
        account.save()
        if user in ROLE_ORDER:
            account.groups.add(Group.objects.get_or_create(name=user)[0])
        out[user] = Client()
        out[user].force_login(account)
    return out


def test_the_walk_covers_the_console_analytics_and_admin():
    names = {(r.namespace, r.name) for r in ROUTES}
    assert {("console", "topic"), ("analytics", "run_list"), ("admin", "index"), ("", "login")} <= names
    assert len(ROUTES) > 100


@pytest.mark.parametrize("user", USERS)
def test_every_url_answers_each_user_as_its_guard_says(user, clients, live_cluster, settings):
    client = clients[user]
    wrong = []
    for route in ROUTES:
        for method in ("GET", "POST"):
            allowed = expected(route, user, method)
            if allowed is None:
                continue
            response = client.get(route.url) if method == "GET" else client.post(route.url, {})
            status = response.status_code
            if status not in allowed:
                wrong.append(f"{method} {route}: {status}, expected {sorted(allowed)}")
            elif status == 302 and user == ANONYMOUS and route.namespace != "admin":
                if not response["Location"].startswith("/accounts/login/?next="):
                    wrong.append(f"{method} {route}: redirected to {response['Location']}, not to login")
            elif status == 302 and route.namespace == "admin" and user != ADMIN and route.name != "logout":
                if not response["Location"].startswith("/admin/login/"):
                    wrong.append(f"{method} {route}: redirected to {response['Location']}")
            elif status == 403 and user == NO_ROLE and b"no console role yet" not in response.content:
                wrong.append(f"{method} {route}: 403 without saying the account has no role")
    assert not wrong, "\n".join(wrong)


def test_a_user_without_a_role_sees_what_to_do_and_no_navigation(clients):
    response = clients[NO_ROLE].get("/")
    html = response.content.decode()
    assert response.status_code == 200 and "has no console role yet" in html
    assert "Ask an admin" in html
    assert 'class="mainnav"' in html and "<a href=" not in html.split('class="mainnav"')[1].split("</nav>")[0]
    assert "namesrv-select" not in html
    home = clients[VIEWER].get("/")
    assert home.status_code == 200 and home.templates[0].name == "console/overview.html"


def test_a_user_without_a_role_cannot_read_analytics(clients):
    for path in ("/analytics/", "/analytics/schedules/", "/analytics/runs/1/", "/analytics/runs/1/status"):
        response = clients[NO_ROLE].get(path)
        assert response.status_code == 403, path
        assert b"no console role yet" in response.content


@pytest.mark.django_db(transaction=True)
async def test_the_live_tail_socket_refuses_anonymous_and_users_without_a_role():
    """The one endpoint outside the URL resolver: the live tail's websocket (console.tail.routing)."""
    from asgiref.sync import sync_to_async
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator
    from django.contrib.auth.models import AnonymousUser

    from console.tail.routing import websocket_urlpatterns
    from tests.cluster import create_user

    nobody = await sync_to_async(create_user)("walk-socket-nobody", None, PASSWORD)
    for user in (AnonymousUser(), nobody):
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/tail/TBW102/")
        communicator.scope["user"] = user
        connected, code = await communicator.connect()
        assert not connected and code == 4403, user
