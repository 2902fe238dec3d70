"""clusterList: brokers of each cluster with version, TPS, data age and disk use; with ``-m``
(RocketMQ's moreStats) the messages each broker took in and gave out yesterday and today."""

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
_MORE_STATS_HEADERS = (
    "#Cluster Name",
    "#Broker Name",
    "#InTotalYest",
    "#OutTotalYest",
    "#InTotalToday",
    "#OutTotalToday",
)


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--clusterName", dest="cluster", help="only this cluster")
    parser.add_argument(
        "-m",
        "--moreStats",
        dest="more_stats",
        action="store_true",
        help="messages in and out yesterday and today instead of the runtime figures",
    )


def _run(admin: MQAdmin, args: argparse.Namespace) -> CommandOutput:
    rows = admin.cluster_list(args.cluster)
    table = _daily_table(rows) if args.more_stats else _runtime_table(rows)
    errors = [f"{r.addr}: {r.runtime_error}" for r in rows if r.runtime_error]
    text = "\n".join([table, *errors])
    return CommandOutput({"brokers": rows}, text)


def _daily_table(rows) -> str:
    return render_table(
        _MORE_STATS_HEADERS,
        [
            (
                r.cluster,
                r.broker_name,
                r.in_total_yesterday,
                r.out_total_yesterday,
                r.in_total_today,
                r.out_total_today,
            )
            for r in rows
        ],
    )


def _runtime_table(rows) -> str:
    return render_table(
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


COMMANDS = [Command("clusterList", "List clusters and their brokers with runtime figures.", _configure, _run)]
