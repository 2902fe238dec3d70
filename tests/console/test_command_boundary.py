"""Every mutating URL of the project is served by a command (``core.boundary``), and one request
writes exactly one audit record: done, refused for the role, or refused for its input.

The URL table is walked (``django.urls.get_resolver``, with the sample path parameters of the
security walk); each view that takes a POST must be linked to a registered command by
``core.boundary.serves`` — or be one of the few POSTs that only read or log in, listed here.
"""

from __future__ import annotations

import datetime
import html

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from core.boundary import COMMANDS, SERVING_VIEWS, Actor, Cluster, execute
from core.models import AuditRecord
from core.roles import ADMIN, OPERATOR, ROLE_ORDER, VIEWER
from tests.cluster import CLI_CLUSTER
from tests.console.conftest import PASSWORD
from tests.console.test_security_urls import LOGIN_ONLY, PUBLIC, ROUTES, Route

pytestmark = pytest.mark.django_db

# POSTs that change nothing an operator is accountable for: url name -> why.
NOT_ACTIONS = {
    "dlq_preview": "a replay's dry run: reads only, so viewers may look too",
}
# Actions whose empty form is refused as invalid input (400 with the reason, recorded as failed).
REFUSED_WHEN_EMPTY = {
    "topic_save", "topic_send", "group_save", "group_reset_apply", "message_resend", "broker_config",
    "broker_damaged_purge", "switchover", "acl_account_save", "acl_account_delete", "acl_white_list",
    "dlq_replay", "end_transaction", "save_tail_filter", "namesrv_switch", "rule_create", "silence_create",
    "run_start", "schedule_create",
}  # fmt: skip


def _takes_post(route: Route) -> bool:
    return not route.methods or "POST" in route.methods


def _command_routes() -> list[Route]:
    return [
        r
        for r in ROUTES
        if r.namespace != "admin"
        and r.name not in PUBLIC
        and r.name not in LOGIN_ONLY
        and r.name not in NOT_ACTIONS
        and _takes_post(r)
    ]


COMMAND_ROUTES = _command_routes()


def _user(role: str | None) -> Client:
    account = User.objects.create_user(f"cmd-{role or 'none'}", password=PASSWORD)
    if role:
        account.groups.add(Group.objects.get_or_create(name=role)[0])
    client = Client()
    client.force_login(account)
    return client


def _below(role: str) -> str | None:
    rank = ROLE_ORDER.index(role)
    return ROLE_ORDER[rank - 1] if rank else None


def test_every_view_taking_a_post_is_served_by_a_registered_command():
    unserved = []
    for route in COMMAND_ROUTES:
        action = getattr(route.view, "command_action", None)
        view_name = f"{route.view.__module__}.{route.view.__qualname__}"
        if action not in COMMANDS or view_name not in SERVING_VIEWS.get(action, []):
            unserved.append(str(route))
    assert not unserved, "POST views not served by a command (core.boundary.serves):\n" + "\n".join(unserved)
    assert len(COMMAND_ROUTES) >= 30
    # Every command the console offers has a page: none is registered for nothing.
    assert {getattr(r.view, "command_action", None) for r in COMMAND_ROUTES} == set(COMMANDS)


def _records_of(client: Client, url: str, data: dict) -> tuple[int, list[AuditRecord], bytes]:
    before = AuditRecord.objects.order_by("-id").values_list("id", flat=True).first() or 0
    response = client.post(url, data)
    return response.status_code, list(AuditRecord.objects.filter(id__gt=before)), response.content


def test_a_refused_role_is_one_denied_record_of_the_action(live_cluster):
    clients = {role: _user(role) for role in (None, VIEWER, OPERATOR)}
    wrong = []
    for route in COMMAND_ROUTES:
        action = route.view.command_action
        client = clients[_below(COMMANDS[action].role)]
        status, records, _ = _records_of(client, route.url, {"confirm": "yes"})
        summary = [(r.action, r.result, r.target) for r in records]
        if status != 403 or summary != [(action, AuditRecord.RESULT_DENIED, route.url)]:
            wrong.append(f"{route}: {status}, records {summary}")
    assert not wrong, "\n".join(wrong)


def test_an_empty_form_is_one_record_of_the_action_and_invalid_input_a_400_with_its_reason(live_cluster):
    client = _user(ADMIN)
    wrong = []
    for route in COMMAND_ROUTES:
        action = route.view.command_action
        status, records, content = _records_of(client, route.url, {})
        if [r.action for r in records] != [action]:
            wrong.append(f"{route}: {status}, records {[(r.action, r.result) for r in records]}")
            continue
        (record,) = records
        if route.name in REFUSED_WHEN_EMPTY:
            reason = record.detail.removeprefix("invalid input: ")
            shown = html.unescape(content.decode())
            if status != 400 or record.result != AuditRecord.RESULT_FAILED or not reason:
                wrong.append(f"{route}: {status} {record.result} {record.detail!r}, expected a refusal")
            elif reason.split(":")[0].split("\n")[0].strip("* ") not in shown:
                wrong.append(f"{route}: the 400 page does not say why ({reason!r})")
    assert not wrong, "\n".join(wrong)


def test_a_done_action_is_one_ok_record_of_the_action(live_cluster):
    """A done action of each kind: a change to the cluster, to the console's own data, to alerts."""
    client = _user(ADMIN)
    ends = (timezone.now() + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    topic = {
        "topic": "WalkDone",
        "cluster": CLI_CLUSTER,
        "read_queue_nums": 2,
        "write_queue_nums": 2,
        "perm": 6,
    }
    done: list[tuple[str, dict[str, object], str]] = [
        (reverse("console:topic_save"), topic, "topic.save"),
        (
            reverse("console:save_tail_filter"),
            {"name": "mine", "topic": "WalkDone", "tags": "a"},
            "tail.filter.save",
        ),
        (reverse("alerts:silence_create"), {"ends_at": ends, "comment": "walk"}, "alerts.silence.create"),
    ]
    for url, data, action in done:
        status, records, content = _records_of(client, url, data)
        assert status == 302, (url, status, content[:300])
        assert [(r.action, r.result) for r in records] == [(action, AuditRecord.RESULT_OK)], url


def test_a_defect_in_a_command_still_leaves_one_failed_record():
    """Parameters of the wrong type (a caller's defect) fail inside the boundary: recorded, raised."""
    user = User.objects.create_superuser("cmd-defect", password=PASSWORD)
    actor = Actor(user, "127.0.0.1", "/somewhere")
    with pytest.raises(TypeError, match="takes SaveTopic"):
        execute("topic.save", actor, Cluster(""), object())
    (record,) = AuditRecord.objects.all()
    assert (record.action, record.result, record.remote_addr) == ("topic.save", "failed", "127.0.0.1")
    assert record.detail.startswith("internal error: TypeError")
