"""Console roles and what each may do: viewer < operator < admin, kept as Django auth groups.

Superusers count as admin. Every mutating action of the console has one entry in ``ACTIONS``
(its audit name → the least role that may do it), and ``may(user, action)`` is the one answer to
"may this user do X": ``core.boundary.execute`` asks it before every command (the views serving
an action are wrapped in ``core.boundary.serves(action)``), and templates show a
control only under ``{% if may.<action> %}`` (the ``may`` context variable, ``Permissions``), so a
button is shown exactly when pressing it is allowed.

A refused request raises ``PermissionDenied`` naming the role needed; the project's 403 handler
(``core.errors``) shows it in the console layout (a fragment of it for htmx requests).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Protocol, cast

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseBase

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLE_ORDER = (VIEWER, OPERATOR, ADMIN)

ACTIONS: dict[str, str] = {
    "namesrv.switch": VIEWER,
    "topic.save": OPERATOR,
    "topic.delete": OPERATOR,
    "topic.send": OPERATOR,
    "group.save": OPERATOR,
    "group.delete": OPERATOR,
    "group.reset_offset": OPERATOR,
    "group.skip_backlog": OPERATOR,
    "message.resend": OPERATOR,
    "broker.config.update": ADMIN,
    "broker.switchover": ADMIN,
    "broker.damaged.purge": ADMIN,
    "acl.account.save": ADMIN,
    "acl.account.delete": ADMIN,
    "acl.white_list.update": ADMIN,
    "dlq.replay": OPERATOR,
    "dlq.make_readable": OPERATOR,
    "transaction.end": OPERATOR,
    "tail.filter.save": OPERATOR,
    "tail.filter.delete": OPERATOR,
    "analytics.run.start": OPERATOR,
    "analytics.schedule.create": OPERATOR,
    "analytics.schedule.update": OPERATOR,
    "analytics.schedule.toggle": OPERATOR,
    "analytics.schedule.delete": OPERATOR,
    "alerts.rule.save": OPERATOR,
    "alerts.rule.delete": OPERATOR,
    "alerts.event.acknowledge": OPERATOR,
    "alerts.silence.create": OPERATOR,
    "alerts.silence.expire": OPERATOR,
}


def user_role(user) -> str | None:
    """The highest console role the user holds, or None for a user without any."""
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    names = set(user.groups.values_list("name", flat=True))
    for role in reversed(ROLE_ORDER):
        if role in names:
            return role
    return None


def has_role(user, minimum: str) -> bool:
    role = user_role(user)
    return role is not None and ROLE_ORDER.index(role) >= ROLE_ORDER.index(minimum)


def may(user, action: str) -> bool:
    """May ``user`` do ``action`` (a key of ``ACTIONS``)? An unknown action is a programming error."""
    return has_role(user, ACTIONS[action])


class Permissions:
    """``may`` in templates: ``{% if may.topic.save %}`` is ``may(user, "topic.save")``.

    Each dotted part narrows the action name; only a complete action name answers, and a name that
    is no action at all fails the template lookup (so it renders as false, never as a button).
    """

    def __init__(self, user, prefix: str = "") -> None:
        self._user, self._prefix = user, prefix

    def __getitem__(self, part: str) -> Permissions | bool:
        name = f"{self._prefix}.{part}" if self._prefix else part
        if name in ACTIONS:
            return self._user is not None and may(self._user, name)
        if any(action.startswith(name + ".") for action in ACTIONS):
            return Permissions(self._user, name)
        raise KeyError(name)

    def __bool__(self) -> bool:  # a part of a name ("may.topic") allows nothing
        return False


def require_role(minimum: str, action: str | None = None):
    """View decorator for pages that read: anonymous users go to the login page, others without
    the role get a 403. Reading writes no audit record; actions are ``core.boundary``'s."""
    if minimum not in ROLE_ORDER:
        raise ValueError(f"unknown role {minimum!r}")

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, minimum):
                raise PermissionDenied(refusal(request.user, minimum))
            return view(request, *args, **kwargs)

        return mark_access(wrapped, minimum, action)

    return decorate


def refusal(user, minimum: str) -> str:
    """Why a logged-in ``user`` may not do what needs ``minimum``, and what to do about it."""
    if user_role(user) is None:
        return (
            f"This needs the {minimum} role and your account has no console role yet; ask an admin to "
            "put you in the viewer, operator or admin group."
        )
    return f"This action needs the {minimum} role; ask an admin to grant it."


def require_login(view):
    """View decorator for the one page a logged-in user without a role may see (what to do next):
    anonymous users go to the login page. Marked ``required_role = None`` for the URL walk test."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return mark_access(wrapped, None, None)


class AccessMarkedView(Protocol):
    """A view carrying what it needs: read by the navigation and the URL walk test."""

    required_role: str | None
    permission: str | None

    def __call__(self, *args: Any, **kwargs: Any) -> HttpResponseBase: ...


def mark_access(
    view: Callable[..., HttpResponseBase], role: str | None, permission: str | None
) -> AccessMarkedView:
    """Mark ``view`` with the least role it needs and the action it audits as (None: none)."""
    marked = cast(AccessMarkedView, view)
    marked.required_role = role
    marked.permission = permission
    return marked
