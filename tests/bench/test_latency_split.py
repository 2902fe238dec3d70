"""``bench/latency_split.py``'s reading of a capture: stamps found on the wire, stages split."""

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from bench.latency_split import split, stamp_crossings, tcp_payloads
from bench.peers.base import STAMP

ROOT = Path(__file__).resolve().parents[2]
ETHERNET = b"\x00" * 12 + b"\x08\x00"


def ipv4_tcp(payload: bytes, protocol: int = 6) -> bytes:
    ip = bytes([0x45, 0]) + struct.pack(">H", 40 + len(payload)) + b"\x00" * 5 + bytes([protocol])
    ip += b"\x00" * 10
    tcp = b"\x00" * 12 + bytes([5 << 4]) + b"\x00" * 7  # a 20-byte header
    return ETHERNET + ip + tcp + payload


def ipv6_tcp(payload: bytes) -> bytes:
    tcp = b"\x00" * 12 + bytes([8 << 4]) + b"\x00" * 19  # a 32-byte header (options)
    ip = bytes([0x60]) + b"\x00" * 3 + struct.pack(">H", len(tcp) + len(payload)) + bytes([6]) + b"\x00" * 33
    return ETHERNET[:12] + b"\x86\xdd" + ip + tcp + payload


def pcap(packets: list[tuple[float, bytes]], nanoseconds: bool = False, order: str = "<") -> bytes:
    magic = 0xA1B23C4D if nanoseconds else 0xA1B2C3D4
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 65535, 1)
    scale = 1e9 if nanoseconds else 1e6
    for at, packet in packets:
        seconds = int(at)
        part = round((at - seconds) * scale)
        out += struct.pack(order + "IIII", seconds, part, len(packet), len(packet)) + packet
    return out


STAMPS = [1_790_000_000.000_1, 1_790_000_000.001_1, 1_790_000_000.002_1]


def test_each_stamp_first_and_second_crossing():
    first, second, third = STAMPS
    capture = pcap([
        (first + 0.000_050, ipv4_tcp(b"SEND header" + STAMP.pack(first) + b"x" * 100)),
        (first + 0.000_060, ipv4_tcp(b"", protocol=6)),  # a bare ACK: no payload
        (first + 0.000_070, ipv4_tcp(STAMP.pack(first), protocol=17)),  # UDP: not read
        (first + 0.000_250, ipv6_tcp(b"PULL answer" + STAMP.pack(first))),
        (first + 0.000_300, ipv4_tcp(b"ack again" + STAMP.pack(first))),  # a third sighting
        (second + 0.000_040, ipv4_tcp(STAMP.pack(second) + STAMP.pack(third)[:4])),  # cut
        (second + 0.000_200, ipv4_tcp(STAMP.pack(second))),
        (third + 0.000_100, ipv4_tcp(STAMP.pack(third)[4:])),
    ], nanoseconds=True)  # fmt: skip
    crossings = stamp_crossings(capture, STAMPS)
    assert set(crossings) == {first, second}  # the third was cut across packets
    assert crossings[first] == pytest.approx((first + 0.000_050, first + 0.000_250), abs=1e-9)
    assert crossings[second] == pytest.approx((second + 0.000_040, second + 0.000_200), abs=1e-9)


def test_split_into_stages():
    first, second, _ = STAMPS
    capture = pcap([
        (first + 0.000_100, ipv4_tcp(STAMP.pack(first))),
        (first + 0.000_300, ipv4_tcp(STAMP.pack(first))),
        (second + 0.000_050, ipv4_tcp(STAMP.pack(second))),
        (second + 0.000_150, ipv4_tcp(STAMP.pack(second))),
    ], order=">")  # fmt: skip
    figures = split(capture, STAMPS[:2], [0.5, 0.25])  # the listeners saw them at +500 and +250 µs
    assert figures["messages"] == 2 and figures["found_on_wire"] == 2
    # percentile() takes the upper middle of two: the larger of each stage's pair
    assert figures["client_send_p50_us"] == pytest.approx(100, abs=0.5)
    assert figures["server_p50_us"] == pytest.approx(200, abs=0.5)
    assert figures["client_receive_p50_us"] == pytest.approx(200, abs=0.5)
    assert figures["total_p50_us"] == pytest.approx(500, abs=0.5)
    assert figures["client_send_p99_us"] == pytest.approx(100, abs=0.5)


def test_not_a_pcap_capture_is_refused():
    with pytest.raises(ValueError, match="not a pcap"):
        list(tcp_payloads(b"\x0a\x0d\x0d\x0a" + b"\x00" * 40))  # pcapng's block type
    bad_link = bytearray(pcap([]))
    bad_link[20:24] = struct.pack("<I", 9999)
    with pytest.raises(ValueError, match="link type 9999"):
        list(tcp_payloads(bytes(bad_link)))


@pytest.mark.skipif(
    shutil.which("tcpdump") is None or os.geteuid() != 0, reason="needs tcpdump and the right to capture"
)
def test_our_latency_run_found_on_the_wire(tmp_path):
    out = subprocess.run(
        [sys.executable, "bench/latency_split.py", "--only", "ours", "--seconds", "0.3", "--warm-up", "16",
         "--dir", str(tmp_path), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    ours = json.loads(out.stdout.strip().splitlines()[-1])["ours"]
    assert ours["messages"] == 300
    assert ours["found_on_wire"] >= 295  # a stamp cut across two packets is rare
    for stage in ("client_send", "server", "client_receive"):
        assert 0 < ours[f"{stage}_p50_us"] <= ours[f"{stage}_p99_us"], stage
    assert ours["total_p50_us"] > ours["server_p50_us"]
