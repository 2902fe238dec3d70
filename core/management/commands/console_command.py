"""Run any console action from the shell, as mqadmin does, through the same command and boundary as
the pages: ``manage.py console_command topic.save --user alice --set topic=Orders --set
cluster=DefaultCluster``. Every registered command (``core.boundary.COMMANDS``: the console's, the
alerts' and the reports') has its command-line form (``core.command_line``), so this is a complete
second surface. The user named must hold the role the action needs; the action leaves the same audit
record as from the page, in that user's name (its target on a refusal names this command). Fields
are the page form's (``--set name=value``, each once, but ``ids`` may be given more than once), plus
the names in the URL of the page (``topic``, ``group``, ``addr``, ``rule_id``...); ``--help`` lists
each action's. A refusal or failure exits non-zero with its reason on stderr.
"""

from __future__ import annotations

import textwrap
from argparse import RawDescriptionHelpFormatter
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import BadRequest, PermissionDenied
from django.core.management.base import BaseCommand, CommandError, CommandParser, DjangoHelpFormatter

from core.boundary import COMMANDS, FAILURES, Actor, Cluster, Refused, execute
from core.cluster_access import namesrv_choices
from core.command_line import PARSERS, fields_of


class ActionsHelpFormatter(RawDescriptionHelpFormatter, DjangoHelpFormatter):
    """Django's option order, and the list of actions kept one per line."""


def actions_help() -> str:
    lines = ["actions (role needed: fields):"]
    for action in sorted(PARSERS):
        text = f"{action} ({COMMANDS[action].role}): {', '.join(PARSERS[action].fields)}"
        lines += textwrap.wrap(text, 100, initial_indent="  ", subsequent_indent="      ")
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Run one console action (topic.save, alerts.rule.save, dlq.replay...) as a named user, audited."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("formatter_class", ActionsHelpFormatter)
        kwargs.setdefault("epilog", actions_help())
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "action", choices=sorted(PARSERS), metavar="ACTION", help="the action, as the audit log names it"
        )
        parser.add_argument("--user", required=True, help="the console user who acts (with the role)")
        parser.add_argument("--namesrv", default="", help="a BROKER_NAMESRV entry (default: the first)")
        parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="fields")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        user = get_user_model().objects.filter(username=options["user"], is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {options['user']!r}: name a console user who can log in")
        choices = namesrv_choices()
        namesrv = options["namesrv"] or (choices[0] if choices else "")
        if options["namesrv"] and namesrv not in choices:
            raise CommandError(f"{namesrv!r} is not a configured name server ({', '.join(choices)})")
        try:
            fields = fields_of(action, options["fields"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        params = PARSERS[action].parse(fields)
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
