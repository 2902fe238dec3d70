"""What plain ACL costs per request: the client's signature and the server's check.

    python bench/acl_overhead.py [--requests N] [--body BYTES]

First the parts alone, on a send request as the SDK writes it (CPU microseconds each, the median
of 5 runs): building it, signing it (RequestSigner), checking it as the broker does
(check_request: signature and PUB permission), and with
aclReplayProtection (the nonce remembered). Then end to end in one process on uvloop: a
``RemotingServer`` with an echo handler for SEND_MESSAGE, without ACL and with ``install_acl``,
and a ``RemotingClient`` without and with credentials, 32 requests in flight; process CPU
microseconds per request (both ends in this process), the steadier figure on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

import uvloop
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.acl import install_acl, open_acl_file
from broker.acl.replay import ReplayGuard, SignedRequestPolicy
from broker.acl.validator import check_request
from broker.client.client_api import send_request
from broker.common.acl_signature import RequestSigner, SessionCredentials
from broker.common.codes import RequestCode
from broker.common.request_headers import SendMessageRequestHeader
from broker.remoting.client import RemotingClient
from broker.remoting.command import response_to
from broker.remoting.server import RemotingServer

CREDS = SessionCredentials("bench-access-key", "bench-secret-key")
ACL = {
    "accounts": [
        {"accessKey": CREDS.access_key, "secretKey": CREDS.secret_key, "topicPerms": ["BenchTopic=PUB"]}
    ]
}


def _header() -> SendMessageRequestHeader:
    properties = "KEYS\x01order-1\x02UNIQ_KEY\x017F0000010001000000000000000000000000\x02WAIT\x01true\x02"
    return SendMessageRequestHeader(
        "BenchProducer", "BenchTopic", "TBW102", 4, 0, 0, 1_700_000_000_000, 0, properties
    )


def _us(fn, number: int) -> float:
    return statistics.median(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def parts(body: bytes, number: int, acl_file) -> None:
    header, signer = _header(), RequestSigner(CREDS)
    build = _us(lambda: send_request(header, body), number)
    signed = _us(lambda: signer(send_request(header, body)), number)
    request = send_request(header, body)
    signer(request)
    check = _us(lambda: check_request(acl_file.current, request, "127.0.0.1"), number)
    # With aclReplayProtection each check needs a fresh request (a new nonce): sign one per check.
    replay = ReplayGuard(SignedRequestPolicy(replay_protection=True))

    def sign_and_check() -> None:
        fresh = send_request(header, body)
        signer(fresh)
        check_request(acl_file.current, fresh, "127.0.0.1", replay=replay)

    protected = _us(sign_and_check, number) - signed
    print(
        f"build a send request {build:.2f} us; sign it {signed - build:.2f} us; broker check {check:.2f} us; "
        f"with aclReplayProtection {protected:.2f} us"
    )


async def end_to_end(requests: int, body: bytes, acl_file) -> None:
    async def echo(conn, request):
        return response_to(request)

    results = {}
    for acl_on, creds in ((False, None), (False, CREDS), (True, CREDS)):
        server = RemotingServer("127.0.0.1", 0)
        server.register_processor(RequestCode.SEND_MESSAGE, echo)
        if acl_on:
            install_acl(server.processors, acl_file)
        port = await server.start()
        client = RemotingClient(creds)
        addr, header = f"127.0.0.1:{port}", _header()
        assert (await client.invoke(addr, send_request(header, body), 5000)).ok
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(requests // 32):
            answers = await asyncio.gather(
                *(client.invoke(addr, send_request(header, body), 5000) for _ in range(32))
            )
            assert all(a.ok for a in answers)
        done = requests // 32 * 32
        results[(acl_on, creds is not None)] = (
            (time.process_time() - cpu) / done * 1e6,
            done / (time.perf_counter() - wall),
        )
        await client.close()
        await server.stop()
    for (acl_on, signed), (cpu_us, rate) in results.items():
        what = f"ACL {'on ' if acl_on else 'off'}, client {'signs' if signed else 'unsigned'}"
        print(f"{what}: {cpu_us:.1f} us CPU per request ({rate:,.0f} requests/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--body", type=int, default=256)
    args = parser.parse_args()
    body = b"x" * args.body
    path = Path(tempfile.mkdtemp(prefix="acl-bench-")) / "plain_acl.yml"
    path.write_text(yaml.safe_dump(ACL))
    acl_file = open_acl_file(path, 1000)
    parts(body, 20_000, acl_file)
    uvloop.run(end_to_end(args.requests, body, acl_file))


if __name__ == "__main__":
    main()
