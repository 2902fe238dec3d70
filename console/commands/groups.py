"""Consumer group commands: create or update a subscription group (one broker or every master of a
cluster), delete one, reset its offsets to a time, skip its backlog."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from broker.client.admin import NotFoundError
from console.commands.masters import save_on_masters
from console.commands.parsing import form_refusal
from console.forms import GroupForm, ResetOffsetForm, check_group
from core.boundary import Actor, Cluster, Invalid, Outcome, Params, command
from core.cluster_queries import group_detail

GROUP_OPTIONS = (
    "retry_max_times",
    "retry_queue_nums",
    "consume_enable",
    "consume_broadcast_enable",
    "consume_from_min_enable",
    "consume_message_orderly",
)


@dataclass(frozen=True)
class SaveGroup(Params):
    group: str
    options: dict[str, Any]
    broker_addr: str = ""
    cluster: str = ""

    @classmethod
    def parse(cls, data) -> SaveGroup | Invalid:
        form = GroupForm(data)
        if not form.is_valid():
            return form_refusal(form, data.get("group", ""))
        fields = form.cleaned_data
        options = {name: fields[name] for name in GROUP_OPTIONS}
        return cls(fields["group"], options, fields["broker_addr"], fields["cluster"])

    @property
    def target(self) -> str:
        return self.group

    def audit_parameters(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "broker_addr": self.broker_addr, **self.options}


@command("group.save")
def save_group(actor: Actor, cluster: Cluster, params: SaveGroup) -> Outcome:
    admin = cluster.admin
    addrs = save_on_masters(
        cluster,
        params,
        broker_addr=params.broker_addr,
        cluster_name=params.cluster,
        save_one=lambda addr: admin.create_or_update_subscription_group(addr, params.group, **params.options),
    )
    detail = f"Consumer group {params.group} saved on {', '.join(addrs)}"
    return Outcome(params.group, detail, params.audit_parameters(), addrs)


@dataclass(frozen=True)
class DeleteGroup(Params):
    group: str

    @property
    def target(self) -> str:
        return self.group


@command("group.delete")
def delete_group(actor: Actor, cluster: Cluster, params: DeleteGroup) -> Outcome:
    """Delete the group's config (and its offsets) from every master that has it."""
    admin, group = cluster.admin, params.group
    detail = group_detail(admin, group)
    info = admin.cluster_info()
    addrs = [info.brokers[name].master_addr for name in detail.configs if info.brokers[name].master_addr]
    if not addrs:
        raise NotFoundError(f"consumer group {group!r} has no config on any broker (nothing to delete)")
    for addr in addrs:
        admin.delete_subscription_group(addr, group, remove_offset=True)
    return Outcome(group, f"Consumer group {group} deleted from {', '.join(addrs)}", {}, addrs)


@dataclass(frozen=True)
class ResetOffset(Params):
    group: str
    topic: str
    mode: str
    timestamp: int  # RocketMQ's resetOffsetByTime: 0 earliest, -1 latest, else epoch ms

    @classmethod
    def parse(cls, group: str, data) -> ResetOffset | Invalid:
        form = ResetOffsetForm(data)
        if not form.is_valid():
            return form_refusal(form, group)
        return cls(group, form.cleaned_data["topic"], form.cleaned_data["mode"], form.target_millis())

    @property
    def target(self) -> str:
        return self.group

    def audit_parameters(self) -> dict[str, Any]:
        return {"topic": self.topic, "mode": self.mode, "timestamp": self.timestamp}


@command("group.reset_offset")
def reset_offset(actor: Actor, cluster: Cluster, params: ResetOffset) -> Outcome:
    """Move the group's offsets on ``topic``. A group no broker knows (no config, no offsets, no
    consumer) is refused with ``NotFoundError``: the brokers would otherwise take the offsets and
    make the group up (a typo'd name reported "ok")."""
    group_detail(cluster.admin, params.group)
    entries = cluster.admin.reset_offset_by_time(params.group, params.topic, params.timestamp, force=True)
    detail = f"Offsets of {params.group} on {params.topic} reset: " + ", ".join(
        f"{e.broker_name}/{e.queue_id}→{e.offset}" for e in entries
    )
    return Outcome(params.group, detail, params.audit_parameters(), entries)


@dataclass(frozen=True)
class SkipBacklog(Params):
    group: str

    @classmethod
    def parse(cls, group: str) -> SkipBacklog | Invalid:
        try:
            check_group(group)
        except ValidationError as exc:
            return Invalid(f"Invalid group: {' '.join(exc.messages)}", target=group)
        return cls(group)

    @property
    def target(self) -> str:
        return self.group


@command("group.skip_backlog")
def skip_backlog(actor: Actor, cluster: Cluster, params: SkipBacklog) -> Outcome:
    """Move every topic of the group to its latest offset: the backlog is skipped, never consumed."""
    admin, group = cluster.admin, params.group
    progress = admin.consumer_progress(group)
    topics = sorted({q.topic for q in progress.queues})
    for topic in topics:
        admin.reset_offset_by_time(group, topic, -1, force=True)
    return Outcome(group, f"Backlog of {group} skipped on {', '.join(topics)}", {}, topics)
