"""Each role sees exactly the controls it may use, on every page that has any; a request it may not
make anyway gets a 403 page in the console layout (a fragment for htmx) that says why.

A "control" is anything on a page that leads to a view needing more than the viewer role: a form
or htmx request that posts, or a link to a page only operators may open. Which role a view needs
is read from the view itself (``core.roles.require_role``), so the check is the server's own.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.urls import Resolver404, URLPattern, URLResolver, get_resolver, resolve, reverse

from broker.client import ConsumeConcurrentlyStatus, PushConsumer
from broker.common.message import Message
from broker.common.topic_config import dlq_topic
from broker.local_cluster import wait_until
from console.models import SavedTailFilter
from console.services import dlq
from core.models import AuditRecord
from core.navigation import NAV_ITEMS
from core.roles import ACTIONS, ADMIN, OPERATOR, ROLE_ORDER, VIEWER, has_role, may
from tests.cluster import CLI_CLUSTER as CLUSTER
from tests.cluster import make_dead_letters, send, send_pending_transactions

pytestmark = pytest.mark.django_db

TOPIC, GROUP = "RolesTopic", "roles-group"
DEAD_GROUP, WRITE_ONLY_GROUP = "roles-dead", "roles-dead-write-only"
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
NAV_URL_NAMES = {url_name for *_, url_name in NAV_ITEMS}


class _Controls(HTMLParser):
    """Every URL a page can send the user to, with how: ("post", url) or ("get", url)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: set[tuple[str, str]] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and (attrs.get("method") or "get").lower() == "post":
            self.found.add(("post", attrs.get("action") or ""))
        for verb in ("post", "put", "patch", "delete"):
            if attrs.get(f"hx-{verb}"):
                self.found.add(("post", attrs[f"hx-{verb}"]))
        if tag == "a" and attrs.get("href"):
            self.found.add(("get", attrs["href"]))


def _required_role(method: str, url: str) -> str | None:
    """The role the view behind ``url`` needs for ``method`` (None: anyone logged in, or not ours)."""
    try:
        view = resolve(urlsplit(url).path).func
    except Resolver404:
        return None
    role = getattr(view, "required_role", None)
    # Pages any viewer may open are not controls, whatever they link to.
    return role if method == "post" or role != VIEWER else None


def mutating_controls(html: str) -> set[str]:
    """The URL names of the page's controls that need more than the viewer role (the navigation
    bar's links are not the page's: the bar offers each role the pages it may open, checked by
    test_acl_page)."""
    parser = _Controls()
    parser.feed(html)
    names = set()
    for method, url in parser.found:
        role = _required_role(method, url)
        if role is not None and role != VIEWER:
            match = resolve(urlsplit(url).path)
            name = f"{match.namespace}:{match.url_name}"
            if method == "get" and name in NAV_URL_NAMES:
                continue
            names.add(name)
    return names


def _permission_of(url_name: str) -> str:
    """The action the view named ``namespace:name`` is guarded by."""
    namespace, name = url_name.split(":")
    return next(p.callback.permission for ns, p in _patterns() if (ns, p.name) == (namespace, name))


def _patterns(resolver=None, namespace=""):
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            yield from _patterns(entry, entry.namespace or namespace)
        elif isinstance(entry, URLPattern):
            yield namespace, entry


def _sample_url(namespace: str, pattern: URLPattern) -> str:
    kwargs = {
        name: 1 if type(converter).__name__ == "IntConverter" else "x"
        for name, converter in pattern.pattern.converters.items()
    }
    return reverse(f"{namespace}:{pattern.name}", kwargs=kwargs)


GUARDED = [
    (namespace, pattern)
    for namespace, pattern in _patterns()
    if getattr(pattern.callback, "permission", None) is not None
]


# -- the permission table and its users -----------------------------------------------------------
def test_every_posting_view_of_the_console_is_guarded_by_its_permission():
    """Every POST view of the console and its operations pages names its action in ACTIONS, so the
    button and the server ask the same question; the exceptions are open to every viewer."""
    open_to_viewers = {"namesrv_switch", "dlq_preview"}
    for namespace, pattern in _patterns():
        if namespace != "console":
            continue
        view = pattern.callback
        methods = [cell.cell_contents for cell in view.__closure__ or () if cell.cell_contents == ["POST"]]
        if not methods or pattern.name in open_to_viewers:
            continue
        assert view.permission in ACTIONS, pattern.name
        assert view.required_role == ACTIONS[view.permission], pattern.name
    assert {p.callback.permission for _, p in GUARDED} == set(ACTIONS)


def test_templates_ask_only_about_actions_that_exist():
    """``may.<action>`` with a typo would hide a button for everyone, silently."""
    asked = set()
    for template in TEMPLATES.rglob("*.html"):
        asked |= set(re.findall(r"\bmay\.([a-z_.]+[a-z_])", template.read_text()))
    assert asked, "no template asks may.<action>"
    assert asked <= set(ACTIONS), asked - set(ACTIONS)


def test_may_follows_the_role_order(db):
    from django.contrib.auth.models import Group

    users = {}
    for role in ROLE_ORDER:
        users[role] = User.objects.create_user(f"u-{role}", password="not-used-1")
        users[role].groups.add(Group.objects.get(name=role))
    nobody = User.objects.create_user("u-none", password="not-used-1")
    for action, minimum in ACTIONS.items():
        assert not may(nobody, action)
        for role in ROLE_ORDER:
            assert may(users[role], action) == (ROLE_ORDER.index(role) >= ROLE_ORDER.index(minimum))
    with pytest.raises(KeyError):
        may(users[ADMIN], "topic.sav")


# -- pages per role -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scene(live_cluster):
    """Something on every page that has controls: a topic with a message and an online consumer, a
    pending transaction, dead letters (one group's DLQ readable, one's still write-only)."""
    from core.cluster_access import admin_for

    namesrv = live_cluster.namesrv_addr
    admin = admin_for(namesrv)
    for addr in admin.resolve_masters(None, CLUSTER):
        admin.create_or_update_topic(addr, TOPIC, 1, 1)
    sent = send(namesrv, TOPIC, 1, keys="roles")[0]
    consumer = PushConsumer(GROUP, namesrv, rebalance_interval_ms=500)
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(lambda messages, context: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    consumer.start()
    try:
        make_dead_letters(namesrv, "RolesDeadTopic", DEAD_GROUP, 1, keys="roles-dead")
        make_dead_letters(namesrv, "RolesDeadTopic2", WRITE_ONLY_GROUP, 1, keys="roles-wo")
        dlq.make_readable(admin, DEAD_GROUP)
        dead = wait_until(
            lambda: admin.query_message_by_key(dlq_topic(DEAD_GROUP), "roles-dead-0"), what="the dead letter"
        )[0]
        send_pending_transactions(namesrv, "roles-tx", [Message("RolesPayments", b"pending")])
        wait_until(lambda: admin.consumer_connection(GROUP).connections, what="the consumer online")
        broker_addr = admin.resolve_masters(None, CLUSTER)[0]
        yield {"message": sent.offset_msg_id, "dead": dead.msg_id, "broker": broker_addr}
    finally:
        consumer.shutdown()


# Each page with controls, and the controls an admin sees on it (each other role: those it may use).
PAGES = {
    "broker": ("/cluster/broker/{broker}/", {"console:broker_config"}),
    "topics": ("/topics/", {"console:topic_save", "console:topic_delete"}),  # delete: a row action
    "topic": (f"/topics/{TOPIC}/", {"console:topic_delete", "console:topic_send", "console:topic_save"}),
    "groups": ("/groups/", {"console:group_save"}),
    "group": (f"/groups/{GROUP}/", {"console:group_skip", "console:group_delete", "console:group_save"}),
    "reset preview": (
        f"/groups/{GROUP}/reset/preview?topic={TOPIC}&mode=latest",
        {"console:group_reset_apply"},
    ),
    "message": ("/messages/{message}/", {"console:message_resend"}),
    "dead letters": (f"/ops/dlq/{DEAD_GROUP}/", {"console:dlq_replay"}),
    "dead letter": (f"/ops/dlq/{DEAD_GROUP}/message/{{dead}}/", {"console:dlq_replay"}),
    "write-only dead letters": (f"/ops/dlq/{WRITE_ONLY_GROUP}/", {"console:dlq_make_readable"}),
    "transactions": ("/ops/transactions/", {"console:end_transaction"}),
    "live tail": (
        f"/ops/tail/?topic={TOPIC}",
        {"console:save_tail_filter", "console:delete_tail_filter"},
    ),
}
# Pages whose controls are not listed above but must still be shown only to those who may use them.
OTHER_PAGES = ["/cluster/", "/producers/", "/messages/", "/ops/dlq/", "/ops/delayed/", "/audit/",
               "/analytics/", "/analytics/schedules/", "/ops/jobs/"]  # fmt: skip


@pytest.fixture(params=ROLE_ORDER)
def role_client(request, viewer_client, operator_client, admin_client_):
    client = {VIEWER: viewer_client, OPERATOR: operator_client, ADMIN: admin_client_}[request.param]
    user = User.objects.get(pk=client.session["_auth_user_id"])
    # A saved tail filter of their own, so the live-tail page has a Delete button to show or not.
    SavedTailFilter.objects.create(user=user, name="mine", topic=TOPIC, tags="x")
    return request.param, user, client


@pytest.mark.parametrize("page", PAGES)
def test_each_role_sees_the_controls_it_may_use(scene, role_client, page):
    role, user, client = role_client
    path, admin_controls = PAGES[page]
    response = client.get(path.format(**scene))
    assert response.status_code == 200, response.content[:500]
    expected = {name for name in admin_controls if may(user, _permission_of(name))}
    assert mutating_controls(response.content.decode()) == expected
    if role == ADMIN:
        assert expected == admin_controls


@pytest.mark.parametrize("path", OTHER_PAGES)
def test_other_pages_show_no_control_the_role_may_not_use(scene, role_client, path):
    _, user, client = role_client
    response = client.get(path)
    assert response.status_code == 200, response.content[:500]
    parser = _Controls()
    parser.feed(response.content.decode())
    for method, url in parser.found:
        role = _required_role(method, url)
        assert role is None or has_role(user, role), (method, url)


# -- refusals -------------------------------------------------------------------------------------
def _refused_as(role: str) -> list:
    """Every guarded view a user of ``role`` may not use."""
    return [
        pytest.param(_sample_url(namespace, pattern), pattern.callback.permission, id=pattern.name)
        for namespace, pattern in GUARDED
        if ROLE_ORDER.index(role) < ROLE_ORDER.index(ACTIONS[pattern.callback.permission])
    ]


@pytest.mark.parametrize(("url", "action"), _refused_as(VIEWER))
def test_a_forced_post_gets_a_403_page_in_the_layout(viewer_client, url, action):
    response = viewer_client.post(url, {"topic": TOPIC, "name": "n"})
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert '<nav class="mainnav"' in html and "<h1>Not allowed</h1>" in html
    assert f"This action needs the {ACTIONS[action]} role" in html
    assert "Your role is <strong>viewer</strong>" in html
    assert AuditRecord.objects.get().action == action  # refusals are audited under the action's name


@pytest.mark.parametrize(("url", "action"), _refused_as(OPERATOR))
def test_an_operator_is_refused_admin_actions_with_the_page(operator_client, url, action):
    response = operator_client.post(url, {"key": "deleteWhen", "value": "04"})
    assert response.status_code == 403
    assert "This action needs the admin role" in response.content.decode()


@pytest.mark.parametrize(("url", "action"), _refused_as(VIEWER)[:3])
def test_an_htmx_request_gets_a_fragment_the_page_can_show(viewer_client, url, action):
    response = viewer_client.post(url, {}, HTTP_HX_REQUEST="true")
    assert response.status_code == 403
    html = response.content.decode()
    assert "<html" not in html and "<nav" not in html
    assert 'role="alert"' in html and f"needs the {ACTIONS[action]} role" in html
