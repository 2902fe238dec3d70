"""The brokers' plain ACL (admins only): each broker's accounts (secret keys masked), global white
list and ACL config version; create or update an account, delete one, replace the white list —
on one broker or every broker of a cluster, as ``mqadmin updateAclConfig -b/-c`` does.

Every change is audited once, with each broker's outcome; a secret key never reaches the audit log,
a flash message or a page. A broker running without ACL (its config says ``aclEnable=false``) is
said to have ACL off, not shown as an error; when every broker has it off the page says how to turn
it on and offers no form the brokers would refuse.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker.client.admin import AclConfig, AclVersion, AsyncMQAdmin, BrokerOutcome, MQAdmin, MQClientError
from broker.client.admin.acl import MASK
from console.commands import acl, serves
from console.forms import AclAccountForm
from console.views.common import ms_to_datetime, run
from core.cluster_access import admin_of
from core.roles import ADMIN, require_role


@dataclass
class BrokerAcl:
    """What the page shows of one broker."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    version: AclVersion | None = None
    config: AclConfig | None = None
    error: str | None = None
    acl_off: bool = False  # the broker runs with aclEnable=false

    @property
    def role(self) -> str:
        return "master" if self.broker_id == 0 else f"slave {self.broker_id}"

    @property
    def updated(self):
        return ms_to_datetime(self.version.timestamp) if self.version else None

    @property
    def accounts(self) -> list[dict[str, Any]]:
        return [account.masked() for account in self.config.accounts] if self.config else []


def _brokers(admin: MQAdmin) -> list[BrokerAcl]:
    info = admin.cluster_info()
    rows = [
        BrokerAcl(cluster, data.broker_name, broker_id, addr)
        for cluster in sorted(info.clusters)
        for data in sorted(info.brokers_of(cluster), key=lambda b: b.broker_name)
        for broker_id, addr in sorted(data.broker_addrs.items())
    ]
    addrs = [row.addr for row in rows]

    async def ask_all() -> tuple[list[BrokerOutcome], list[BrokerOutcome], list[BrokerOutcome]]:
        # Every question to every broker at once: a broker that does not answer costs one timeout.
        return await asyncio.gather(
            admin.core.each_broker(addrs, AsyncMQAdmin.acl_version),
            admin.core.each_broker(addrs, AsyncMQAdmin.acl_config),
            admin.core.each_broker(addrs, AsyncMQAdmin.broker_config),
        )

    versions, configs, settings = admin.run(ask_all())
    for row, version, config, setting in zip(rows, versions, configs, settings, strict=True):
        row.version, row.config = version.result, config.result
        row.acl_off = config.result is None and _acl_disabled(setting.result)
        # The config's refusal says most; one of the two. ACL off is no error: the broker was set so.
        row.error = None if row.acl_off else (config.error or version.error)
    return rows


def _acl_disabled(broker_config: dict[str, str] | None) -> bool:
    """The broker's own config says it runs without ACL (RocketMQ's default is off)."""
    return broker_config is not None and broker_config.get("aclEnable", "false").strip().lower() != "true"


def _editing(request, brokers: list[BrokerAcl]) -> dict[str, Any]:
    """Initial values of the account form: the account ``?edit=<accessKey>`` of ``?broker=<addr>``
    (its secret key never leaves the broker: an update leaves the field empty to keep it)."""
    access_key, addr = request.GET.get("edit", ""), request.GET.get("broker", "")
    for row in brokers:
        if row.addr != addr or row.config is None:
            continue
        for account in row.config.accounts:
            if account.access_key == access_key:
                return {
                    "access_key": account.access_key,
                    "white_remote_address": account.white_remote_address,
                    "admin": account.admin,
                    "default_topic_perm": account.default_topic_perm,
                    "default_group_perm": account.default_group_perm,
                    "topic_perms": "\n".join(
                        account.topic_perms or ()
                    ),  # None: only an update's "leave as is"
                    "group_perms": "\n".join(account.group_perms or ()),
                    "broker_addr": row.addr,
                }
    return {}


@require_GET
@require_role(ADMIN)
def acl_page(request):
    admin = admin_of(request)
    brokers = _brokers(admin)
    editing = _editing(request, brokers)
    white_list_of = next((b for b in brokers if b.config is not None), None)
    context = {
        "brokers": brokers,
        # Forms only where a broker could take them: with ACL off everywhere each would be refused.
        "acl_on": not brokers or not all(b.acl_off for b in brokers),
        "clusters": sorted({b.cluster for b in brokers}),
        "editing": editing,
        "account_form": AclAccountForm(initial=editing),
        "white_list": "\n".join(white_list_of.config.global_white_addrs)
        if white_list_of and white_list_of.config
        else "",
        "white_list_source": white_list_of.addr if white_list_of else "",
        "mask": MASK,
    }
    template = (
        "console/_acl_brokers.html" if request.htmx and not request.htmx.boosted else "console/acl.html"
    )
    return render(request, template, context)


# -- changes --------------------------------------------------------------------------------------


def _apply(request, action: str, params) -> None:
    """Run the ACL command; flash which brokers changed and which did not."""
    try:
        outcome = run(request, action, params)
    except MQClientError as exc:
        messages.error(request, f"{action} {params.target} failed: {exc}")
        return
    done = [o.addr for o in outcome.value if not o.error]
    if done:
        messages.success(request, f"{action} {outcome.target}: done on {', '.join(done)}")
    for failed in (o for o in outcome.value if o.error):
        messages.error(request, f"{action} {outcome.target} failed on {failed.addr}: {failed.error}")


@require_POST
@serves(acl.SAVE)
def acl_account_save(request):
    _apply(request, acl.SAVE, acl.SaveAccount.parse(request.POST))
    return redirect("console:acl")


@require_POST
@serves(acl.DELETE)
def acl_account_delete(request):
    _apply(request, acl.DELETE, acl.DeleteAccount.parse(request.POST))
    return redirect("console:acl")


@require_POST
@serves(acl.WHITE_LIST)
def acl_white_list_update(request):
    _apply(request, acl.WHITE_LIST, acl.UpdateWhiteList.parse(request.POST))
    return redirect("console:acl")
