"""The brokers' plain ACL (admins only): each broker's accounts (secret keys masked), global white
list and ACL config version; create or update an account, delete one, replace the white list —
on one broker or every broker of a cluster, as ``mqadmin updateAclConfig -b/-c`` does.

Every change is audited once, with each broker's outcome; a secret key never reaches the audit log,
a flash message or a page. A broker running without ACL (its config says ``aclEnable=false``) is
said to have ACL off, not shown as an error; when every broker has it off the page says how to turn
it on and offers no form the brokers would refuse.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker.common.errors import MQClientError
from console.commands import acl, serves
from console.forms import AclAccountForm
from console.queries import acl as queries
from console.views.common import cluster_of, run
from core.roles import ADMIN, require_role


def _editing(request, brokers: list[queries.BrokerAcl]) -> dict[str, Any]:
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
    brokers = queries.brokers(cluster_of(request))
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
        "mask": acl.MASK,
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
