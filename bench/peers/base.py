"""The workloads every system runs, and how they are measured, in one place.

Each peer implements five coroutines; ``measure`` times them the same way for everyone. Bodies
are 1 KiB; the end-to-end latency run sends at a fixed rate and the consumer computes
now - send time from a timestamp carried in the body. Every peer first sends ``warm_up``
messages untimed (``WARM_UP_MESSAGES`` unless told): the figures are of a running system, not
of its first requests (connections opening, first pages of new files, an interpreter's first
passes through its code), which cost each peer differently and drift from run to run. Each
latency run likewise starts with ``SETTLE_SECONDS`` of untimed messages at the same rate (a
consumer or stream that was just created, the first deliveries), so a run split into short turns
(``measure_latency_interleaved``) does not count each turn's start-up against its peer.
"""

from __future__ import annotations

import asyncio
import statistics
import struct
import time

BODY_SIZE = 1024
WARM_UP_MESSAGES = 1000
SETTLE_SECONDS = 0.2
STAMP = struct.Struct(">d")
_UNTIMED = -1.0  # the stamp of a settling message


def stamped_body(timed: bool = True) -> bytes:
    return STAMP.pack(time.time() if timed else _UNTIMED).ljust(BODY_SIZE, b"x")


class LatencySamples:
    """End-to-end latencies of stamped bodies as a consumer receives them, with the stamps
    (``bench/latency_split.py`` finds them on the wire); ``done`` (a ``threading.Event`` or an
    ``asyncio.Event``) is set once ``total`` have arrived."""

    def __init__(self, total: int, done) -> None:
        self.values: list[float] = []  # milliseconds from stamp to receipt
        self.stamps: list[float] = []
        self.total, self.done = total, done

    def add(self, body: bytes) -> None:
        now = time.time()
        stamp = STAMP.unpack_from(body)[0]
        if stamp == _UNTIMED:  # a settling message
            return
        self.values.append((now - stamp) * 1000)
        self.stamps.append(stamp)
        if len(self.values) >= self.total:
            self.done.set()

    def __len__(self) -> int:
        return len(self.values)


class Peer:
    name = "peer"

    async def setup(self) -> None: ...
    async def teardown(self) -> None: ...
    async def sync_send(self, count: int) -> None: ...
    async def async_send(self, count: int, in_flight: int) -> None: ...
    async def batch_send(self, count: int, batch: int) -> None: ...
    async def consume(self, count: int) -> None: ...
    async def latency(self, rate: int, seconds: float) -> LatencySamples:
        raise NotImplementedError


async def paced(rate: int, seconds: float, send) -> int:
    """Call ``send(body)`` ``rate`` times a second: ``SETTLE_SECONDS`` of untimed bodies, then
    ``seconds`` of stamped ones; return how many were timed."""
    settling, timed = int(rate * SETTLE_SECONDS), int(rate * seconds)
    start = time.monotonic()
    for i in range(settling + timed):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await send(stamped_body(timed=i >= settling))
    return timed


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def latency_figures(samples: list[float]) -> dict:
    return {
        "e2e_p50_ms": percentile(samples, 0.50),
        "e2e_p99_ms": percentile(samples, 0.99),
        "e2e_samples": len(samples),
        "e2e_mean_ms": statistics.fmean(samples) if samples else float("nan"),
    }


async def measure(peer: Peer, messages: int, latency_seconds: float, warm_up: int = WARM_UP_MESSAGES) -> dict:
    await peer.setup()
    figures = {}
    try:
        await peer.sync_send(warm_up)
        for name, run in (
            ("sync_send", lambda: peer.sync_send(messages // 4)),
            ("async_send_64", lambda: peer.async_send(messages, 64)),
            ("batch_send_32", lambda: peer.batch_send(messages, 32)),
        ):
            count = messages // 4 if name == "sync_send" else messages
            start = time.perf_counter()
            await run()
            figures[f"{name}_msgs_s"] = count / (time.perf_counter() - start)
        start = time.perf_counter()
        await peer.consume(messages)
        figures["consume_msgs_s"] = messages / (time.perf_counter() - start)
        figures |= latency_figures((await peer.latency(1000, latency_seconds)).values)
    finally:
        await peer.teardown()
    return figures


async def measure_latency_interleaved(
    peers: dict[str, Peer], latency_seconds: float, turns: int, warm_up: int = WARM_UP_MESSAGES
) -> tuple[dict[str, dict], dict[str, str]]:
    """The latency run alone, for peers set up side by side: ``turns`` turns in which each peer
    in turn runs for ``latency_seconds / turns`` (each turn starting with the next peer), each
    peer's samples pooled. Runs minutes apart meet a machine whose speed has drifted; these meet
    the same minutes. Returns each peer's figures, and why a peer that failed to start did."""
    started, failures = {}, {}
    try:
        for name, peer in peers.items():
            try:
                await peer.setup()
            except Exception as exc:  # a peer that is down is reported, not fatal
                failures[name] = f"{type(exc).__name__}: {exc}"
                continue
            started[name] = peer
            await peer.sync_send(warm_up)
        samples: dict[str, list[float]] = {name: [] for name in started}
        names = list(started)
        for turn in range(turns):
            shift = turn % max(len(names), 1)
            for name in names[shift:] + names[:shift]:
                samples[name] += (await started[name].latency(1000, latency_seconds / turns)).values
    finally:
        for peer in started.values():
            await peer.teardown()
    return {name: latency_figures(values) for name, values in samples.items()}, failures
