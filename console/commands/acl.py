"""The brokers' plain ACL (admins only): create or update an account, delete one, replace the global
white list — on one broker or every broker of a cluster, as ``mqadmin updateAclConfig -b/-c`` does.

Every change is recorded once, with each broker's outcome (failed when any broker refused); a secret
key never reaches the audit log or a message: the record notes only whether one was given."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.client.admin import AsyncMQAdmin
from broker.client.admin.acl import MASK, PlainAccessConfig
from console.commands.parsing import form_refusal
from console.forms import AclAccountForm, AclDeleteForm, GlobalWhiteListForm
from core.boundary import Actor, Cluster, Invalid, Outcome, Params, command

SAVE, DELETE, WHITE_LIST = "acl.account.save", "acl.account.delete", "acl.white_list.update"
WHITE_LIST_TARGET = "globalWhiteRemoteAddresses"


def recorded_fields(data) -> dict[str, Any]:
    """What the audit record keeps of a form: every field but the secret key, whose presence only
    is noted."""
    fields = {k: data.get(k) for k in data if k not in ("csrfmiddlewaretoken", "secret_key")}
    if "secret_key" in data:
        fields["secret_key"] = MASK if data.get("secret_key") else ""
    return fields


@dataclass(frozen=True)
class AclChange(Params):
    """Where a change goes (``broker_addr``, or every broker of ``cluster``) and what the record
    keeps of the submitted fields (``fields``, the secret masked)."""

    name: str
    broker_addr: str
    cluster: str
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return self.name

    def audit_parameters(self) -> dict[str, Any]:
        return self.fields


def _refusal(form, data) -> Invalid:
    return form_refusal(form, str(data.get("access_key", ""))[:128], recorded_fields(data))


@dataclass(frozen=True)
class SaveAccount(AclChange):
    account: PlainAccessConfig | None = None

    @classmethod
    def parse(cls, data) -> SaveAccount | Invalid:
        form = AclAccountForm(data)
        if not form.is_valid():
            return _refusal(form, data)
        account = form.account()
        cleaned = form.cleaned_data
        return cls(
            account.access_key, cleaned["broker_addr"], cleaned["cluster"], recorded_fields(data), account
        )


@dataclass(frozen=True)
class DeleteAccount(AclChange):
    @classmethod
    def parse(cls, data) -> DeleteAccount | Invalid:
        form = AclDeleteForm(data)
        if not form.is_valid():
            return _refusal(form, data)
        cleaned = form.cleaned_data
        return cls(cleaned["access_key"], cleaned["broker_addr"], cleaned["cluster"], recorded_fields(data))


@dataclass(frozen=True)
class UpdateWhiteList(AclChange):
    addresses: tuple[str, ...] = ()

    @classmethod
    def parse(cls, data) -> UpdateWhiteList | Invalid:
        form = GlobalWhiteListForm(data)
        if not form.is_valid():
            return form_refusal(form, WHITE_LIST_TARGET, recorded_fields(data))
        cleaned = form.cleaned_data
        return cls(
            WHITE_LIST_TARGET,
            cleaned["broker_addr"],
            cleaned["cluster"],
            recorded_fields(data),
            tuple(cleaned["addresses"]),
        )


def _on_brokers(cluster: Cluster, params: AclChange, request_method, *args) -> Outcome:
    """``request_method(admin, addr, *args)`` on the change's brokers; failed if any refused."""
    admin = cluster.admin
    # Slaves too: a slave enforces the ACL on the reads it serves (``acl_targets``).
    addrs = cluster.broker_targets(params, params.broker_addr, params.cluster, masters=False)
    outcomes = admin.each_broker(addrs, request_method, *args)
    detail = "; ".join(f"{o.addr}: {'failed: ' + o.error if o.error else 'ok'}" for o in outcomes)
    failed = any(o.error for o in outcomes)
    return Outcome(params.name, detail, params.fields, outcomes, failed=failed)


@command(SAVE)
def save_account(actor: Actor, cluster: Cluster, params: SaveAccount) -> Outcome:
    return _on_brokers(cluster, params, AsyncMQAdmin.create_or_update_acl_account, params.account)


@command(DELETE)
def delete_account(actor: Actor, cluster: Cluster, params: DeleteAccount) -> Outcome:
    return _on_brokers(cluster, params, AsyncMQAdmin.delete_acl_account, params.name)


@command(WHITE_LIST)
def update_white_list(actor: Actor, cluster: Cluster, params: UpdateWhiteList) -> Outcome:
    return _on_brokers(cluster, params, AsyncMQAdmin.update_global_white_addrs, list(params.addresses))
