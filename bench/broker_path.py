"""The broker's request path in one process, without sockets: CPU per send and per pull.

    python bench/broker_path.py [--messages N] [--profile]

A real ``BrokerController`` (store, dispatch, processors) serves a ``RemotingConnection``
whose transport only collects what would be written. Frames are the ones the SDK puts on the
wire (SEND_MESSAGE with full header names) and the ones RocketMQ's Java client sends
(SEND_MESSAGE_V2, one-letter names). "one per turn" feeds one frame and lets the loop run until
the response is written (a sync producer); "pipelined" feeds 64 frames at once (async senders).
"send to held pull" is everything a message costs when a consumer waits for it (its pull, the
send, both answers); "send to pull answer" only the part between reading the send and writing the
consumer's answer: the broker's share of end-to-end latency. The figures are process CPU
microseconds per message: steady on a busy machine, unlike rates.

    python bench/broker_path.py --instructions [--messages N]

counts instructions instead (callgrind: this file again under valgrind, one process per path,
counting the measured round only, less what an idle broker's clock-driven work costs over as
many seconds: see ``net_instructions``) and prints them next to the trees recorded in
broker_path_baseline.json (933369f's, then the newest), flagging (and exiting 1 on) any path
costing more than the file's tolerance above the newest record.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import json
import os
import pstats
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.common.codes import RequestCode
from broker.common.message_codec import properties_to_string
from broker.common.pull_sysflag import build_pull_sys_flag
from broker.common.request_headers import (
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from broker.remoting.command import create_request
from broker.remoting.frame import encode_frame
from broker.server.config import BrokerConfig
from broker.server.controller import BrokerController

TOPIC = "PathBench"
GROUP = "PathBenchGroup"
BODY = b"x" * 1024
LENGTH = struct.Struct(">i")
BASELINE = Path(__file__).with_name("broker_path_baseline.json")
PATHS = (
    "send_one_per_turn_us",
    "send_pipelined_us",
    "send_v2_pipelined_us",
    "send_to_held_pull_us",
    "send_to_pull_answer_us",
)


class CollectingTransport(asyncio.Transport):
    """Stands in for a socket: counts what the broker writes, and when it first wrote."""

    def __init__(self) -> None:
        super().__init__()
        self.frames = 0
        self.closing = False
        self.first_write_cpu: float | None = None  # process time; reset by whoever reads it

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.first_write_cpu is None:
            self.first_write_cpu = time.process_time()
        pos = 0
        while pos < len(data):  # one write may carry several frames
            pos += 4 + LENGTH.unpack_from(data, pos)[0]
            self.frames += 1

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default=None):
        return ("127.0.0.1", 40000) if name == "peername" else default

    def close(self) -> None:
        self.closing = True


def send_frames(count: int, v2: bool, queue_id: int | None = None) -> list[bytes]:
    frames = []
    for i in range(count):
        header = SendMessageRequestHeader(
            producer_group="bench",
            topic=TOPIC,
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=i % 4 if queue_id is None else queue_id,
            sys_flag=0,
            born_timestamp=int(time.time() * 1000),
            flag=0,
            properties=properties_to_string(
                {"UNIQ_KEY": f"7F00000100002A9F0000000000{i:06d}", "WAIT": "true"}
            ),
            reconsume_times=0,
            unit_mode=False,
            batch=False,
        )
        if v2:
            fields = SendMessageRequestHeaderV2.from_v1(header).to_ext_fields()
            frames.append(encode_frame(create_request(RequestCode.SEND_MESSAGE_V2, fields, BODY)))
        else:
            frames.append(
                encode_frame(create_request(RequestCode.SEND_MESSAGE, header.to_ext_fields(), BODY))
            )
    return frames


async def feed_in_turns(connection, transport, frames: list[bytes], per_turn: int) -> float:
    start = time.process_time()
    written = transport.frames
    for i in range(0, len(frames), per_turn):
        chunk = frames[i : i + per_turn]
        connection.data_received(b"".join(chunk))
        await asyncio.sleep(0)  # one turn of the loop at least: the dispatch of what was stored
        written += len(chunk)
        while transport.frames < written:  # until every response left
            await asyncio.sleep(0)
    return (time.process_time() - start) / len(frames) * 1e6


def pull_frame(queue_offset: int) -> bytes:
    header = PullMessageRequestHeader(
        consumer_group=GROUP,
        topic=TOPIC,
        queue_id=0,
        queue_offset=queue_offset,
        max_msg_nums=32,
        sys_flag=build_pull_sys_flag(commit_offset=False, suspend=True, subscription=True),
        commit_offset=0,
        suspend_timeout_millis=15_000,
        sub_version=0,
        subscription="*",
        expression_type="TAG",
    )
    return encode_frame(create_request(RequestCode.PULL_MESSAGE, header))


async def feed_to_held_pulls(
    broker, connection, transport, frames: list[bytes], until_answer: bool = False
) -> float:
    """A consumer waits (a held pull) on an empty queue; each message is sent to it: all the
    broker does for both (the pull, the send, both answers), or with ``until_answer`` only
    what it does between reading the send and writing the consumer's answer (the broker's
    share of end-to-end latency)."""
    queue = broker.store.find_consume_queue(TOPIC, 0)
    offset = queue.max_offset if queue else 0
    start = time.process_time()
    until_answer_total = 0.0
    for frame in frames:
        written = transport.frames
        connection.data_received(pull_frame(offset))
        await asyncio.sleep(0)  # the pull finds nothing and is held
        transport.first_write_cpu = None
        fed = time.process_time()
        connection.data_received(frame)
        while transport.frames < written + 2:  # the send's answer and the pull's
            await asyncio.sleep(0)
        until_answer_total += transport.first_write_cpu - fed
        offset += 1
    total = until_answer_total if until_answer else time.process_time() - start
    return total / len(frames) * 1e6


def instrument(callgrind: bool, switch: str) -> float:
    """Turn callgrind's counting on or off (when under it); when it switched (the middle of the
    call: callgrind_control takes a while to reach the process)."""
    before = time.monotonic()
    if callgrind:
        subprocess.run(["callgrind_control", "-i", switch, str(os.getpid())], check=True)
    return (before + time.monotonic()) / 2


async def run(args) -> dict:
    root = Path(tempfile.mkdtemp(prefix="bench-path-"))
    settings = {"listenPort": "0", "storePathRootDir": str(root), "mappedFileSizeCommitLog": str(256 << 20)}
    settings.update(item.split("=", 1) for item in args.conf)  # e.g. messageIndexEnable=false
    config = BrokerConfig.from_properties(settings)
    broker = BrokerController(config)
    await broker.start()
    broker.topics.ensure(TOPIC, 4, 6)
    connection = broker.server._new_connection()
    transport = CollectingTransport()
    connection.connection_made(transport)
    figures = {}
    profiler = cProfile.Profile() if args.profile else None
    broker.groups.find(GROUP, create=True)
    try:
        if args.idle:  # what the broker's clock-driven work costs while nothing arrives
            await asyncio.sleep(3)  # past the start's own work, as the paths are (their warm-up)
            started = instrument(args.callgrind, "on")
            await asyncio.sleep(args.idle)
            if args.callgrind:
                print(f"callgrind_window_s idle {instrument(True, 'off') - started:.3f}")
        for name, v2, per_turn in zip(
            PATHS, (False, False, True, False, False), (1, 64, 64, 0, -1), strict=True
        ):
            if (args.only and name != args.only) or args.idle:
                continue
            frames = send_frames(args.messages, v2, queue_id=0 if per_turn <= 0 else None)
            if per_turn > 0:
                feed = functools.partial(feed_in_turns, connection, transport, per_turn=per_turn)
            else:
                feed = functools.partial(
                    feed_to_held_pulls, broker, connection, transport, until_answer=per_turn < 0
                )
            await feed(frames[:2000])  # warm up
            if profiler and name == args.profile:
                profiler.enable()
            # The least of several rounds: what the code costs, with less of whatever else
            # the machine was doing.
            started = instrument(args.callgrind, "on")  # count instructions of the measured rounds only
            figures[name] = min([await feed(frames) for _ in range(args.rounds)])
            if args.callgrind:
                print(f"callgrind_window_s {name} {instrument(True, 'off') - started:.3f}")
            if profiler and name == args.profile:
                profiler.disable()
    finally:
        await broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(35)
    return figures


def callgrind_run(*args: str) -> tuple[int, float]:
    """This file under callgrind with ``args``: the instructions counted, and for how many
    seconds counting was on. Hash randomisation and busy polling are off: both make the count
    vary between runs."""
    with tempfile.TemporaryDirectory(prefix="bench-path-cg-") as tmp:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={tmp}/out",
             sys.executable, __file__, *args, "--callgrind", "--conf", "busyPollWindowMicros=0"],
            env={**os.environ, "PYTHONHASHSEED": "0"}, capture_output=True, text=True, check=False,
        )  # fmt: skip
    collected = re.search(r"Collected : (\d+)", done.stderr)
    window = re.search(r"callgrind_window_s \S+ ([\d.]+)", done.stdout)
    if done.returncode or collected is None or window is None:
        raise RuntimeError(f"callgrind run {args} failed: {done.stderr[-2000:]}")
    return int(collected.group(1)), float(window.group(1))


def net_instructions(collected: int, window_s: float, idle_per_s: float, messages: int) -> int:
    """Instructions per message of a path, without the broker's clock-driven work (timers of the
    delay levels, the loop-lag probe, the stats sampler, flush threads: ~4 M instructions a
    second here). Under callgrind a message takes ~50 times its usual time, so that work would
    otherwise add some 30 k instructions a message, more or less with the machine's load."""
    return round((collected - idle_per_s * window_s) / messages)


def compare_with_baseline(counts: dict[str, int], baseline: dict) -> list[str]:
    """Lines of counts next to every recorded tree's (``baseline["recorded"]``, oldest first);
    a path above the newest record by more than the tolerance is flagged (see ``regressions``)."""
    recorded = baseline["recorded"]
    tolerance = baseline["tolerance"]
    header = "".join(f"{entry['tree']:>12s}" for entry in recorded)
    lines = [f"{'instructions per message':28s}{header}{'now':>10s}{'vs ' + recorded[-1]['tree']:>14s}"]
    for name, count in counts.items():
        figures = [entry["instructions_per_message"].get(name) for entry in recorded]
        shown = "".join(f"{'-':>12s}" if figure is None else f"{figure:12,d}" for figure in figures)
        line = f"{name:28s}{shown}{count:10,d}"
        if figures[-1] is not None:
            change = count / figures[-1] - 1
            line += f"{change:+14.1%}"
            if change > tolerance:
                line += f"  REGRESSION: over +{tolerance:.0%}"
        lines.append(line)
    return lines


def regressions(counts: dict[str, int], baseline: dict) -> list[str]:
    """The paths costing more than the tolerance above the newest recorded tree."""
    newest = baseline["recorded"][-1]["instructions_per_message"]
    return [
        name
        for name, count in counts.items()
        if name in newest and count > newest[name] * (1 + baseline["tolerance"])
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", help="run one of the figures only")
    parser.add_argument("--conf", nargs="*", default=[], help="broker.conf settings, key=value")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="under valgrind --tool=callgrind --instr-atstart=no: instructions of the measured rounds",
    )
    parser.add_argument("--profile", help="profile one of the runs (e.g. send_pipelined_us)")
    parser.add_argument("--idle", type=float, help="only start the broker and wait this many seconds")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count each path's instructions under callgrind, next to broker_path_baseline.json's",
    )
    args = parser.parse_args(argv)
    if args.instructions:
        if shutil.which("valgrind") is None:
            print("instructions per message: skipped (no valgrind; Debian: apt-get install valgrind)")
            return 0
        baseline = json.loads(BASELINE.read_text())
        messages = min(args.messages, 2000)  # ~1 minute a path under callgrind
        idle, idle_window = callgrind_run("--idle", "20")
        counts = {}
        for name in PATHS:
            if args.only in (None, name):
                collected, window = callgrind_run(
                    "--only", name, "--messages", str(messages), "--rounds", "1"
                )
                counts[name.removesuffix("_us")] = net_instructions(
                    collected, window, idle / idle_window, messages
                )
        print("\n".join(compare_with_baseline(counts, baseline)))
        return 1 if regressions(counts, baseline) else 0
    import uvloop

    figures = uvloop.run(run(args))
    for name, value in figures.items():
        print(f"{name:28s}{value:10.1f} µs/msg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
