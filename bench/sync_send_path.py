"""Instructions per synchronous send, in the producer's process and in the broker's.

    python bench/sync_send_path.py [--api asyncio|blocking] [--loop uvloop|asyncio]
        [--messages N] [--warm-up N] [--client-callgrind] [--broker-callgrind]
        [--busy-poll MICROS] [--strace] [--profile]

Starts a name server and a broker, sends ``--messages`` 1 KiB messages one per round trip with the
SDK (``await AsyncProducer.send`` on ``--loop``, or the blocking ``Producer.send``, whose network
work runs on the SDK's loop thread) after ``--warm-up`` sends, and prints how long they took. The
figures to compare two trees by are exact counts, steady where this machine's speed is not:
``--client-callgrind`` runs this process again under ``valgrind --tool=callgrind
--instr-atstart=no`` and ``--broker-callgrind`` starts the broker under it; counting is switched
on for the measured sends only, and the instructions per send of each process (all its threads)
are printed. ``--strace`` counts both processes' system calls during the sends (strace -c -f),
``--profile`` prints this process's cProfile of them.

Only the SDK's public API and a broker started by its command line: the same file measures an
older tree (``PYTHONPATH=/path/to/old/tree python bench/sync_send_path.py ...``). The broker's
busy polling (``busyPollWindowMicros``) is off unless ``--busy-poll`` sets it: its spinning
counts instructions that depend on timing, not on the request.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import glob
import os
import pstats
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or Path(__file__).resolve().parents[1])
sys.path.insert(0, str(ROOT))

from broker.client import AsyncProducer, Producer  # noqa: E402
from broker.common.message import Message  # noqa: E402

TOPIC = "SyncSendPath"
BODY = b"x" * 1024
_LISTENING = re.compile(r"listening on (\S+):(\d+)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(args: list[str], prefix: list[str]) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [*prefix, sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        match = _LISTENING.search(line)
        if match:
            # Read on, so a chatty process never blocks on a full pipe.
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return proc, f"127.0.0.1:{match.group(2)}"
    proc.kill()
    proc.wait()
    raise RuntimeError(f"{args} did not start")


def _stop(proc: subprocess.Popen, timeout: float) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _callgrind(pid: int, on: bool) -> None:
    subprocess.run(
        ["callgrind_control", "-i", "on" if on else "off", str(pid)], check=True, capture_output=True
    )


def _total(out_file: str) -> int:
    """The instructions a finished callgrind run counted (its ``totals:`` line)."""
    for line in Path(out_file).read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"no total in {out_file}")


def _under_callgrind() -> bool:
    return "vgpreload" in os.environ.get("LD_PRELOAD", "")


async def _asyncio_sends(namesrv: str, warm_up: int, count: int, around) -> None:
    producer = await AsyncProducer("sync-send-path", namesrv).start()
    for _ in range(warm_up):
        await producer.send(Message(TOPIC, BODY))
    with around():
        for _ in range(count):
            await producer.send(Message(TOPIC, BODY))
    await producer.shutdown()


def _blocking_sends(namesrv: str, warm_up: int, count: int, around) -> None:
    producer = Producer("sync-send-path", namesrv).start()
    for _ in range(warm_up):
        producer.send(Message(TOPIC, BODY))
    with around():
        for _ in range(count):
            producer.send(Message(TOPIC, BODY))
    producer.shutdown()


class _Counting:
    """Counts instructions of the measured sends: in this process and in the broker's (and with
    ``strace_dir`` each one's system calls, all threads)."""

    def __init__(self, broker_pid: int | None, strace_dir: Path | None = None, broker: int = 0) -> None:
        self.broker_pid = broker_pid
        self.seconds = 0.0
        self.strace_dir, self.broker = strace_dir, broker
        self.tracers: list[subprocess.Popen] = []
        self.profiler: cProfile.Profile | None = None

    def __call__(self):
        return self

    def __enter__(self):
        if self.broker_pid is not None:
            _callgrind(self.broker_pid, True)
        if _under_callgrind():
            _callgrind(os.getpid(), True)
        if self.strace_dir is not None:
            for name, pid in (("client", os.getpid()), ("broker", self.broker)):
                out = self.strace_dir / f"strace.{name}"
                self.tracers.append(subprocess.Popen(["strace", "-c", "-f", "-o", str(out), "-p", str(pid)]))
            time.sleep(1.0)  # attached
        self.started = time.perf_counter()
        if self.profiler is not None:
            self.profiler.enable()
        return self

    def __exit__(self, *exc) -> None:
        if self.profiler is not None:
            self.profiler.disable()
        self.seconds = time.perf_counter() - self.started
        for tracer in self.tracers:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(30)
        if _under_callgrind():
            _callgrind(os.getpid(), False)
        if self.broker_pid is not None:
            _callgrind(self.broker_pid, False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", choices=("asyncio", "blocking"), default="asyncio")
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--warm-up", type=int, default=300)
    parser.add_argument("--broker-callgrind", action="store_true", help="count the broker's instructions too")
    parser.add_argument("--busy-poll", type=int, default=0, help="the broker's busyPollWindowMicros")
    parser.add_argument(
        "--client-callgrind",
        action="store_true",
        help="run this process under callgrind, count its instructions",
    )
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="the asyncio API's loop (bench/broker.py's)",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile this process's measured sends")
    parser.add_argument(
        "--strace", action="store_true", help="count system calls of both processes (strace -c)"
    )
    args = parser.parse_args(argv)
    if args.client_callgrind and not _under_callgrind():
        return _rerun_under_callgrind(args, sys.argv[1:] if argv is None else argv)

    base = Path(tempfile.mkdtemp(prefix="sync-send-path-"))
    namesrv, namesrv_addr = _start(["-m", "broker.namesrv", "--listen-port", str(_free_port())], [])
    try:
        counting = _measure(args, base, namesrv_addr)
    finally:
        _stop(namesrv, 30)
    print(f"{args.api}: {args.messages} sends in {counting.seconds:.2f} s")
    if counting.profiler is not None:
        pstats.Stats(counting.profiler).sort_stats("tottime").print_stats(40)
    if args.broker_callgrind:
        (out,) = glob.glob(f"{base}/cg.broker.*")
        print(f"broker instructions per send: {_total(out) / args.messages:,.0f}")
    if args.strace:
        for name in ("client", "broker"):
            print(f"-- {name} system calls")
            print((base / f"strace.{name}").read_text())
    shutil.rmtree(base, ignore_errors=True)
    return 0


def _measure(args: argparse.Namespace, base: Path, namesrv_addr: str) -> _Counting:
    """A broker started, the sends made and counted, the broker stopped."""
    conf = base / "broker.conf"
    conf.write_text(
        f"brokerName=sync-send-path\nlistenPort={_free_port()}\nnamesrvAddr={namesrv_addr}\n"
        f"storePathRootDir={base / 'store'}\nbusyPollWindowMicros={args.busy_poll}\n"
        "autoCreateTopicEnable=true\n"
    )
    cg_prefix = []
    if args.broker_callgrind:
        cg_prefix = [
            "valgrind", "--tool=callgrind", "--instr-atstart=no",
            f"--callgrind-out-file={base}/cg.broker.%p",
        ]  # fmt: skip
    broker, _ = _start(["-m", "broker.server", "-c", str(conf)], cg_prefix)
    try:
        time.sleep(1.0)  # registration reaches the name server
        counting = _Counting(
            broker.pid if args.broker_callgrind else None, base if args.strace else None, broker.pid
        )
        if args.profile:
            counting.profiler = cProfile.Profile()
        if args.api == "asyncio":
            sends = _asyncio_sends(namesrv_addr, args.warm_up, args.messages, counting)
            if args.loop == "uvloop":
                import uvloop

                uvloop.run(sends)
            else:
                asyncio.run(sends)
        else:
            _blocking_sends(namesrv_addr, args.warm_up, args.messages, counting)
    finally:
        _stop(broker, 120)  # (under callgrind it writes its counts as it exits)
    return counting


def _rerun_under_callgrind(args: argparse.Namespace, argv: list[str]) -> int:
    """This file again, under callgrind; its count of the measured sends, per send."""
    out = tempfile.mktemp(prefix="cg.client.")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    done = subprocess.run([*cmd, sys.executable, __file__, *argv], capture_output=True, text=True)
    print(done.stdout, end="")
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
        return done.returncode
    print(f"client instructions per send: {_total(out) / args.messages:,.0f}")
    os.unlink(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
