"""Plain-ACL subcommands, RocketMQ's names and flags: updateAclConfig, deleteAclConfig,
updateGlobalWhiteAddr, getAclConfig (alias getAccessConfigSubCommand), clusterAclConfigVersion.

``-b`` asks one broker; ``-c`` every broker of the cluster, slaves included (each broker keeps its
own ``plain_acl.yml``, and a slave enforces it on the reads it serves). A change is reported per
broker; when some brokers refused it, the command says which changed and which did not, and fails.

Secret keys are never printed: getAclConfig masks them (the broker's file holds them), and
updateAclConfig echoes the account without its secret, where RocketMQ's tool prints it.
"""

from __future__ import annotations

import argparse

from broker.cli_commands.base import Command, UsageError, parse_bool, require_target
from broker.cli_commands.output import CommandOutput, format_millis, render_table
from broker.client.admin import (
    AclConfig,
    AclVersion,
    AsyncMQAdmin,
    BrokerOutcome,
    MQAdmin,
    MQClientError,
    PlainAccessConfig,
)
from broker.client.admin.acl import AclInputError, parse_addr_list, parse_resource_perms


def _add_acl_target(parser: argparse.ArgumentParser, what: str) -> None:
    """``-b`` or ``-c`` as ``add_target``, but ``-c`` means every broker, slaves included."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-b", "--brokerAddr", dest="broker_addr", help=f"{what} on this broker (host:port)")
    group.add_argument(
        "-c",
        "--clusterName",
        dest="cluster",
        help=f"{what} on every broker (masters and slaves) of this cluster",
    )


def _targets(admin: MQAdmin, args: argparse.Namespace) -> list[str]:
    require_target(args)
    return admin.acl_targets(args.broker_addr, args.cluster)


def _changed(outcomes: list[BrokerOutcome], done: str) -> list[str]:
    """One line per broker that succeeded; a failure of any raises, naming each broker's result
    (the ones before it have changed: an operator must know which)."""
    failed = [o for o in outcomes if o.error]
    if failed:
        lines = [
            f"FAILED on {o.addr}: {o.error}" if o.error else f"{done} {o.addr} success." for o in outcomes
        ]
        raise MQClientError("\n".join(lines))
    return [f"{done} {o.addr} success." for o in outcomes]


def _checked(call):
    """Input the admin client refuses before sending is a usage error (exit 2), not a failure."""
    try:
        return call()
    except AclInputError as exc:
        raise UsageError(str(exc)) from None


# -- updateAclConfig ---------------------------------------------------------------------------


def _configure_update(parser: argparse.ArgumentParser) -> None:
    _add_acl_target(parser, "update the account")
    parser.add_argument(
        "-a", "--accessKey", dest="access_key", required=True, help="the account's access key"
    )
    parser.add_argument(
        "-s", "--secretKey", dest="secret_key", required=True, help="the account's secret key"
    )
    parser.add_argument(
        "-w", "--whiteRemoteAddress", dest="white_remote_address", help="addresses the account may come from"
    )
    parser.add_argument(
        "-i", "--defaultTopicPerm", dest="default_topic_perm", help="DENY, PUB, SUB or PUB|SUB"
    )
    parser.add_argument(
        "-u", "--defaultGroupPerm", dest="default_group_perm", help="DENY, PUB, SUB or PUB|SUB"
    )
    parser.add_argument("-t", "--topicPerms", dest="topic_perms", help="e.g. topicA=DENY,topicD=SUB")
    parser.add_argument("-g", "--groupPerms", dest="group_perms", help="e.g. groupA=DENY,groupD=SUB")
    parser.add_argument(
        "-m", "--admin", dest="admin", type=parse_bool, default=False, help="admin account (true/false)"
    )


def _account_of(args: argparse.Namespace) -> PlainAccessConfig:
    return PlainAccessConfig(
        access_key=args.access_key,
        secret_key=args.secret_key,
        white_remote_address=args.white_remote_address,
        admin=args.admin,
        default_topic_perm=args.default_topic_perm,
        default_group_perm=args.default_group_perm,
        topic_perms=None
        if args.topic_perms is None
        else parse_resource_perms(args.topic_perms, "topicPerms"),
        group_perms=None
        if args.group_perms is None
        else parse_resource_perms(args.group_perms, "groupPerms"),
    )


def _run_update(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    account = _checked(lambda: _account_of(args))
    addrs = _targets(admin, args)
    outcomes = _checked(lambda: admin.each_broker(addrs, AsyncMQAdmin.create_or_update_acl_account, account))
    lines = _changed(outcomes, "create or update plain access config to")
    shown = account.masked()
    lines.append(" ".join(f"{key}={value}" for key, value in shown.items()))
    return CommandOutput({"brokers": addrs, "account": shown}, "\n".join(lines))


# -- deleteAclConfig ---------------------------------------------------------------------------


def _configure_delete(parser: argparse.ArgumentParser) -> None:
    _add_acl_target(parser, "delete the account")
    parser.add_argument(
        "-a", "--accessKey", dest="access_key", required=True, help="the account's access key"
    )


def _run_delete(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    addrs = _targets(admin, args)
    outcomes = _checked(lambda: admin.each_broker(addrs, AsyncMQAdmin.delete_acl_account, args.access_key))
    lines = _changed(outcomes, "delete plain access config account to")
    lines.append(f"account's accesskey is:{args.access_key}")
    return CommandOutput({"brokers": addrs, "accessKey": args.access_key}, "\n".join(lines))


# -- updateGlobalWhiteAddr ---------------------------------------------------------------------


def _configure_white(parser: argparse.ArgumentParser) -> None:
    _add_acl_target(parser, "update the global white list")
    parser.add_argument(
        "-g",
        "--globalWhiteRemoteAddresses",
        dest="addresses",
        required=True,
        help='the whole list, e.g. 10.10.103.*,192.168.0.* ("" for none)',
    )


def _run_white(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    addresses = _checked(lambda: parse_addr_list(args.addresses))
    addrs = _targets(admin, args)
    outcomes = _checked(lambda: admin.each_broker(addrs, AsyncMQAdmin.update_global_white_addrs, addresses))
    lines = _changed(outcomes, "update global white remote addresses to")
    return CommandOutput({"brokers": addrs, "globalWhiteAddrs": addresses}, "\n".join(lines))


# -- getAclConfig ------------------------------------------------------------------------------


def _configure_get(parser: argparse.ArgumentParser) -> None:
    _add_acl_target(parser, "read the ACL config")


def _config_block(addr: str, config: AclConfig) -> str:
    lines = [f"============{addr}============"]
    lines.append(f"{'globalWhiteRemoteAddresses':<20}: [{', '.join(config.global_white_addrs)}]")
    lines.append("")
    lines.append("accounts:")
    for account in config.accounts:
        for key, value in account.masked().items():
            text = (
                f"[{', '.join(value)}]"
                if isinstance(value, list)
                else str(value).lower()
                if isinstance(value, bool)
                else value
            )
            lines.append(f"  {key:<18}: {text}")
        lines.append("")
    return "\n".join(lines).rstrip()


def _run_get(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    addrs = _targets(admin, args)
    outcomes = admin.each_broker(addrs, AsyncMQAdmin.acl_config)
    blocks, data = [], {}
    for outcome in outcomes:
        if outcome.error:
            blocks.append(f"============{outcome.addr}============\nFAILED: {outcome.error}")
            data[outcome.addr] = {"error": outcome.error}
            continue
        config: AclConfig = outcome.result
        blocks.append(_config_block(outcome.addr, config))
        data[outcome.addr] = {
            "globalWhiteAddrs": config.global_white_addrs,
            "accounts": [account.masked() for account in config.accounts],
        }
    _fail_if_all_failed(outcomes, "\n\n".join(blocks))
    return CommandOutput({"brokers": data}, "\n\n".join(blocks))


def _fail_if_all_failed(outcomes: list[BrokerOutcome], text: str) -> None:
    """A listing shows what it could read; with nothing readable at all the command fails."""
    if outcomes and all(o.error for o in outcomes):
        raise MQClientError(text)


# -- clusterAclConfigVersion -------------------------------------------------------------------


def _configure_version(parser: argparse.ArgumentParser) -> None:
    _add_acl_target(parser, "read the ACL config version")


def _run_version(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    addrs = _targets(admin, args)
    outcomes = admin.each_broker(addrs, AsyncMQAdmin.acl_version)
    rows, data = [], []
    for outcome in outcomes:
        if outcome.error:
            rows.append(["-", "-", outcome.addr, "-", f"FAILED: {outcome.error}"])
            data.append({"brokerAddr": outcome.addr, "error": outcome.error})
            continue
        version: AclVersion = outcome.result
        when = format_millis(version.timestamp).split(",")[0]
        rows.append([version.cluster_name, version.broker_name, version.broker_addr, version.counter, when])
        data.append(
            {
                "clusterName": version.cluster_name,
                "brokerName": version.broker_name,
                "brokerAddr": version.broker_addr,
                "aclConfigVersionNum": version.counter,
                "aclLastUpdateTime": version.timestamp,
            }
        )
    headers = ["#Cluster Name", "#Broker Name", "#Broker Addr", "#AclConfigVersionNum", "#AclLastUpdateTime"]
    text = render_table(headers, rows)
    _fail_if_all_failed(outcomes, text)
    return CommandOutput({"brokers": data}, text)


COMMANDS = [
    Command(
        "updateAclConfig",
        "Create or update an ACL account in the brokers' plain_acl.yml.",
        _configure_update,
        _run_update,
    ),
    Command(
        "deleteAclConfig",
        "Delete an ACL account from the brokers' plain_acl.yml.",
        _configure_delete,
        _run_delete,
    ),
    Command(
        "updateGlobalWhiteAddr",
        "Replace the global white address list of the brokers' ACL.",
        _configure_white,
        _run_white,
    ),
    Command(
        "getAclConfig",
        "Show the brokers' ACL accounts (secret keys masked) and white list.",
        _configure_get,
        _run_get,
    ),
    Command(
        "getAccessConfigSubCommand", "Same as getAclConfig (RocketMQ's alias).", _configure_get, _run_get
    ),
    Command(
        "clusterAclConfigVersion",
        "Show the version of the ACL config of a broker or of every broker of a cluster.",
        _configure_version,
        _run_version,
    ),
]
