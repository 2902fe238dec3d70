"""Topic commands: create or update (on one broker or every master of a cluster), delete, send a
test message through the console's SDK producer (as mqadmin sendMessage does)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from broker.common.message import Message
from broker.common.topic_config import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from console.commands.masters import save_on_masters
from console.commands.parsing import form_refusal
from console.forms import SendMessageForm, TopicForm, check_topic
from console.services.sending import choose_queue, send_message
from core.boundary import Actor, Cluster, Invalid, Outcome, Params, command
from core.cluster_queries import is_system_topic_of


@dataclass(frozen=True)
class SaveTopic(Params):
    topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    order: bool
    broker_addr: str = ""
    cluster: str = ""

    @classmethod
    def parse(cls, data) -> SaveTopic | Invalid:
        form = TopicForm(data)
        if not form.is_valid():
            return form_refusal(form, data.get("topic", ""))
        fields = form.cleaned_data
        return cls(**{name: fields[name] for name in cls.__dataclass_fields__})

    @property
    def target(self) -> str:
        return self.topic

    def audit_parameters(self) -> dict[str, Any]:
        names = ("cluster", "broker_addr", "read_queue_nums", "write_queue_nums", "perm", "order")
        return {name: getattr(self, name) for name in names}


@command("topic.save")
def save_topic(actor: Actor, cluster: Cluster, params: SaveTopic) -> Outcome:
    refuse_broker_made_topic(params.topic)
    admin = cluster.admin
    addrs = save_on_masters(
        cluster,
        params,
        broker_addr=params.broker_addr,
        cluster_name=params.cluster,
        save_one=lambda addr: admin.create_or_update_topic(
            addr, params.topic, params.read_queue_nums, params.write_queue_nums, params.perm, params.order
        ),
    )
    detail = f"Topic {params.topic} saved on {', '.join(addrs)}"
    return Outcome(params.topic, detail, params.audit_parameters(), addrs)


@dataclass(frozen=True)
class DeleteTopic(Params):
    topic: str

    @classmethod
    def parse(cls, topic: str) -> DeleteTopic | Invalid:
        try:
            check_topic(topic)
        except ValidationError as exc:
            return Invalid(f"Invalid topic: {' '.join(exc.messages)}", target=topic)
        return cls(topic)

    @property
    def target(self) -> str:
        return self.topic


def refuse_system_topic(cluster: Cluster, topic: str) -> None:
    """The brokers' own topics are theirs to write and keep (schedule, transaction, trace...), as are
    the cluster- and broker-named ones every broker registers: never from the console."""
    if is_system_topic_of(cluster.admin, topic):
        reason = f"{topic} is a system topic: the console neither sends to nor deletes it"
        raise Invalid(reason, target=topic)


def refuse_broker_made_topic(topic: str) -> None:
    """A group's retry and dead-letter topics are the brokers' to create and fill (a message
    the group failed to consume): a message written there by hand would pass for a real retry
    or dead letter. ``dlq.make_readable`` is the one change the console makes to a DLQ topic."""
    if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
        reason = f"{topic} is a retry or dead-letter topic: only the brokers create and write it"
        raise Invalid(reason, target=topic)


@command("topic.delete")
def delete_topic(actor: Actor, cluster: Cluster, params: DeleteTopic) -> Outcome:
    refuse_system_topic(cluster, params.topic)
    addrs = cluster.admin.delete_topic(params.topic)
    detail = f"Topic {params.topic} deleted from {', '.join(addrs)} and the name server"
    return Outcome(params.topic, detail, {}, addrs)


@dataclass(frozen=True)
class SendTestMessage(Params):
    topic: str
    body: str
    tags: str = ""
    keys: str = ""
    broker_name: str = ""
    queue_id: int | None = None

    @classmethod
    def parse(cls, topic: str, data) -> SendTestMessage | Invalid:
        form = SendMessageForm(data)
        if not form.is_valid():
            return form_refusal(form, topic)
        fields = form.cleaned_data
        names = ("body", "tags", "keys", "broker_name", "queue_id")
        return cls(topic, **{name: fields[name] for name in names})

    @property
    def target(self) -> str:
        return self.topic

    def audit_parameters(self) -> dict[str, Any]:
        return {
            "tags": self.tags,
            "keys": self.keys,
            "broker_name": self.broker_name,
            "queue_id": self.queue_id,
            "body_bytes": len(self.body.encode("utf-8")),
        }


@command("topic.send")
def send_test_message(actor: Actor, cluster: Cluster, params: SendTestMessage) -> Outcome:
    refuse_broker_made_topic(params.topic)
    refuse_system_topic(cluster, params.topic)
    queue = None
    if params.broker_name:
        queue = choose_queue(cluster.admin.topic_route(params.topic), params.broker_name, params.queue_id)
    message = Message(topic=params.topic, body=params.body.encode("utf-8"))
    message.tags = params.tags or None
    message.keys = params.keys or None
    sent = send_message(cluster.producer, message, queue)
    detail = (
        f"Sent {sent.send_status} to {sent.message_queue.broker_name} queue {sent.message_queue.queue_id} "
        f"offset {sent.queue_offset}: msgId {sent.msg_id}, offsetMsgId {sent.offset_msg_id}"
    )
    return Outcome(params.topic, detail, params.audit_parameters(), sent)
