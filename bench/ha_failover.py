"""Failover time of a SYNC_MASTER in RocketMQ 5's controller mode, with real processes on loopback.

    python bench/ha_failover.py [--rounds N] [--threads N] [--json]

One controller, a name server and two brokers of one broker set (broker/local_failover.py),
producer threads sending keyed messages (retries off). Each round SIGKILLs
the master and times two moments from the kill: the controller naming the new master (polled
every 20 ms) and the first acknowledged send begun after the kill (what an application sees).
The killed broker is restarted and back in the in-sync set before the next round.

Both are dominated by how long the controller waits before calling a silent master dead:
controllerHeartBeatTimeoutMills, here 1.5 s (RocketMQ's default is 10 s), then its scan
(scanNotActiveBrokerInterval, 100 ms here), the new master taking the role and registering, and
the producer's route poll (200 ms here). A benchmark, not a test: figures vary with the load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.local_cluster import wait_until
from broker.local_failover import BROKER_SETTINGS, ControllerModeSet, KeyedLoad, kill_and_wait


def measure(workdir: Path, rounds: int, threads: int = 2) -> dict:
    """Figures of ``rounds`` failovers: each round's seconds, their medians and maxima."""
    replicas = ControllerModeSet(workdir).start()
    load = KeyedLoad(replicas.namesrv_addr, threads=threads)
    done = []
    try:
        load.start()
        wait_until(lambda: load.acks(), timeout=60, what="a first acknowledged send")
        for _ in range(rounds):
            replicas.wait_in_sync()
            time.sleep(0.5)  # the load flowing through the set as it is now
            one = kill_and_wait(replicas, load)
            done.append(one)
            replicas.restart(one.killed)
        replicas.wait_in_sync()
    finally:
        load.stop()
        replicas.stop()
    elected = [r.elected_s for r in done]
    first_ack = [r.first_ack_s for r in done]
    return {
        "rounds": rounds,
        "controller_heartbeat_timeout_ms": BROKER_SETTINGS["controllerHeartBeatTimeoutMills"],
        "elected_s": elected,
        "first_ack_s": first_ack,
        "elected_s_median": statistics.median(elected),
        "elected_s_max": max(elected),
        "first_ack_s_median": statistics.median(first_ack),
        "first_ack_s_max": max(first_ack),
        "acked": len(load.acks()),
        "failed_sends": load.failed,
    }


def describe(figures: dict) -> str:
    return (
        f"SYNC_MASTER failover, controller mode, {figures['rounds']} kills "
        f"(controllerHeartBeatTimeoutMills {figures['controller_heartbeat_timeout_ms']}):\n"
        f"  kill -> new master elected    median {figures['elected_s_median']:.2f} s, "
        f"max {figures['elected_s_max']:.2f} s\n"
        f"  kill -> first acked send      median {figures['first_ack_s_median']:.2f} s, "
        f"max {figures['first_ack_s_max']:.2f} s\n"
        f"  ({figures['acked']} sends acknowledged, {figures['failed_sends']} failed, none retried)"
    )


def run(rounds: int, threads: int = 2) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        return measure(Path(tmp), rounds, threads)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="producer threads")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.threads < 1:
        parser.error("--rounds and --threads must be at least 1")
    figures = run(args.rounds, args.threads)
    print(json.dumps(figures) if args.json else describe(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
