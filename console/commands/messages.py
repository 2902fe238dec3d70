"""Message commands: hand a stored message to one online consumer again (consume-message-directly,
RocketMQ's "resend" in the dashboard), and end a pending transaction (commit or rollback)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.client.admin import MQClientError
from broker.common.topic_config import TRANS_HALF_TOPIC
from console.commands.parsing import form_refusal
from console.forms import IdQueryForm, ResendForm
from console.services import transactions
from core.boundary import Actor, Cluster, Invalid, Outcome, Params, Refused, command

END_TRANSACTION = "transaction.end"


@dataclass(frozen=True)
class Resend(Params):
    offset_msg_id: str
    group: str
    client_id: str

    @classmethod
    def parse(cls, msg_id: str, data) -> Resend | Invalid:
        id_form = IdQueryForm({"msg_id": msg_id})
        if not id_form.is_valid():
            return form_refusal(id_form, msg_id)
        form = ResendForm(data)
        if not form.is_valid():
            return form_refusal(form, msg_id)
        return cls(id_form.cleaned_data["msg_id"], form.cleaned_data["group"], form.cleaned_data["client_id"])

    @property
    def target(self) -> str:
        return self.offset_msg_id

    def audit_parameters(self) -> dict[str, Any]:
        return {"group": self.group, "client_id": self.client_id}


@command("message.resend")
def resend(actor: Actor, cluster: Cluster, params: Resend) -> Outcome:
    """The client runs its listener on the message again; offsets do not move."""
    admin = cluster.admin
    topic = admin.view_cluster_message(params.offset_msg_id).topic
    result = admin.consume_message_directly(params.group, params.client_id, params.offset_msg_id, topic)
    if result.get("consumeResult") != "CR_SUCCESS":
        raise ValueError(
            f"the consumer answered {result.get('consumeResult')}"
            + (f": {result['remark']}" if result.get("remark") else "")
        )
    detail = (
        f"Message {params.offset_msg_id} consumed again by {params.client_id} of {params.group}: "
        f"{result.get('consumeResult')} in {result.get('spentTimeMills', 0)} ms"
    )
    return Outcome(params.offset_msg_id, detail, params.audit_parameters(), result)


@dataclass(frozen=True)
class EndTransaction(Params):
    offset_msg_id: str
    commit: bool

    @classmethod
    def parse(cls, data) -> EndTransaction | Invalid:
        offset_msg_id = (data.get("offset_msg_id") or "").strip()
        action = data.get("action")
        fields = {"action": action}
        if action not in ("commit", "rollback"):
            return Invalid("action must be commit or rollback", target=offset_msg_id, parameters=fields)
        if not offset_msg_id:
            return Invalid("name the half message (offset_msg_id)", target=offset_msg_id, parameters=fields)
        return cls(offset_msg_id, action == "commit")

    @property
    def action(self) -> str:
        return "commit" if self.commit else "rollback"

    @property
    def target(self) -> str:
        return self.offset_msg_id

    def audit_parameters(self) -> dict[str, Any]:
        return {"action": self.action}


class TransactionEndFailed(Refused):
    """The broker refused the end of a transaction found pending (the page shows ``error``, the
    cluster's own)."""

    def __init__(self, error: MQClientError, *, target: str, parameters: dict) -> None:
        super().__init__(str(error), target=target, parameters=parameters)
        self.error = error


@command(END_TRANSACTION)
def end_transaction(actor: Actor, cluster: Cluster, params: EndTransaction) -> Outcome:
    """One action name whatever happens (refused by role, bad input, done): the decision is a
    parameter. A half message no longer pending is refused before anything is sent."""
    try:
        half = transactions.find_pending(cluster.admin, params.offset_msg_id)
    except ValueError as exc:
        raise Invalid(str(exc), target=params.offset_msg_id, parameters=params.audit_parameters()) from None
    recorded = {
        "action": params.action,
        "producerGroup": half.producer_group,
        "topic": half.real_topic,
        "msgId": half.message.client_msg_id,
        "broker": half.located.broker_name,
        "halfOffset": half.message.queue_offset,
    }
    target = f"{TRANS_HALF_TOPIC}:{params.offset_msg_id}"
    try:
        transactions.end_transaction(cluster.admin, half, commit=params.commit)
    except MQClientError as exc:
        raise TransactionEndFailed(exc, target=target, parameters=recorded) from exc
    shown = (
        f"{params.action.capitalize()} of {half.message.client_msg_id} sent to {half.located.broker_name}."
    )
    return Outcome(target, "", recorded, shown)
