"""The one boundary around every operator action: permission, validation, exactly one audit record.

An action is a command function registered here with ``@command(action)``: it takes the actor (who
acts, from where), the cluster handle and its typed parameters (a dataclass), and returns an
``Outcome`` (what the page shows, what the audit record keeps). ``execute`` is the only way to run
one, from a page, an htmx fragment or a management command alike:

1. the actor's role is checked against ``core.roles.ACTIONS`` — a refusal is recorded "denied"
   and raised as ``PermissionDenied``;
2. input the caller could not parse arrives as an ``Invalid`` instead of parameters, and a command
   refuses input it can only judge against the cluster by raising ``Invalid`` before any side
   effect — recorded "failed" with "invalid input: …" and raised as a 400 (``Invalid`` is a
   ``BadRequest``);
3. the command runs: a cluster refusal (``MQClientError``, ``ControllerError``) or a value the
   cluster cannot take (``ValueError``) is recorded "failed" with its reason and re-raised for the
   caller to show; otherwise its outcome is recorded.

Views link themselves to their command with ``serves(action)`` so that the URL walk test can check
that every mutating URL is served by a command.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, wraps
from typing import Any, NoReturn, TypeVar

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import Http404

from broker.client import Producer
from broker.client.admin import MQAdmin, MQClientError
from broker.common.errors import ControllerError
from broker.common.hosts import parse_host
from core.audit import audit_record
from core.models import AuditRecord
from core.roles import ACTIONS, has_role, mark_access, refusal

# What a command may fail with after validation: recorded as failed, re-raised for the caller.
T = TypeVar("T")

FAILURES = (MQClientError, ControllerError, ValueError)


@dataclass(frozen=True)
class Actor:
    """Who runs a command and from where: ``where`` names the request path (or the management
    command) that a refusal's record keeps as its target."""

    user: Any
    remote_addr: str | None = None
    where: str = ""

    @classmethod
    def of_request(cls, request) -> Actor:
        user = request.user if request.user.is_authenticated else None
        return cls(user, request.META.get("REMOTE_ADDR"), request.path)

    @property
    def username(self) -> str:
        return self.user.get_username() if self.user else "anonymous"


class Cluster:
    """The cluster a command acts on: the name server chosen, its admin client and producer (the
    console's shared ones, made on first use). A broker address from a command's input is taken
    only through ``registered_broker`` / ``broker_targets``: the cluster is what that name server
    lists, never an address given from outside it."""

    def __init__(self, namesrv: str) -> None:
        self.namesrv = namesrv

    @classmethod
    def of_request(cls, request) -> Cluster:
        """The name server the request's session chose (else the first configured)."""
        from core.cluster_access import current_namesrv

        return cls(current_namesrv(request))

    @cached_property
    def admin(self) -> MQAdmin:
        from core.cluster_access import admin_for

        return admin_for(self.checked_namesrv())

    @cached_property
    def producer(self) -> Producer:
        from core.cluster_access import producer_for

        return producer_for(self.checked_namesrv())

    def registered_broker(self, addr: str, params: Params, *, master: bool) -> str:
        """The address, as the chosen name server lists it, of the broker ``addr`` names — a master
        when ``master``. A command asks this before it sends anything to an address its input
        gave: an address outside the cluster (another cluster's broker, any other service) is
        refused as ``Invalid`` without a connection to it, so neither a write nor a port probe
        reaches it."""
        wanted = _host_of(addr)
        for data in self.admin.cluster_info().brokers.values():
            for broker_id, member in sorted(data.broker_addrs.items()):
                if member != addr and (wanted is None or _host_of(member) != wanted):
                    continue
                if master and member != data.master_addr:
                    reason = f"{addr} is broker id {broker_id} of {data.broker_name}, not its master"
                    raise Invalid(reason, target=params.target, parameters=params.audit_parameters())
                return member
        reason = f"no broker at {addr[:64]!r} is registered on name server {self.namesrv}"
        raise Invalid(reason, target=params.target, parameters=params.audit_parameters())

    def broker_targets(
        self, params: Params, broker_addr: str, cluster_name: str, *, masters: bool
    ) -> list[str]:
        """Where a change goes: the registered broker ``broker_addr`` names (``registered_broker``),
        else every master (``masters``) or every member of the cluster ``cluster_name``."""
        if broker_addr:
            return [self.registered_broker(broker_addr, params, master=masters)]
        if masters:
            return self.admin.resolve_masters(None, cluster_name or None)
        return self.admin.resolve_all_addrs(None, cluster_name or None)

    def checked_namesrv(self) -> str:
        """The name server; an ``MQClientError`` (a page saying so) when none is configured."""
        if not self.namesrv:
            raise MQClientError("no name server configured: set BROKER_NAMESRV")
        return self.namesrv


def _host_of(addr: str):
    """``addr`` as (ip, port), so an IPv6 host matches with or without brackets; None if it is none."""
    try:
        return parse_host(addr)
    except ValueError:
        return None


@dataclass
class Outcome:
    """What a command did: ``detail`` is the audit record's detail and the page's message;
    ``value`` what else the page shows; ``failed`` a result the command reports rather than raises
    (one broker of several refused)."""

    target: str
    detail: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    value: Any = None
    failed: bool = False


class Invalid(BadRequest):
    """Input refused before any side effect. Recorded as "invalid input: <reason>" (or ``detail``
    where a page has always recorded its form's own error text); ``shown`` is the 400's text (by
    default the reason); ``form``, when given, is the bound form a page shows again with its errors."""

    def __init__(
        self,
        reason: str,
        *,
        target: str = "",
        parameters: dict | None = None,
        shown: str | None = None,
        detail: str | None = None,
        form: Any = None,
    ) -> None:
        super().__init__(shown if shown is not None else reason)
        self.reason, self.target, self.parameters = reason, target, parameters or {}
        self.recorded_detail = detail if detail is not None else f"invalid input: {reason}"
        self.form = form


class Refused(Exception):
    """A failure the command has words for (and a target or parameters learnt on the way): recorded
    as failed with ``reason``; the caller shows ``shown``."""

    def __init__(self, reason: str, *, target: str, parameters: dict, shown: str = "") -> None:
        super().__init__(reason)
        self.reason, self.target, self.parameters, self.shown = reason, target, parameters, shown or reason


class Params:
    """The base of every command's parameters: what the record of a failure names."""

    @property
    def target(self) -> str:
        return ""

    def audit_parameters(self) -> dict[str, Any]:
        return {}


class Missing(Refused):
    """What the command acts on does not exist (deleted meanwhile?): the page answers 404."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(reason, target=what, parameters={})


@dataclass
class Command:
    action: str
    function: Callable[..., Outcome]
    params_type: type

    @property
    def role(self) -> str:
        return ACTIONS[self.action]


COMMANDS: dict[str, Command] = {}


def command(action: str):
    """Register ``function(actor, cluster, params) -> Outcome`` as the command for ``action``."""
    if action not in ACTIONS:
        raise ValueError(f"{action!r} has no role in core.roles.ACTIONS")

    def register(function: Callable[..., Outcome]) -> Callable[..., Outcome]:
        if action in COMMANDS:
            raise ValueError(f"{action!r} already has a command: {COMMANDS[action].function.__qualname__}")
        params_type = inspect.get_annotations(function, eval_str=True)["params"]
        COMMANDS[action] = Command(action, function, params_type)
        return function

    return register


def execute(action: str, actor: Actor, cluster: Cluster, params: Any) -> Outcome:
    """Run the command of ``action`` for ``actor`` with ``params`` (or refuse the ``Invalid`` that
    parsing them gave); exactly one audit record, whatever happens."""
    entry = COMMANDS[action]

    def record(target: str, parameters: dict, result: str, detail: str) -> None:
        audit_record(
            actor.user, action, target, parameters, result, detail, remote_addr=actor.remote_addr
        ).save()

    if actor.user is None or not has_role(actor.user, entry.role):
        deny(action, actor)
    try:
        if isinstance(params, Invalid):
            raise params
        if not isinstance(params, entry.params_type):
            raise TypeError(f"{action} takes {entry.params_type.__name__}, not {type(params).__name__}")
        outcome = entry.function(actor, cluster, params)
    except Invalid as exc:
        record(exc.target, exc.parameters, AuditRecord.RESULT_FAILED, exc.recorded_detail)
        raise
    except Refused as exc:
        record(exc.target, exc.parameters, AuditRecord.RESULT_FAILED, exc.reason)
        raise
    except FAILURES as exc:
        record(params.target, params.audit_parameters(), AuditRecord.RESULT_FAILED, str(exc))
        raise
    except Exception as exc:  # a defect: still one record, saying the action did not complete
        target = params.target if isinstance(params, Params) else ""
        record(target, {}, AuditRecord.RESULT_FAILED, f"internal error: {type(exc).__name__}: {exc}")
        raise
    result = AuditRecord.RESULT_FAILED if outcome.failed else AuditRecord.RESULT_OK
    record(outcome.target, outcome.parameters, result, outcome.detail)
    return outcome


NO_CLUSTER = Cluster("")  # for commands that change the console's own database only


def found(call: Callable[[], T]) -> T:
    """``call()``'s answer; a ``Missing`` it raises is the 404 page naming what is missing."""
    try:
        return call()
    except Missing as exc:
        raise Http404(exc.reason) from None


def run_local(request, action: str, params: Any) -> Outcome:
    """A view's run of a command that needs no cluster (alerts, reports) through the boundary; a
    missing event, rule, silence or schedule is the 404 page naming it."""
    return found(lambda: execute(action, Actor.of_request(request), NO_CLUSTER, params))


def deny(action: str, actor: Actor) -> NoReturn:
    """Refuse ``action`` to an actor without its role: one "denied" record, then the 403."""
    role = ACTIONS[action]
    audit_record(
        actor.user, action, actor.where, {}, AuditRecord.RESULT_DENIED, f"needs the {role} role",
        remote_addr=actor.remote_addr,
    ).save()  # fmt: skip
    raise PermissionDenied(
        refusal(actor.user, role) if actor.user else f"This needs the {role} role; log in."
    )


def leads_to(action: str):
    """View decorator for a page that leads to an action without doing it (a confirmation step):
    it needs the action's role. A refused request that tries to change something (not a GET) is
    recorded as a denied attempt at the action, as ``execute`` records one."""
    role = ACTIONS[action]

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                if request.method not in ("GET", "HEAD"):
                    deny(action, Actor.of_request(request))
                raise PermissionDenied(refusal(request.user, role))
            return view(request, *args, **kwargs)

        return mark_access(wrapped, role, action)

    return decorate


def serves(action: str):
    """View decorator linking a view to the command of ``action``: anonymous users go to the login
    page; a POST's role check and audit record are ``execute``'s (a GET showing the action's form
    is refused here, without a record). Marks the view with the role it
    needs (navigation, the URL walk) and its action."""
    role = ACTIONS[action]

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if request.method != "POST" and not has_role(request.user, role):
                raise PermissionDenied(refusal(request.user, role))  # the form page: no change, no record
            return view(request, *args, **kwargs)

        SERVING_VIEWS.setdefault(action, []).append(f"{view.__module__}.{view.__qualname__}")
        marked = mark_access(wrapped, role, action)
        marked.command_action = action  # type: ignore[attr-defined]
        return marked

    return decorate


# Views serving each action, by dotted name (filled in at import, before commands may register).
SERVING_VIEWS: dict[str, list[str]] = {}
