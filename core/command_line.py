"""Each command's command-line form: how ``manage.py console_command`` turns ``--set name=value``
fields into the parameters of the command it runs.

Every app that registers commands (``core.boundary.command``) registers here, for each, the same
parse function its page calls (``register``), adapted to fields only: names a page takes from its
URL (``topic``, ``group``, ``rule_id``...) are fields too. The parse function is the one place the
input is judged — what it refuses arrives at ``execute`` as an ``Invalid``, recorded like a page's
400 — so the command line is a second surface with no second validation. Apps fill the table from
their ``ready()``, as they register their commands: core knows no app (feature apps never import
each other), and ``console_command`` (core/management/commands/) serves every app's actions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

from django import forms
from django.http import QueryDict

from core.boundary import Invalid

# A page's form class (its fields, their initial values).
PageForm: TypeAlias = "type[forms.Form] | type[forms.ModelForm[Any]]"  # a string: Django's is not generic
# fields → the command's parameters, or the Invalid a page would have answered with a 400
FieldParser = Callable[[QueryDict], Any]


@dataclass(frozen=True)
class CommandLine:
    parse: FieldParser
    fields: tuple[str, ...]  # the field names ``--help`` lists, the only ones taken
    defaults: PageForm | None  # a form whose initial values fill the fields left out
    repeatable: tuple[str, ...] = ()  # fields a page posts many times (checkboxes): given as often


PARSERS: dict[str, CommandLine] = {}


def register(
    action: str,
    parse: FieldParser,
    fields: Iterable[str],
    *,
    defaults: PageForm | None = None,
    repeatable: Iterable[str] = (),
) -> None:
    """Give ``action`` its command-line form. ``defaults``: a form whose fields the page shows
    filled in (a new topic's 8 queues...), so a field not given takes the value the page would
    have sent. ``repeatable``: the fields that may be given more than once (a page's checkboxes)."""
    if action in PARSERS:
        raise ValueError(f"{action!r} has a command-line form already")
    names = tuple(dict.fromkeys(fields))
    if not set(repeatable) <= set(names):
        raise ValueError(f"{action!r}: repeatable fields must be among its fields")
    PARSERS[action] = CommandLine(parse, names, defaults, tuple(repeatable))


def form_fields(form: PageForm) -> tuple[str, ...]:
    """The names of a page form's fields, as ``--help`` lists them."""
    return tuple(form.base_fields)


def without(fields: QueryDict, name: str) -> QueryDict:
    """``fields`` less one (a URL's id, which the page never posts with its form)."""
    rest = fields.copy()
    rest.pop(name, None)
    return rest


def by_id(name: str, make: Callable[[Any, QueryDict], Any], *, optional: bool = False) -> FieldParser:
    """A parser for an action whose page names its object by an id in the URL (``<int:name>``):
    ``make(id, other fields)``; an id that is not a whole number is refused as invalid input. An
    ``optional`` id left out is ``None`` (the page that creates instead of editing)."""

    def parse(fields: QueryDict) -> Any:
        text = (fields.get(name) or "").strip()
        if optional and not text:
            return make(None, without(fields, name))
        if not text.isdigit() or len(text) > 18:
            return Invalid(f"{name} must be an id (a whole number), not {text[:32]!r}", target=text[:32])
        return make(int(text), without(fields, name))

    return parse


def fields_of(action: str, pairs: Iterable[str]) -> QueryDict:
    """``--set name=value`` pairs as the fields a page posts, the fields of the action's
    ``defaults`` form not given taking their initial values. A pair without ``=``, a name the
    action does not take (a typo would otherwise be dropped) or a name given twice that is not
    ``repeatable`` (which value was meant?) is a ``ValueError``."""
    line = PARSERS[action]
    fields = QueryDict(mutable=True)
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--set takes name=value, not {pair!r}")
        if name not in line.fields:
            raise ValueError(f"{action} has no field {name!r}; its fields: {', '.join(line.fields)}")
        if name in fields and name not in line.repeatable:
            raise ValueError(f"{name} is given twice: give each field of {action} once")
        fields.appendlist(name, value)
    form = line.defaults
    for name, field in form.base_fields.items() if form else ():
        if name not in fields and field.initial is not None:
            fields[name] = str(field.initial)
    return fields
