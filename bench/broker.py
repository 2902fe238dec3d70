"""Broker benchmark: this project against RabbitMQ, NATS JetStream and Redis Streams.

    python bench/broker.py [--messages N]
                           [--only ours|ours-threads|async-master|sync-master|rabbitmq|nats|redis]
                           [--rounds N] [--warm-up N] [--sync-flush] [--broker-conf KEY=VALUE ...]
                           [--loop uvloop|asyncio] [--interleave-latency TURNS] [--json]

Same workloads for every system, over loopback with 1 KiB bodies: sync send (1 producer), async
send with 64 in flight, batches of 32, consume, end-to-end latency p50/p99 at a fixed 1,000
msgs/s, each timed after the peer has sent ``--warm-up`` messages (1,000) untimed. A peer that
is not reachable is reported as skipped, with the reason. "ours" is our SDK's asyncio API on the
benchmark's loop (as the peers' asyncio clients run); "ours-threads" is its blocking API driven
from threads. "async-master" and "sync-master" are "ours" with a slave following the broker
(ASYNC_MASTER, and SYNC_MASTER answering a send once the slave has it). Every peer's client runs on
the same loop (uvloop unless ``--loop asyncio``).

This machine's speed drifts by tens of percent from minute to minute, and one pass measures the
peers one after another. ``--rounds N`` runs N passes, each starting with the next peer in turn,
and reports each figure's median over the rounds (every round's figures are in ``--json``), so
a ratio compares peers measured side by side in time rather than whichever ran in a fast minute.
``--interleave-latency TURNS`` goes further for the latency run alone: every peer is set up at
once and they take turns, each ``--seconds / TURNS`` long, their samples pooled per peer.

Beside the sync-master column, a full run (no ``--only``) prints the failover time of a
SYNC_MASTER in controller mode (bench/ha_failover.py: the master SIGKILLed, time to the
controller's new master and to the first acknowledged send), over ``--failover-rounds`` kills
(5; 0 leaves it out).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.peers.base import WARM_UP_MESSAGES, measure, measure_latency_interleaved

OURS = ("ours", "ours-threads")
# "ours" as a master with a slave (bench/peers/ours_ha.py): ASYNC_MASTER and SYNC_MASTER.
WITH_SLAVE = ("async-master", "sync-master")
EXTERNAL = ("rabbitmq", "nats", "redis")
PEERS = (*OURS, *WITH_SLAVE, *EXTERNAL)
HIGHER_IS_BETTER = ("sync_send_msgs_s", "async_send_64_msgs_s", "batch_send_32_msgs_s", "consume_msgs_s")


def make_peer(name: str, args: argparse.Namespace):
    if name == "ours":
        from bench.peers.ours import Ours

        return Ours(_flush_type(args), args.dir, args.broker_conf)
    if name == "ours-threads":
        from bench.peers.ours import OursThreads

        return OursThreads(_flush_type(args), args.dir, args.broker_conf)
    if name in WITH_SLAVE:
        from bench.peers.ours_ha import OursWithSlave

        return OursWithSlave(name, _flush_type(args), args.dir, args.broker_conf)
    if name == "rabbitmq":
        from bench.peers.rabbitmq import RabbitMQ

        return RabbitMQ()
    if name == "nats":
        from bench.peers.nats_jetstream import NatsJetStream

        return NatsJetStream()
    from bench.peers.redis_streams import RedisStreams

    return RedisStreams()


def _flush_type(args: argparse.Namespace) -> str:
    return "SYNC_FLUSH" if args.sync_flush else "ASYNC_FLUSH"


def _conf_line(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value.strip()


async def run(args: argparse.Namespace) -> dict:
    results: dict = {
        "messages": args.messages,
        "body_bytes": 1024,
        "ours_flush": _flush_type(args),
        "ours_broker_conf": args.broker_conf,
        "warm_up_messages": args.warm_up,
    }
    names = [args.only] if args.only else list(PEERS)
    if args.interleave_latency:
        return results | await _run_interleaved(args, names)
    rounds: dict[str, list[dict]] = {name: [] for name in names}
    failures: dict[str, str] = {}
    for round_number in range(args.rounds):
        shift = round_number % len(names)  # each round starts with the next peer
        for name in names[shift:] + names[:shift]:
            if name in failures and not rounds[name]:
                continue  # down in the first round: not asked again
            try:
                figures = await asyncio.wait_for(
                    measure(make_peer(name, args), args.messages, args.seconds, args.warm_up), 600
                )
            except Exception as exc:  # a peer that is down is reported, not fatal
                failures[name] = f"{type(exc).__name__}: {exc}"
                continue
            rounds[name].append(figures)
    results["rounds"] = args.rounds
    for name in names:
        if rounds[name]:
            results[name] = median_figures(rounds[name])
            if args.rounds > 1:
                results[name]["rounds"] = rounds[name]
        else:
            results[name] = {"skipped": failures[name]}
    return results | _all_ratios(results)


async def _run_interleaved(args: argparse.Namespace, names: list[str]) -> dict:
    """``--interleave-latency``: the latency run only, every peer's turns interleaved in time."""
    peers = {name: make_peer(name, args) for name in names}
    figures, failures = await measure_latency_interleaved(
        peers, args.seconds, args.interleave_latency, args.warm_up
    )
    results = {"rounds": 1, "interleaved_latency_turns": args.interleave_latency}
    for name in names:
        results[name] = figures[name] if name in figures else {"skipped": failures[name]}
    return results | _all_ratios(results)


def _all_ratios(results: dict) -> dict:
    """Each of our columns against each peer's, where both have figures."""
    all_ratios = {}
    for mine in OURS:
        for peer in EXTERNAL:
            ratios = _ratios(results.get(mine, {}), results.get(peer, {}))
            if ratios:
                all_ratios[f"{mine.replace('-', '_')}_vs_{peer}"] = ratios
    return all_ratios


def median_figures(rounds: list[dict]) -> dict:
    """Each figure's median over the rounds a peer completed."""
    keys = [key for key in rounds[0] if isinstance(rounds[0][key], int | float)]
    medians = {key: statistics.median(r[key] for r in rounds) for key in keys}
    return medians | {"completed_rounds": len(rounds)}


def _ratios(ours: dict, theirs: dict) -> dict:
    if "skipped" in theirs or "skipped" in ours or not theirs or not ours:
        return {}
    ratios = {key: ours[key] / theirs[key] for key in HIGHER_IS_BETTER if theirs.get(key)}
    ratios["e2e_p99_ratio"] = (
        ours["e2e_p99_ms"] / theirs["e2e_p99_ms"] if theirs.get("e2e_p99_ms") else math.nan
    )
    return ratios


def failover_figures(rounds: int) -> dict:
    """bench/ha_failover.py's figures, or why there are none (reported, not fatal, as a peer)."""
    from bench.ha_failover import run as run_failover

    try:
        return run_failover(rounds)
    except Exception as exc:
        return {"skipped": f"{type(exc).__name__}: {exc}"}


def print_failover(figures: dict) -> None:
    from bench.ha_failover import describe

    if "skipped" in figures:
        print(f"sync-master failover: skipped ({figures['skipped']})")
    else:
        print(describe(figures))


def print_table(results: dict) -> None:
    names = [p for p in PEERS if p in results]
    keys = [*HIGHER_IS_BETTER, "e2e_p50_ms", "e2e_p99_ms"]
    if results["rounds"] > 1:
        print(f"median of {results['rounds']} rounds, peers interleaved")
    if "interleaved_latency_turns" in results:
        print(f"latency only, {results['interleaved_latency_turns']} turns per peer, peers interleaved")
        keys = keys[len(HIGHER_IS_BETTER) :]
    print(f"{'':24s}" + "".join(f"{n:>14s}" for n in names))
    for key in keys:
        cells = []
        for name in names:
            value = results[name].get(key)
            if not isinstance(value, float):
                cells.append(f"{'skipped':>14s}")
            else:  # rates to a message a second, latencies to 10 µs
                cells.append(f"{value:14,.2f}" if key.endswith("_ms") else f"{value:14,.0f}")
        print(f"{key:24s}" + "".join(cells))
    for name in names:
        if "skipped" in results[name]:
            print(f"{name}: skipped ({results[name]['skipped']})")
    for key, ratios in results.items():
        if key.startswith(("ours_vs_", "ours_threads_vs_")):
            print(key + ": " + ", ".join(f"{k}={v:.2f}" for k, v in ratios.items()))
    if "sync_master_failover" in results:
        print_failover(results["sync_master_failover"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the latency run")
    parser.add_argument(
        "--warm-up",
        type=int,
        default=WARM_UP_MESSAGES,
        help="messages each peer sends untimed before its figures are taken",
    )
    parser.add_argument("--only", choices=PEERS)
    parser.add_argument(
        "--rounds", type=int, default=1, help="passes over the peers, interleaved; figures are medians"
    )
    parser.add_argument("--sync-flush", action="store_true", help="run our broker with SYNC_FLUSH")
    parser.add_argument("--dir", default=None, help="where our broker keeps its store")
    parser.add_argument(
        "--broker-conf",
        nargs="*",
        type=_conf_line,
        default=[],
        metavar="KEY=VALUE",
        help="extra broker.conf settings for our broker (e.g. busyPollWindowMicros=0)",
    )
    parser.add_argument(
        "--interleave-latency",
        type=int,
        default=0,
        metavar="TURNS",
        help="measure end-to-end latency only, the peers taking TURNS turns each, interleaved in time",
    )
    parser.add_argument(
        "--failover-rounds",
        type=int,
        default=None,
        metavar="N",
        help="SYNC_MASTER failovers to time after the table (default 5 in a full run, 0 with --only)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="the event loop every peer's client runs on (one loop for all, so they compare alike)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.warm_up < 0:
        parser.error("--warm-up cannot be negative")
    if args.failover_rounds is not None and args.failover_rounds < 0:
        parser.error("--failover-rounds cannot be negative")
    if args.interleave_latency < 0:
        parser.error("--interleave-latency cannot be negative")
    if args.interleave_latency and args.rounds > 1:
        parser.error("--interleave-latency takes turns instead of rounds: give one or the other")
    args.broker_conf = dict(args.broker_conf)
    if args.loop == "uvloop":
        import uvloop

        results = uvloop.run(run(args))
    else:
        results = asyncio.run(run(args))
    results["loop"] = args.loop
    failover_rounds = args.failover_rounds if args.failover_rounds is not None else 0 if args.only else 5
    if failover_rounds > 0:
        results["sync_master_failover"] = failover_figures(failover_rounds)
    if args.json:
        print(json.dumps(results))
    else:
        print_table(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
