"""The check of one request against the plain ACL (RocketMQ's PlainPermissionManager.validate).

In order:

1. a peer matching a global white address passes, signed or not (RocketMQ's meaning of the
   global white list: trusted hosts);
2. the request must carry an ``AccessKey`` naming an account;
3. from an address matching the account's ``whiteRemoteAddress`` no signature is needed
   (RocketMQ's meaning); from anywhere else the ``Signature`` must match the content signed with
   the account's secret key (compared in constant time); a request carrying any of the project's
   fields (``AclRequestCode``, ``AclTimestamp``, ``AclNonce``, ``AclSignatureV2``), and every
   request with ``aclReplayProtection=true``, must also carry a matching ``AclSignatureV2`` (the
   classic content is ambiguous, see ``broker.common.acl_signature``); then the replay checks of
   ``replay`` (the signed request code always; timestamp and nonce with
   ``aclReplayProtection=true``), and with ``aclRequireTls=true`` no signed request is taken over
   plaintext: its nonce is recorded by these checks before it is refused, so the same frame
   cannot be sent again over TLS;
4. an admin-only request, and a pull of a topic the broker keeps for itself (half, op-half,
   schedule and timer topics), needs an admin account;
5. each topic and group the request names needs the permission: the account's own entry for it,
   else its default topic or group permission. An admin account without any entries may use
   every topic and group.

RocketMQ 4.9 lets a request from an account's white address skip steps 4 and 5 as well; here the
white address only spares the signature, so an account's permissions hold wherever it connects
from. A refusal says what was missing: never a secret, the expected signature or which part of a
signature was wrong. An unknown key and a missing or wrong signature get one remark (and the
same signing work), so a refusal does not tell whether an account exists.

A request naming a stored message by offset is checked once more by its handler, against the
topic the message belongs to (``check_stored_resources``, used by ``stored``).
"""

from __future__ import annotations

from broker.common.acl_rules import ANY, SUB, has_permission, permission_name
from broker.common.acl_signature import (
    ACCESS_KEY,
    OUR_FIELDS,
    SIGNATURE,
    SIGNATURE_V2,
    SigningKey,
    server_content,
    signature_matches,
    v2_content,
)
from broker.remoting.command import RemotingCommand

from .plain_config import Account, AclConfig
from .replay import NO_REPLAY_PROTECTION, REQUIRE_TLS_KEY, ReplayGuard
from .resources import (
    ADMIN_CODES,
    Needs,
    ResourceError,
    broker_only_resource,
    describe_resource,
    needed_resources,
)

_NO_ACCOUNT = SigningKey("no-such-account-secret")


class AclRefusal(Exception):
    """Why a request is refused (the text goes back to the client as the answer's remark)."""


def host_of(remote_addr: str) -> str:
    """The address part of a connection's ``host:port`` / ``[v6]:port``."""
    if remote_addr.startswith("["):
        return remote_addr[1 : remote_addr.find("]")]
    return remote_addr.rsplit(":", 1)[0] if remote_addr.count(":") == 1 else remote_addr


def check_request(
    config: AclConfig,
    request: RemotingCommand,
    host: str,
    *,
    admin_codes: frozenset[int] = ADMIN_CODES,
    open_codes: frozenset[int] = frozenset(),
    replay: ReplayGuard = NO_REPLAY_PROTECTION,
    secure: bool = False,
) -> None:
    """Raise ``AclRefusal`` when ``request`` from ``host`` may not run. ``open_codes``: requests
    answered to anyone, signed or not (the name server's route reads): checking the signature of
    what an unsigned client gets anyway would only refuse clients whose account the name server
    does not know. ``secure``: the request came over TLS."""
    if request.code in open_codes:
        return
    if replay.policy.require_tls and not secure and ACCESS_KEY in (request.ext_fields or {}):
        _burn(config, request, host, replay)
        raise AclRefusal(f"signed requests are taken over TLS only ({REQUIRE_TLS_KEY}=true): use TLS")
    if _globally_white(config, host):
        return
    account = _authenticated(config, request, host, replay)
    if request.code in admin_codes and not account.admin:
        raise AclRefusal(
            f"request code {request.code} needs an admin account; {account.access_key!r} is not one"
        )
    if account.admin and not account.resources:
        return
    try:
        needs = needed_resources(request)
    except ResourceError as exc:
        raise AclRefusal(str(exc)) from None
    broker_only = broker_only_resource(needs)
    if broker_only is not None and not account.admin:
        raise AclRefusal(
            f"{describe_resource(broker_only)[:140]} is the broker's own: only an admin account may use it"
        )
    _check_needs(account, needs)


def check_stored_resources(config: AclConfig, request: RemotingCommand, host: str, needs: Needs) -> None:
    """Step 5 for what only the handler knows: the topic of the stored message a request names
    by offset. The request already passed ``check_request``; raise ``AclRefusal`` as it does."""
    if _globally_white(config, host):
        return
    access_key = (request.ext_fields or {}).get(ACCESS_KEY) or ""
    account = config.accounts.get(access_key)
    if account is None:  # deleted by a reload since the request was let in
        raise AclRefusal(_unknown_or_unsigned(access_key))
    _check_needs(account, needs)


def _globally_white(config: AclConfig, host: str) -> bool:
    return any(pattern.matches(host) for pattern in config.global_white)


def _unknown_or_unsigned(access_key: str) -> str:
    # One remark for an unknown key, a missing and a wrong signature: which of them it was would
    # tell a stranger whether an account exists.
    return f"signature does not match for AccessKey {access_key[:64]!r}, or no such account"


def _burn(config: AclConfig, request: RemotingCommand, host: str, replay: ReplayGuard) -> None:
    """Run a plaintext signed request's checks for their one effect, recording its nonce: a
    sniffer must not be able to resend the refused frame over TLS. Their verdict is not told."""
    try:
        _authenticated(config, request, host, replay)
    except AclRefusal:
        pass


def _v2_problem(key: SigningKey, request: RemotingCommand, replay: ReplayGuard) -> str | None:
    fields = request.ext_fields or {}
    if not replay.policy.replay_protection and not any(name in fields for name in OUR_FIELDS):
        return None  # an Apache-style request, taken on its classic signature alone
    given = fields.get(SIGNATURE_V2)
    if not given:
        return (
            f"no {SIGNATURE_V2}: a request carrying the replay fields, or any request to this server "
            "when aclReplayProtection=true, needs the second signature the project's clients send"
        )
    expected = key.sign_v2(v2_content(fields, request.code, request.version, request.body))
    if not signature_matches(expected, given):
        return f"{SIGNATURE_V2} does not match: the request was altered after it was signed"
    return None


def _authenticated(config: AclConfig, request: RemotingCommand, host: str, replay: ReplayGuard) -> Account:
    fields = request.ext_fields or {}
    access_key = fields.get(ACCESS_KEY)
    if not access_key:
        raise AclRefusal(f"no AccessKey: request code {request.code} from {host} must be signed (ACL is on)")
    account = config.accounts.get(access_key)
    if account is not None and account.white.matches(host):
        return account
    given = fields.get(SIGNATURE)
    # Signed for an unknown key too, so the time taken does not tell whether the account exists.
    key = (account.signing_key or SigningKey(account.secret_key)) if account is not None else _NO_ACCOUNT
    expected = key.sign(server_content(fields, request.body, request.version))
    if account is None or not given or not signature_matches(expected, given):
        raise AclRefusal(_unknown_or_unsigned(access_key))
    # Only once the signature matched, so that no refusal tells a stranger more.
    problem = replay.problem(fields, request.code, access_key, lambda: _v2_problem(key, request, replay))
    if problem is not None:
        raise AclRefusal(problem)
    return account


def _check_needs(account: Account, needs: Needs) -> None:
    if account.admin and not account.resources:
        return  # an admin account without entries may use every topic and group
    for resource, perm in needs:
        owned = account.resources.get(resource)
        if owned is None:
            owned = account.default_group if resource.startswith("%RETRY%") else account.default_topic
        if not has_permission(perm, owned):
            wanted = {SUB: "SUB", ANY: "PUB or SUB"}.get(perm) or permission_name(perm)
            raise AclRefusal(
                f"account {account.access_key!r} has no {wanted} permission on {describe_resource(resource)}"
            )
