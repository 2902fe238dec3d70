"""Where each peer's end-to-end latency goes: the client's send, the server, the client's receive.

    python bench/latency_split.py [--only PEER ...] [--seconds S] [--warm-up N] [--json]

Runs the end-to-end latency workload of ``bench/broker.py`` (1,000 stamped 1 KiB messages a
second, each publish awaited, to a consumer already waiting) for each peer in turn while
``tcpdump`` records the loopback interface, then finds every timed message's stamp on the wire.
The first packet that carries a stamp is the publish reaching the server; the second is the
delivery leaving it. With the stamp itself and the moment the consumer's listener saw the body,
each message's latency splits into three stages:

- client send: stamp taken → publish on the wire (the client library and the write system call);
- server: publish on the wire → delivery on the wire (waking the server, its work, its write);
- client receive: delivery on the wire → the listener (waking the client, decoding, dispatching).

The capture's clock is the kernel's, stamped as each packet passes the loopback device, so the
split is the same for every peer and costs none of them anything. Needs ``tcpdump`` and the right
to capture (root); a message whose stamp was cut across two packets is left out (the count says
how many were found).
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dpkt
import dpkt.loopback
import dpkt.sll
import dpkt.sll2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.broker import make_peer
from bench.peers.base import STAMP, WARM_UP_MESSAGES, percentile

PEERS = ("ours", "ours-threads", "rabbitmq", "nats", "redis")
STAGES = ("client_send", "server", "client_receive", "total")
CAPTURE_TAIL_S = 0.5
# The kernel drops packets tcpdump has no room for (other loopback traffic included): 64 MiB
# holds a run's packets even when the machine is too busy to let tcpdump drain it as they come.
CAPTURE_BUFFER_KIB = 65536
# The capture formats tcpdump writes for a loopback interface (Linux: Ethernet; BSD: DLT_NULL;
# "-i any": Linux cooked), each to its network-layer packet.
_NETWORK_LAYER = {
    dpkt.pcap.DLT_EN10MB: lambda frame: dpkt.ethernet.Ethernet(frame).data,
    dpkt.pcap.DLT_NULL: lambda frame: dpkt.loopback.Loopback(frame).data,
    dpkt.pcap.DLT_LINUX_SLL: lambda frame: dpkt.sll.SLL(frame).data,
    dpkt.pcap.DLT_LINUX_SLL2: lambda frame: dpkt.sll2.SLL2(frame).data,
}


def tcp_payloads(capture: bytes):
    """Yield ``(time, payload)`` for each TCP segment with data in a pcap capture."""
    try:
        reader = dpkt.pcap.Reader(io.BytesIO(capture))
    except ValueError:
        raise ValueError("not a pcap capture (pcapng is not read: tcpdump -w writes pcap)") from None
    network_layer = _NETWORK_LAYER.get(reader.datalink())
    if network_layer is None:
        raise ValueError(f"link type {reader.datalink()} is not read")
    for at, frame in reader:
        try:
            segment = getattr(network_layer(frame), "data", None)
        except dpkt.UnpackError:  # cut short by the snap length
            continue
        if isinstance(segment, dpkt.tcp.TCP) and segment.data:
            yield float(at), bytes(segment.data)


def stamp_crossings(capture: bytes, stamps: list[float]) -> dict[float, tuple[float, float]]:
    """For each stamp, when it was first and second seen on the wire (stamps seen fewer than
    twice are left out)."""
    if not stamps:
        return {}
    wanted = {STAMP.pack(stamp): stamp for stamp in stamps}
    # Stamps taken within a few minutes share their first bytes (sign, exponent, the top of the
    # mantissa): a cheap needle to find candidates with.
    needle = STAMP.pack(stamps[0])[:3]
    seen: dict[float, list[float]] = {}
    for at, payload in tcp_payloads(capture):
        index = payload.find(needle)
        while index >= 0:
            stamp = wanted.get(payload[index : index + STAMP.size])
            if stamp is not None:
                times = seen.setdefault(stamp, [])
                if len(times) < 2:
                    times.append(at)
            index = payload.find(needle, index + 1)
    return {stamp: (times[0], times[1]) for stamp, times in seen.items() if len(times) == 2}


def split(capture: bytes, stamps: list[float], latencies_ms: list[float]) -> dict:
    """Each stage's p50/p90/p99 in microseconds, over the messages found twice on the wire."""
    crossings = stamp_crossings(capture, stamps)
    stages: dict[str, list[float]] = {name: [] for name in STAGES}
    for stamp, latency_ms in zip(stamps, latencies_ms, strict=True):
        if stamp not in crossings:
            continue
        sent, delivered = crossings[stamp]
        listened = stamp + latency_ms / 1000
        for name, value in zip(
            STAGES, (sent - stamp, delivered - sent, listened - delivered, listened - stamp), strict=True
        ):
            stages[name].append(value * 1e6)
    figures: dict = {"messages": len(stamps), "found_on_wire": len(crossings)}
    for name, values in stages.items():
        for label, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            figures[f"{name}_{label}_us"] = percentile(values, fraction)
    return figures


class Capture:
    """``tcpdump`` recording the loopback interface into a file while the block runs."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> Capture:
        self.process = subprocess.Popen(
            [
                "tcpdump",
                "-i",
                "lo",
                "-s",
                "0",
                "-B",
                str(CAPTURE_BUFFER_KIB),
                "--immediate-mode",
                "-U",
                "-w",
                str(self.path),
                "tcp",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.process.stderr is not None  # stderr=PIPE
        self.stderr = self.process.stderr
        # tcpdump says "listening on lo" once it captures; anything else is why it could not.
        line = self.stderr.readline().decode(errors="replace")
        if "listening on" not in line:
            self.process.wait(5)
            raise RuntimeError(f"tcpdump did not start: {line.strip() or self.process.returncode}")
        return self

    def __exit__(self, *exc_info) -> None:
        time.sleep(CAPTURE_TAIL_S)  # the last packets, still on their way to tcpdump
        self.process.send_signal(signal.SIGINT)  # tcpdump writes out what it holds and exits
        self.process.wait(10)
        self.stderr.close()


async def measure(name: str, args: argparse.Namespace, capture_dir: Path) -> dict:
    peer = make_peer(name, args)
    await peer.setup()
    try:
        await peer.sync_send(args.warm_up)
        pcap = capture_dir / f"{name}.pcap"
        with Capture(pcap):
            samples = await peer.latency(1000, args.seconds)
    finally:
        await peer.teardown()
    return split(pcap.read_bytes(), samples.stamps, samples.values)


async def run(args: argparse.Namespace) -> dict:
    results = {}
    with tempfile.TemporaryDirectory(prefix="latency-split-") as capture_dir:
        for name in args.only or ["ours", "nats"]:
            try:
                results[name] = await measure(name, args, Path(capture_dir))
            except Exception as exc:  # a peer that is down is reported, not fatal
                results[name] = {"skipped": f"{type(exc).__name__}: {exc}"}
    return results


def print_table(results: dict) -> None:
    names = list(results)
    print(f"{'µs':24s}" + "".join(f"{name:>14s}" for name in names))
    for stage in STAGES:
        for label in ("p50", "p90", "p99"):
            key = f"{stage}_{label}_us"
            cells = [results[n].get(key) for n in names]
            print(f"{stage + ' ' + label:24s}" + "".join(
                f"{c:14,.0f}" if isinstance(c, float) else f"{'-':>14s}" for c in cells
            ))  # fmt: skip
    for name in names:
        if "skipped" in results[name]:
            print(f"{name}: skipped ({results[name]['skipped']})")
        else:
            found, messages = results[name]["found_on_wire"], results[name]["messages"]
            print(f"{name}: {found} of {messages} found on the wire")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=PEERS, help="peers to measure (ours and nats)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each latency run")
    parser.add_argument("--warm-up", type=int, default=WARM_UP_MESSAGES)
    parser.add_argument("--dir", default=None, help="where our broker keeps its store")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if shutil.which("tcpdump") is None:
        parser.error("needs tcpdump (Debian: apt-get install tcpdump)")
    args.broker_conf, args.sync_flush = {}, False  # what make_peer reads for our broker
    import uvloop

    results = uvloop.run(run(args))
    if args.json:
        print(json.dumps(results))
    else:
        print_table(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
