"""``manage.py console_command``: every registered command from the shell (the console's, the alerts'
and the reports'), through the same parse functions, commands and boundary as the pages — the same
role check and the same one audit record, in the named user's name; a refusal exits non-zero with
its reason on stderr."""

from __future__ import annotations

import datetime
from io import StringIO

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django_celery_beat.models import PeriodicTask

from alerts.models import AlertRule, Silence
from console.models import SavedTailFilter
from core.boundary import COMMANDS
from core.command_line import PARSERS
from core.management.commands.console_command import Command
from core.models import AuditRecord
from core.roles import ADMIN, OPERATOR, VIEWER
from tests.cluster import CLI_CLUSTER as CLUSTER

pytestmark = pytest.mark.django_db


def _user(name: str, role: str) -> User:
    user = User.objects.create_user(name, password="unused-in-this-test-42")
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def _nobody() -> User:
    return User.objects.create_user("no-role", password="unused-in-this-test-42")


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


def _sets(fields: dict[str, str]) -> list[str]:
    """Fields as ``--set name=value`` arguments."""
    return [arg for name, value in fields.items() for arg in ("--set", f"{name}={value}")]


def _exit(capsys, *args: str) -> tuple[int, str]:
    """Run as ``manage.py console_command ARGS`` runs (``run_from_argv``): its exit status and stderr."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        Command().run_from_argv(["manage.py", "console_command", *args])
    return int(stopped.value.code or 0), capsys.readouterr().err


def test_every_registered_command_has_a_command_line_form_and_help_lists_each():
    assert set(PARSERS) == set(COMMANDS) and len(COMMANDS) >= 30
    shown = Command().create_parser("manage.py", "console_command").format_help()
    actions = shown.split("actions (role needed: fields):\n", 1)[1].splitlines()
    listed = {line.split()[0]: line.split()[1] for line in actions if not line.startswith("      ")}
    assert listed == {action: f"({entry.role}):" for action, entry in COMMANDS.items()}
    assert "  alerts.rule.delete (operator): rule_id" in shown
    assert "  acl.white_list.update (admin): cluster, broker_addr, addresses" in shown


RULE = {
    "name": "Cli lag",
    "kind": "group_lag",
    "enabled": "on",
    "severity": "critical",
    "threshold": "500",
    "for_minutes": "5",
    "window_minutes": "10",
    "group_pattern": "orders-*",
}


def test_an_operator_saves_edits_and_deletes_an_alert_rule_each_audited():
    _user("alma", OPERATOR)
    _run("alerts.rule.save", "--user", "alma", *_sets(RULE))
    rule = AlertRule.objects.get(name="Cli lag")
    assert (rule.name, rule.threshold, rule.updated_by) == ("Cli lag", 500, "alma")
    _run("alerts.rule.save", "--user", "alma", *_sets({**RULE, "threshold": "900", "rule_id": str(rule.pk)}))
    rule.refresh_from_db()
    assert rule.threshold == 900 and AlertRule.objects.filter(name="Cli lag").count() == 1
    _run("alerts.rule.delete", "--user", "alma", "--set", f"rule_id={rule.pk}")
    assert not AlertRule.objects.filter(pk=rule.pk).exists()
    records = [(r.action, r.result, r.target, r.detail) for r in AuditRecord.objects.order_by("id")]
    assert records == [
        ("alerts.rule.save", "ok", "Cli lag", "created"),
        ("alerts.rule.save", "ok", "Cli lag", "updated"),
        ("alerts.rule.delete", "ok", "Cli lag", f"Rule 'Cli lag' (id {rule.pk}) deleted"),
    ]
    edited = AuditRecord.objects.filter(action="alerts.rule.save").order_by("id")[1]
    assert edited.parameters == {"threshold": "900"}


def test_an_operator_creates_and_expires_a_silence():
    _user("sid", OPERATOR)
    ends = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    _run("alerts.silence.create", "--user", "sid", "--set", f"ends_at={ends}", "--set", "comment=cli")
    silence = Silence.objects.get()
    assert silence.created_by == "sid" and silence.comment == "cli"
    _run("alerts.silence.expire", "--user", "sid", "--set", f"silence_id={silence.pk}")
    silence.refresh_from_db()
    assert silence.ends_at <= datetime.datetime.now(datetime.UTC)
    assert [r.result for r in AuditRecord.objects.all()] == ["ok", "ok"]


def test_an_operator_creates_toggles_and_deletes_a_report_schedule():
    _user("ana", OPERATOR)
    form = {"name": "cli-nightly", "report": "throughput", "topics": "Orders", "crontab": "0 3 * * *"}
    printed = _run("analytics.schedule.create", "--user", "ana", *_sets(form))
    task = PeriodicTask.objects.get(name="cli-nightly")
    assert printed.strip() == "analytics.schedule.create cli-nightly: done"
    assert _run("analytics.schedule.toggle", "--user", "ana", "--set", f"schedule_id={task.pk}").strip() == (
        "enabled" if not task.enabled else "disabled"
    )
    _run("analytics.schedule.delete", "--user", "ana", "--set", f"schedule_id={task.pk}")
    assert not PeriodicTask.objects.filter(name="cli-nightly").exists()
    records = [(r.action, r.result, r.target) for r in AuditRecord.objects.order_by("id")]
    assert records == [
        ("analytics.schedule.create", "ok", "cli-nightly"),
        ("analytics.schedule.toggle", "ok", "cli-nightly"),
        ("analytics.schedule.delete", "ok", "cli-nightly"),
    ]


def test_an_operator_saves_and_deletes_a_tail_filter_of_their_own():
    _user("tess", OPERATOR)
    _run("tail.filter.save", "--user", "tess", *_sets({"name": "urgent", "topic": "Orders", "tags": "a||b"}))
    saved = SavedTailFilter.objects.get()
    assert (saved.user.username, saved.topic, saved.tags) == ("tess", "Orders", "a||b")
    _user("tom", OPERATOR)
    with pytest.raises(CommandError, match="no such filter of yours"):
        _run("tail.filter.delete", "--user", "tom", "--set", f"filter_id={saved.pk}")
    _run("tail.filter.delete", "--user", "tess", "--set", f"filter_id={saved.pk}")
    assert not SavedTailFilter.objects.exists()
    results = [(r.action, r.username, r.result) for r in AuditRecord.objects.order_by("id")]
    assert results == [
        ("tail.filter.save", "tess", "ok"),
        ("tail.filter.delete", "tom", "failed"),
        ("tail.filter.delete", "tess", "ok"),
    ]


# run_from_argv closes the database connections when it ends, as manage.py does: these tests run
# outside a test transaction for that.
@pytest.mark.django_db(transaction=True)
def test_a_user_without_the_role_exits_non_zero_with_the_reason_and_one_denied_record(capsys):
    _user("val", VIEWER)
    status, err = _exit(capsys, "alerts.rule.delete", "--user", "val", "--set", "rule_id=1")
    assert status == 1
    assert err.startswith("CommandError: alerts.rule.delete refused:") and "needs the operator role" in err
    (record,) = AuditRecord.objects.all()
    assert (record.action, record.result, record.username) == ("alerts.rule.delete", "denied", "val")
    assert record.target == "manage.py console_command alerts.rule.delete"


@pytest.mark.django_db(transaction=True)
def test_every_action_refuses_a_user_below_its_role_with_one_denied_record(capsys):
    """Walks every registered command, as the URL walk does the pages: refused before its input or
    the cluster is looked at."""
    below = {VIEWER: None, OPERATOR: VIEWER, ADMIN: OPERATOR}
    users = {role: _user(f"below-{role}", role) if role else _nobody() for role in (None, VIEWER, OPERATOR)}
    wrong = []
    for action, entry in sorted(COMMANDS.items()):
        user = users[below[entry.role]]
        status, err = _exit(capsys, action, "--user", user.username)
        records = [(r.action, r.result, r.username) for r in AuditRecord.objects.filter(action=action)]
        if (
            status != 1
            or f"needs the {entry.role} role" not in err
            or records != [(action, "denied", user.username)]
        ):
            wrong.append(f"{action}: exit {status}, {err.strip()!r}, records {records}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.django_db(transaction=True)
def test_invalid_input_exits_non_zero_with_the_reason_and_one_failed_record(capsys):
    _user("ivy", OPERATOR)
    status, err = _exit(capsys, "analytics.schedule.update", "--user", "ivy", "--set", "schedule_id=first")
    assert status == 1 and "schedule_id must be an id (a whole number), not 'first'" in err
    fields = {"name": "negative", "topics": "Orders", "crontab": "0 3 * * *", "window_hours": "-1"}
    status, err = _exit(capsys, "analytics.schedule.create", "--user", "ivy", *_sets(fields))
    assert status == 1 and "window_hours" in err and "greater than or equal to 0" in err
    records = [(r.action, r.result, r.detail) for r in AuditRecord.objects.order_by("id")]
    assert records[0] == (
        "analytics.schedule.update",
        "failed",
        "invalid input: schedule_id must be an id (a whole number), not 'first'",
    )
    assert records[1][:2] == ("analytics.schedule.create", "failed") and "window_hours" in records[1][2]
    assert len(records) == 2 and not PeriodicTask.objects.filter(name="negative").exists()
