"""Live-tail delay: from a producer's send to the message's arrival on a console websocket.

    python bench/console_tail.py [--rate 500] [--seconds 10] [--json]

Starts a name server, a broker and the console's web process (daphne, embedded defaults) on free
ports in a temp dir, opens one authenticated websocket on /ws/tail/<topic>/, then sends at a fixed
rate for the given time. Each message carries its send time (ns) in a property; the delay is the
websocket arrival time minus that (one process, one clock). Prints p50/p95/p99/max and how many
messages arrived.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from broker.local_cluster import (  # noqa: E402
    SMALL_STORE,
    console_web_command,
    free_port,
    start_broker,
    start_namesrv,
    wait_until,
    write_conf,
)

TOPIC = "BenchTail"


def _percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def _session_cookie(var_dir: Path) -> str:
    """A logged-in session of a viewer, made with Django's own session store (same database)."""
    os.environ["CONSOLE_VAR_DIR"] = str(var_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.auth.models import Group
    from django.contrib.sessions.backends.db import SessionStore

    user = get_user_model().objects.create_user("bench-viewer", password=os.urandom(12).hex())
    user.groups.add(Group.objects.get(name="viewer"))
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    assert session.session_key is not None  # create() made one
    return session.session_key


def _send_at_rate(namesrv: str, rate: int, seconds: float, stop: threading.Event) -> int:
    from broker.client import Producer
    from broker.common.message import Message

    producer = Producer("BENCH_TAIL_PRODUCER", namesrv).start()
    sent = 0
    try:
        start = time.perf_counter()
        total = int(rate * seconds)
        while sent < total and not stop.is_set():
            due = start + sent / rate
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            msg = Message(TOPIC, b"x" * 256)
            msg.put_property("SENT_NS", str(time.time_ns()))
            producer.send_async(msg)
            sent += 1
    finally:
        time.sleep(0.5)
        producer.shutdown()
    return sent


async def _measure(web_port: int, cookie: str, namesrv: str, rate: int, seconds: float) -> dict:
    import websockets

    delays: list[float] = []
    url = f"ws://127.0.0.1:{web_port}/ws/tail/{TOPIC}/"
    headers = {"Cookie": f"sessionid={cookie}", "Origin": f"http://127.0.0.1:{web_port}"}
    async with websockets.connect(url, additional_headers=headers, max_size=None) as socket:
        while True:  # wait until the pump follows the topic's queues
            data = json.loads(await asyncio.wait_for(socket.recv(), 30))
            if data.get("type") == "status" and data.get("status") == "live":
                break
        stop = threading.Event()
        sender = asyncio.get_running_loop().run_in_executor(None, _send_at_rate, namesrv, rate, seconds, stop)
        expected = int(rate * seconds)
        deadline = time.monotonic() + seconds + 15
        while len(delays) < expected and time.monotonic() < deadline:
            try:
                data = json.loads(await asyncio.wait_for(socket.recv(), 2))
            except TimeoutError:
                if sender.done():
                    break
                continue
            if data.get("type") != "messages":
                continue
            now = time.time_ns()
            for event in data["events"]:
                sent_ns = event["properties"].get("SENT_NS")
                if sent_ns:
                    delays.append((now - int(sent_ns)) / 1e6)
        stop.set()
        sent = await sender
    delays.sort()
    return {
        "rate_msgs_s": rate,
        "sent": sent,
        "received": len(delays),
        "p50_ms": round(_percentile(delays, 0.50), 2),
        "p95_ms": round(_percentile(delays, 0.95), 2),
        "p99_ms": round(_percentile(delays, 0.99), 2),
        "max_ms": round(delays[-1], 2) if delays else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-tail-"))
    var_dir = workdir / "var"
    namesrv = start_namesrv()
    settings = {"brokerName": "broker-bench", "storePathRootDir": workdir / "store", **SMALL_STORE}
    broker = start_broker(write_conf(workdir / "broker.conf", settings), namesrv.addr, free_port())
    web = None
    try:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "CONSOLE_VAR_DIR": str(var_dir),
            "BROKER_NAMESRV": namesrv.addr,
        }
        for key in ("DATABASE_URL", "REDIS_URL"):
            env.pop(key, None)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        cookie = _session_cookie(var_dir)
        from broker.client import Producer
        from broker.common.message import Message

        warm = Producer("BENCH_TAIL_PRODUCER", namesrv.addr).start()
        warm.send(Message(TOPIC, b"create the topic"))
        warm.shutdown()
        port = free_port()
        web = subprocess.Popen(
            console_web_command(port),
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                    return response.status == 200
            except OSError:
                return False

        wait_until(ready, timeout=60, what="the web process")
        result = asyncio.run(_measure(port, cookie, namesrv.addr, args.rate, args.seconds))
    finally:
        if web is not None:
            web.terminate()
            web.wait(20)
        broker.stop()
        namesrv.stop()
        shutil.rmtree(workdir, ignore_errors=True)  # the store preallocates large segment files
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"live tail at {result['rate_msgs_s']} msgs/s: "
            f"sent {result['sent']}, received {result['received']}"
        )
        print(
            f"  send -> websocket delay p50 {result['p50_ms']} ms, p95 {result['p95_ms']} ms, "
            f"p99 {result['p99_ms']} ms, max {result['max_ms']} ms"
        )


if __name__ == "__main__":
    main()
