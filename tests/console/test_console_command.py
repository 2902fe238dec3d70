"""``manage.py console_command``: the console's actions from the shell, through the same commands
and boundary as the pages — the same role check and the same one audit record, in the named user's
name."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command

from core.models import AuditRecord
from core.roles import OPERATOR, VIEWER
from tests.cluster import CLI_CLUSTER as CLUSTER

pytestmark = pytest.mark.django_db


def _user(name: str, role: str) -> User:
    user = User.objects.create_user(name, password="unused-in-this-test-42")
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def _run(*args: str) -> str:
    out = StringIO()
    call_command("console_command", *args, stdout=out)
    return out.getvalue()


def test_an_operator_creates_a_topic_audited_as_from_the_page(admin):
    _user("olga", OPERATOR)
    printed = _run("topic.save", "--user", "olga", "--set", "topic=CliMade", "--set", f"cluster={CLUSTER}")
    route = admin.topic_route("CliMade")
    assert route.queue_datas and route.queue_datas[0].write_queue_nums == 8
    (record,) = AuditRecord.objects.all()
    assert (record.username, record.action, record.target, record.result) == (
        "olga",
        "topic.save",
        "CliMade",
        "ok",
    )
    assert record.detail.startswith("Topic CliMade saved on ") and printed.strip() == record.detail
    assert record.parameters["cluster"] == CLUSTER and record.parameters["perm"] == 6


def test_a_viewer_is_refused_with_one_denied_record_naming_the_command(live_cluster):
    _user("vic", VIEWER)
    with pytest.raises(CommandError, match="needs the operator role"):
        _run("group.skip_backlog", "--user", "vic", "--set", "group=any")
    (record,) = AuditRecord.objects.all()
    assert (record.action, record.result) == ("group.skip_backlog", "denied")
    assert record.target == "manage.py console_command group.skip_backlog" and record.username == "vic"


def test_invalid_input_is_refused_before_anything_with_its_reason(live_cluster):
    _user("oscar", OPERATOR)
    with pytest.raises(CommandError, match="choose a cluster or a broker"):
        _run("topic.save", "--user", "oscar", "--set", "topic=NoWhere")
    (record,) = AuditRecord.objects.all()
    assert (record.action, record.result, record.target) == ("topic.save", "failed", "NoWhere")
    assert record.detail == "invalid input: form: choose a cluster or a broker"


def test_an_unknown_user_or_field_syntax_is_refused_without_a_record(live_cluster):
    with pytest.raises(CommandError, match="no active user"):
        _run("topic.delete", "--user", "nobody", "--set", "topic=T")
    _user("otis", OPERATOR)
    with pytest.raises(CommandError, match="name=value"):
        _run("topic.delete", "--user", "otis", "--set", "topic")
    assert not AuditRecord.objects.exists()
