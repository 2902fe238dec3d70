"""clusterList: brokers of each cluster with version, TPS, data age and disk use."""

from __future__ import annotations

import argparse

from broker.cli_commands.base import Command
from broker.cli_commands.output import CommandOutput, render_table
from broker.client.admin import MQAdmin

_HEADERS = (
    "#Cluster Name",
    "#Broker Name",
    "#BID",
    "#Addr",
    "#Version",
    "#InTPS",
    "#OutTPS",
    "#PCWait(ms)",
    "#Hour",
    "#SPACE",
)


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--clusterName", dest="cluster", help="only this cluster")


def _run(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    rows = admin.cluster_list(args.cluster)
    table = render_table(
        _HEADERS,
        [
            (
                r.cluster,
                r.broker_name,
                r.broker_id,
                r.addr,
                r.version or "-",
                r.in_tps,
                r.out_tps,
                r.page_cache_lock_ms,
                r.hours_of_data,
                f"{r.disk_ratio:.4f}",
            )
            for r in rows
        ],
    )
    errors = [f"{r.addr}: {r.runtime_error}" for r in rows if r.runtime_error]
    text = "\n".join([table, *errors])
    return CommandOutput({"brokers": rows}, text)


COMMANDS = [Command("clusterList", "List clusters and their brokers with runtime figures.", _configure, _run)]
