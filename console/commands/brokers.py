"""Broker commands (admins): update a broker's config, purge a quarantined range of damaged
commit-log data, and — with RocketMQ 5's controller mode — switch a broker set's master."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.common.errors import ControllerError
from broker.controller.state import MAX_BROKER_ID
from console.commands.parsing import form_refusal
from console.forms import BrokerConfigForm
from console.services.replication import SwitchoverRefused, switchover, switchover_plan
from core.boundary import Actor, Cluster, Invalid, Outcome, Params, Refused, command

SWITCHOVER = "broker.switchover"
PURGE_DAMAGED = "broker.damaged.purge"


@dataclass(frozen=True)
class UpdateBrokerConfig(Params):
    addr: str
    key: str
    value: str

    @classmethod
    def parse(cls, addr: str, data) -> UpdateBrokerConfig | Invalid:
        form = BrokerConfigForm(data)
        if not form.is_valid():
            return form_refusal(form, addr)
        return cls(addr, form.cleaned_data["key"], form.cleaned_data["value"])

    @property
    def target(self) -> str:
        return self.addr

    def audit_parameters(self) -> dict[str, Any]:
        return {self.key: self.value}


@command("broker.config.update")
def update_broker_config(actor: Actor, cluster: Cluster, params: UpdateBrokerConfig) -> Outcome:
    addr = cluster.registered_broker(params.addr, params, master=False)
    remark = cluster.admin.update_broker_config(addr, {params.key: params.value})
    # The broker's own words: applied now, or written and needing a restart.
    detail = f"Broker {params.addr}: {remark or f'{params.key} set to {params.value}'}"
    return Outcome(params.addr, detail, params.audit_parameters(), remark)


@dataclass(frozen=True)
class PurgeDamaged(Params):
    addr: str
    start: int  # the commit-log offset where the quarantined range begins

    @classmethod
    def parse(cls, addr: str, data) -> PurgeDamaged | Invalid:
        text = (data.get("from") or "").strip()
        fields = {"from": text[:32]}
        if not text.isdigit() or len(text) > 19:
            reason = f"from must be a commit-log offset (a whole number), not {text[:32]!r}"
            return Invalid(reason, target=addr, parameters=fields)
        if data.get("confirm") != "yes":
            return Invalid(
                "purging damaged data must be confirmed (confirm=yes)", target=addr, parameters=fields
            )
        return cls(addr, int(text))

    @property
    def target(self) -> str:
        return self.addr

    def audit_parameters(self) -> dict[str, Any]:
        return {"from": self.start}


@command(PURGE_DAMAGED)
def purge_damaged(actor: Actor, cluster: Cluster, params: PurgeDamaged) -> Outcome:
    """Delete one quarantined range of damaged commit-log data (the broker's purge request). The
    messages whose bytes lay there are gone for good."""
    addr = cluster.registered_broker(params.addr, params, master=False)
    purged = cluster.admin.purge_damaged_commit_log(addr, params.start)
    done = "; ".join(
        f"{r.to_offset - r.from_offset} bytes from offset {r.from_offset} to {r.to_offset}" for r in purged
    )
    text = f"purged {done}; the messages stored there are gone" if done else "nothing was left to purge"
    return Outcome(params.addr, f"Broker {params.addr}: {text}", params.audit_parameters(), purged)


def _posted_id(data, name: str, broker_name: str) -> int | Invalid:
    text = (data.get(name) or "").strip()
    if not text.isdigit() or not 0 <= int(text) < MAX_BROKER_ID:
        reason = (
            f"{name} must be a broker id (a whole number from 0 to {MAX_BROKER_ID - 1}), not {text[:32]!r}"
        )
        return Invalid(reason, target=broker_name)
    return int(text)


@dataclass(frozen=True)
class Switchover(Params):
    broker_name: str
    broker_id: int
    expected_epoch: int  # the master epoch the confirmation showed

    @classmethod
    def parse(cls, broker_name: str, data) -> Switchover | Invalid:
        broker_id = _posted_id(data, "broker_id", broker_name)
        if isinstance(broker_id, Invalid):
            return broker_id
        expected_epoch = _posted_id(data, "master_epoch", broker_name)
        if isinstance(expected_epoch, Invalid):
            return expected_epoch
        if data.get("confirm") != "yes":
            reason = "a switchover must be confirmed (confirm=yes, from its confirmation page)"
            return Invalid(reason, target=broker_name, parameters={"to": broker_id})
        return cls(broker_name, broker_id, expected_epoch)

    @property
    def target(self) -> str:
        return self.broker_name

    def audit_parameters(self) -> dict[str, Any]:
        return {"to": self.broker_id}


class SetNotFound(Refused):
    """The set or the broker named does not exist (the page answers 404)."""


def _replica_text(identity) -> str:
    return f"{identity.broker_id} ({identity.broker_address})" if identity else "none"


@command(SWITCHOVER)
def switch_master(actor: Actor, cluster: Cluster, params: Switchover) -> Outcome:
    """Make the replica ``broker_id`` the master of ``broker_name``. If the set changed master
    since the confirmation (another epoch), nothing is asked of the controller. A controller that
    does not answer is a ``ControllerError`` (recorded as failed by the boundary)."""
    broker_name, broker_id = params.broker_name, params.broker_id
    try:
        plan = switchover_plan(cluster.admin, broker_name, broker_id)
    except SwitchoverRefused as exc:
        raise SetNotFound(str(exc), target=broker_name, parameters=params.audit_parameters()) from exc
    recorded = {
        "broker_set": broker_name,
        "from": _replica_text(plan.current_master),
        "to": _replica_text(plan.target),
        "master_epoch": plan.replicas.master_epoch,
        "controllers": ";".join(plan.source.addresses),
    }
    if plan.replicas.master_epoch != params.expected_epoch:
        reason = (
            f"the master of {broker_name} changed since the confirmation (epoch {params.expected_epoch} "
            f"then, {plan.replicas.master_epoch} now, master {_replica_text(plan.current_master)}); "
            "review it again"
        )
        shown = f"Switchover of {broker_name} not done: {reason}"
        raise Refused(reason, target=broker_name, parameters=recorded, shown=shown)
    try:
        result = switchover(cluster.admin, plan)
    except ControllerError as exc:
        if exc.code is not None:
            reason = str(exc)
            shown = f"Switchover of {broker_name} to broker {broker_id} refused by the controller: {reason}"
        else:  # no answer: the leader may have decided before it went silent
            reason = f"no controller answered: {exc.remark}"
            shown = (
                f"Switchover of {broker_name} to broker {broker_id}: {reason}. It may or may not have "
                "happened; the Replication section shows the master the controllers name now."
            )
        raise Refused(reason, target=broker_name, parameters=recorded, shown=shown) from exc
    was = f"{_replica_text(plan.current_master)} at epoch {plan.replicas.master_epoch}"
    text = (
        f"Broker {result.master_id} ({result.master_address}) is the master of {broker_name} at epoch "
        f"{result.master_epoch} (was {was})"
    )
    return Outcome(broker_name, text, recorded, result)
