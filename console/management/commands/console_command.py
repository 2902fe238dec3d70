"""Run one console action from the shell, as mqadmin does, through the same command and boundary as
the pages: ``manage.py console_command topic.save --user alice --set topic=Orders --set
cluster=DefaultCluster``. The user named must hold the role the action needs; the action leaves the
same audit record as from the console, in that user's name (its target on a refusal names this
command). Fields are the page form's (``--set name=value``, repeatable: ``ids`` may be given more
than once), a field left out taking the default the page's form shows; names in the URL of the
page are fields here too (``topic``, ``group``, ``addr``...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import BadRequest, PermissionDenied
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.http import QueryDict

from console.commands import (
    FAILURES,
    Actor,
    Cluster,
    Refused,
    brokers,
    dlq,
    execute,
    groups,
    messages,
    topics,
)
from console.forms import GroupForm, TopicForm
from core.cluster_access import namesrv_choices

# How each action's parameters come from the fields (the page form's, plus the URL's names).
PARSERS: dict[str, Callable[[QueryDict], Any]] = {
    "topic.save": topics.SaveTopic.parse,
    "topic.delete": lambda f: topics.DeleteTopic.parse(f.get("topic", "")),
    "topic.send": lambda f: topics.SendTestMessage.parse(f.get("topic", ""), f),
    "group.save": groups.SaveGroup.parse,
    "group.delete": lambda f: groups.DeleteGroup(f.get("group", "")),
    "group.reset_offset": lambda f: groups.ResetOffset.parse(f.get("group", ""), f),
    "group.skip_backlog": lambda f: groups.SkipBacklog.parse(f.get("group", "")),
    "broker.config.update": lambda f: brokers.UpdateBrokerConfig.parse(f.get("addr", ""), f),
    "message.resend": lambda f: messages.Resend.parse(f.get("msg_id", ""), f),
    "transaction.end": messages.EndTransaction.parse,
    "dlq.make_readable": lambda f: dlq.MakeReadable.parse(f.get("group", "")),
    "dlq.replay": lambda f: dlq.Replay.parse(f.get("group", ""), f),
}


# Forms whose fields have defaults the page shows filled in: a field not given takes its default.
FORMS_WITH_DEFAULTS = {"topic.save": TopicForm, "group.save": GroupForm}


def fields_of(action: str, pairs: list[str]) -> QueryDict:
    fields = QueryDict(mutable=True)
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise CommandError(f"--set takes name=value, not {pair!r}")
        fields.appendlist(name, value)
    form = FORMS_WITH_DEFAULTS.get(action)
    for name, field in form.base_fields.items() if form else ():
        if name not in fields and field.initial is not None:
            fields[name] = str(field.initial)
    return fields


class Command(BaseCommand):
    help = "Run one console action (topic.save, group.reset_offset, dlq.replay...) as a named user, audited."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=sorted(PARSERS), help="the action, as the audit log names it")
        parser.add_argument("--user", required=True, help="the console user who acts (with the role)")
        parser.add_argument("--namesrv", default="", help="a BROKER_NAMESRV entry (default: the first)")
        parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="fields")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        user = get_user_model().objects.filter(username=options["user"], is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {options['user']!r}")
        choices = namesrv_choices()
        namesrv = options["namesrv"] or (choices[0] if choices else "")
        if namesrv not in choices:
            raise CommandError(f"{namesrv!r} is not a configured name server ({', '.join(choices)})")
        params = PARSERS[action](fields_of(action, options["fields"]))
        actor = Actor(user, None, f"manage.py console_command {action}")
        try:
            outcome = execute(action, actor, Cluster(namesrv), params)
        except (BadRequest, PermissionDenied) as exc:
            raise CommandError(f"{action} refused: {exc}") from None
        except Refused as exc:
            raise CommandError(f"{action} failed: {exc.shown}") from None
        except FAILURES as exc:
            raise CommandError(f"{action} failed: {exc}") from None
        if outcome.failed:
            raise CommandError(f"{action} failed: {outcome.detail}")
        self.stdout.write(outcome.detail or f"{action} {outcome.target}: done")
