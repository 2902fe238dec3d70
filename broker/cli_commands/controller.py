"""Controller-mode subcommands, RocketMQ 5's names, flags and labels: getControllerMetaData,
getSyncStateSet, electMaster, getBrokerEpoch, getControllerConfig and updateControllerConfig
(live settings only, each controller given in ``-a``, kept until it restarts).

The controller address ``-a`` may list several controllers (``host:port;host:port``): requests
that only the leader answers follow CONTROLLER_NOT_LEADER to it. Requests are signed with the
command's ACL account (``--access-key``): ``electMaster`` needs an admin account where the
controller checks ACL (broker/controller/access.py). RocketMQ's ``-i`` (repeat every N seconds)
is left out: run the command under ``watch``.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TypeVar

from broker.cli_commands.base import Command, UsageError
from broker.cli_commands.output import CommandOutput, format_value
from broker.client.admin import MQAdmin, MQClientError
from broker.client.admin.controller import (
    ControllerAdmin,
    broker_addrs_for_epochs,
    broker_epochs,
    controller_addresses,
)
from broker.common.epoch_entries import EpochEntry, EpochEntryCache
from broker.controller.replicas_info import BrokerReplicas, ReplicaIdentity

T = TypeVar("T")


def _add_controller(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-a",
        "--controllerAddress",
        dest="controller",
        required=True,
        help="controller address(es), host:port;host:port (a name server's, when it embeds one)",
    )


def _on_controller(
    admin: MQAdmin, args: argparse.Namespace, ask: Callable[[ControllerAdmin], Awaitable[T]]
) -> T:
    async def run() -> T:
        controller = ControllerAdmin(admin.core, args.controller)
        try:
            return await ask(controller)
        finally:
            await controller.close()

    return admin.run(run())


# ---- getControllerMetaData ----


def _run_metadata(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    meta = _on_controller(admin, args, lambda c: c.metadata())
    lines = [
        f"#ControllerGroup\t{format_value(meta.group or None)}",
        f"#ControllerLeaderId\t{format_value(meta.leader_id)}",
        f"#ControllerLeaderAddress\t{format_value(meta.leader_address)}",
        *(f"#Peer:\t{peer_id}-{address}" for peer_id, address in meta.peers.items()),
    ]
    return CommandOutput(meta, "\n".join(lines))


# ---- getSyncStateSet ----


def _configure_sync_state_set(parser: argparse.ArgumentParser) -> None:
    _add_controller(parser)
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "-b", "--brokerName", dest="broker_name", help="broker set(s), name;name (default: every set)"
    )
    target.add_argument(
        "-c", "--clusterName", dest="cluster", help="every broker set of this cluster (needs -n)"
    )


def _identity(broker_name: str, replica: ReplicaIdentity) -> str:
    """RocketMQ's ReplicaIdentity.toString()."""
    alive = "true" if replica.alive else "false"
    return (
        f"ReplicaIdentity{{brokerName='{broker_name}', brokerId={replica.broker_id}, "
        f"brokerAddress='{replica.broker_address}', alive={alive}}}"
    )


def _replicas_block(name: str, replicas: BrokerReplicas) -> str:
    lines = [
        f"#brokerName\t{name}",
        f"#MasterBrokerId\t{format_value(replicas.master_id)}",
        f"#MasterAddr\t{format_value(replicas.master_address or None)}",
        f"#MasterEpoch\t{replicas.master_epoch}",
        f"#SyncStateSetEpoch\t{replicas.sync_state_set_epoch}",
        f"#SyncStateSetNums\t{len(replicas.in_sync)}",
        *(f"InSyncReplica:\t{_identity(name, r)}" for r in replicas.in_sync),
        *(f"NotInSyncReplica:\t{_identity(name, r)}" for r in replicas.not_in_sync),
    ]
    return "\n".join(lines)


def _run_sync_state_set(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    names = [n.strip() for n in args.broker_name.split(";") if n.strip()] if args.broker_name else None
    if args.broker_name is not None and not names:
        raise UsageError("-b needs a broker name")
    table = _on_controller(admin, args, lambda c: c.sync_state_sets(names, args.cluster))
    text = "\n\n".join(_replicas_block(name, replicas) for name, replicas in table.items())
    return CommandOutput(table, text or "the controller knows no broker set")


# ---- electMaster ----


def _configure_elect(parser: argparse.ArgumentParser) -> None:
    _add_controller(parser)
    parser.add_argument("-c", "--clusterName", dest="cluster", required=True, help="the broker set's cluster")
    parser.add_argument(
        "-bn", "--brokerName", dest="broker_name", required=True, help="the broker set to switch over"
    )
    parser.add_argument(
        "-b",
        "--brokerId",
        dest="broker_id",
        type=int,
        required=True,
        help="the id of the broker to make master",
    )


def _run_elect(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    if args.broker_id < 0:
        raise UsageError("-b (brokerId) must be 0 or more")
    result = _on_controller(
        admin, args, lambda c: c.elect_master(args.broker_name, args.broker_id, args.cluster)
    )
    lines = [
        f"#ClusterName\t{args.cluster}",
        f"#BrokerName\t{args.broker_name}",
        f"#BrokerMasterAddr\t{format_value(result.master_address or None)}",
        f"#MasterEpoch\t{result.master_epoch}",
        f"#SyncStateSetEpoch\t{result.sync_state_set_epoch}",
        *(f"\t#Broker\t{bid}\t{addr}" for bid, addr in result.broker_addrs.items()),
    ]
    data = {"clusterName": args.cluster, "brokerName": args.broker_name, "result": result}
    return CommandOutput(data, "\n".join(lines))


# ---- getControllerConfig / updateControllerConfig ----


def _run_get_config(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    configs = _on_controller(admin, args, lambda c: c.configs())
    blocks = [
        f"============{address}============\n"
        + "\n".join(f"{key:<50}=  {value}" for key, value in values.items())
        for address, values in configs.items()
    ]
    return CommandOutput(configs, "\n".join(blocks))


def _configure_update_config(parser: argparse.ArgumentParser) -> None:
    _add_controller(parser)
    parser.add_argument("-k", "--key", required=True, help="config key")
    parser.add_argument("-v", "--value", required=True, help="config value")


def _run_update_config(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    key, value = args.key.strip(), args.value.strip()
    if not key or any(c in key for c in "=:\n") or "\n" in value:
        raise UsageError("-k must be one key name and -v one line")
    addresses = controller_addresses(args.controller)
    _on_controller(admin, args, lambda c: c.update_config(key, value))
    data = {"controllers": addresses, "key": key, "value": value}
    servers = "[" + ", ".join(addresses) + "]"  # as RocketMQ prints the list
    return CommandOutput(data, f"update controller config success!{servers}\n{key} : {value}")


# ---- getBrokerEpoch ----


def _configure_epoch(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "-b",
        "--brokerName",
        dest="broker_name",
        help="a broker set's name (its master and slaves, found with -n), or one broker's host:port",
    )
    target.add_argument("-c", "--clusterName", dest="cluster", help="every broker of this cluster (needs -n)")


def _entry(entry: EpochEntry) -> str:
    return (
        f"EpochEntry{{epoch={entry.epoch}, startOffset={entry.start_offset}, endOffset={entry.end_offset}}}"
    )


def _epoch_block(addr: str, cache: EpochEntryCache) -> str:
    lines = [
        f"#clusterName\t{cache.cluster_name}",
        f"#brokerName\t{cache.broker_name}",
        f"#brokerAddr\t{addr}",
        f"#brokerId\t{cache.broker_id}",
    ]
    entries = list(cache.epoch_list)
    for i, entry in enumerate(entries):
        if i == len(entries) - 1:  # the open newest epoch ends, for now, at the broker's max offset
            entry = EpochEntry(entry.epoch, entry.start_offset, cache.max_offset)
        lines.append(f"#Epoch: {_entry(entry)}")
    return "\n".join(lines)


def _run_epoch(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    if not args.broker_name and not args.cluster:
        raise UsageError("one of -b (brokerName or broker address) or -c (cluster name) is required")

    async def ask():
        addrs = await broker_addrs_for_epochs(admin.core, args.broker_name, args.cluster)
        return await broker_epochs(admin.core, addrs)

    results = admin.run(ask())
    failed = [r for r in results if r.cache is None]
    if failed and len(failed) == len(results):
        raise MQClientError("; ".join(r.error or r.addr for r in failed))
    blocks = [
        _epoch_block(r.addr, r.cache) if r.cache is not None else f"#brokerAddr\t{r.addr}\n#Error\t{r.error}"
        for r in results
    ]
    return CommandOutput({"brokers": results}, "\n\n".join(blocks))


COMMANDS = [
    Command(
        "getControllerMetaData",
        "Get controller cluster's metadata.",
        _add_controller,
        _run_metadata,
    ),
    Command(
        "getSyncStateSet",
        "Fetch syncStateSet for target brokers.",
        _configure_sync_state_set,
        _run_sync_state_set,
    ),
    Command("electMaster", "Re-elect the specified broker as master.", _configure_elect, _run_elect),
    Command("getBrokerEpoch", "Fetch broker epoch entries.", _configure_epoch, _run_epoch),
    Command("getControllerConfig", "Get controller config.", _add_controller, _run_get_config),
    Command(
        "updateControllerConfig", "Update controller config.", _configure_update_config, _run_update_config
    ),
]
