"""Issue 22, acceptance 2, with real processes: a SYNC_MASTER (allAckInSyncStateSet) under keyed
producer load is SIGKILLed five times at random moments; each time the controller elects the
other replica, the producers carry on by themselves (retries off: a failed send is given up), and
the killed broker is restarted, rejoins as slave and is back in the in-sync set before the next
kill. Every acknowledged message is then on the final master exactly once, where it was
acknowledged (queue and offset), and the figures are printed. The failover bench's smoke test
is here too: it runs the same set."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import pytest

from broker.local_cluster import ROOT, wait_until
from broker.local_failover import ControllerModeSet, KeyedLoad, kill_and_wait, summary

KILLS = 5
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


# The controller standalone (python -m broker.controller) and embedded in the name server.
@pytest.mark.parametrize("embedded", [False, True], ids=["standalone-controller", "embedded-controller"])
def test_sync_master_killed_five_times_loses_and_duplicates_nothing(tmp_path, embedded):
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    replicas = ControllerModeSet(tmp_path / "set", embedded=embedded).start()
    load = KeyedLoad(replicas.namesrv_addr, threads=4)
    rounds = []
    try:
        load.start()
        wait_until(lambda: len(load.acks()) >= 100, timeout=60, what="the load's first acknowledged sends")
        for _ in range(KILLS):
            replicas.wait_in_sync()
            time.sleep(rng.uniform(0.2, 2.0))  # a random moment under load (the seed is printed)
            done = kill_and_wait(replicas, load)

            # Producers resume on their own: every thread has a send acknowledged after the kill.
            def acked_again(at: float = done.killed_at) -> bool:
                return load.every_thread_acked_after(at)

            wait_until(acked_again, timeout=60, what="every producer thread acknowledged again")
            rounds.append(done)
            replicas.restart(done.killed)  # rejoins as slave; wait_in_sync before the next kill
        final_master, info = replicas.wait_in_sync()
        # Load over the last rejoin too, then quiet.
        rejoined = time.monotonic()
        wait_until(lambda: load.first_ack_started_after(rejoined), timeout=30, what="a send after the rejoin")
        load.stop()
        replicas.wait_caught_up(final_master)
        stored = replicas.stored_keys(final_master)
        slave_stored = replicas.stored_keys(replicas.slave_of(final_master))
    except BaseException:
        load.stop()
        print(f"seed {seed}, {len(load.acks())} acked, failed sends {load.errors()}\n{replicas.logs()}")
        raise
    finally:
        replicas.stop()

    acks = load.acks()
    lost = [a.key for a in acks if a.key not in stored]
    duplicates = sorted(key for key, places in stored.items() if len(places) > 1)
    moved = [a.key for a in acks if a.key in stored and stored[a.key][0] != (a.queue_id, a.queue_offset)]
    acked_keys = {a.key for a in acks}
    unacked_stored = len(set(stored) - acked_keys)  # sends that failed after the write: allowed
    seconds = [r.first_ack_s for r in rounds]
    print(
        f"\nfailover loop (seed {seed}, {'embedded' if embedded else 'standalone'} controller): "
        f"{KILLS} master kills, final master {final_master} "
        f"at epoch {info.master_epoch}\n"
        f"  acked {len(acks)}, failed sends {load.failed}, answered not SEND_OK {dict(load.not_ok)}, "
        f"lost {len(lost)}, duplicates {len(duplicates)}, moved {len(moved)}, "
        f"stored without an ack {unacked_stored}\n"
        f"  kill -> new master elected: {', '.join(f'{r.elected_s:.2f}' for r in rounds)} s "
        f"({summary([r.elected_s for r in rounds])})\n"
        f"  kill -> first acknowledged send: {', '.join(f'{s:.2f}' for s in seconds)} s ({summary(seconds)})"
    )
    assert len(acked_keys) == len(acks)  # one send per key
    assert [r.epoch for r in rounds] == sorted({r.epoch for r in rounds}), rounds
    assert all(r.elected != r.killed for r in rounds), rounds
    assert lost == [], lost[:20]
    assert duplicates == [], duplicates[:20]
    assert moved == [], moved[:20]
    # The slave holds what its master holds, at the same places.
    assert slave_stored == stored


def test_failover_bench_reports_its_figures():
    """bench/ha_failover.py (make bench-broker's failover line) on one round: every figure there."""
    done = subprocess.run(
        [sys.executable, "bench/ha_failover.py", "--rounds", "1", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["rounds"] == 1 and len(figures["first_ack_s"]) == 1
    assert figures["elected_s_median"] > 0 and figures["first_ack_s_median"] > 0
    assert figures["acked"] > 0
