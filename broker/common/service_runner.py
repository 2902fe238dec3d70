"""Running an engine process: uvloop when installed, clean stop on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import gc
import signal
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any


async def serve_until_signalled(
    start: Callable[[], Awaitable[str]], stop: Callable[[], Awaitable[None]]
) -> None:
    """``start()`` returns the line announcing where the service listens (printed and flushed,
    since harnesses and honcho wait for it); SIGTERM or SIGINT then runs ``stop()``."""
    # The handlers go in before start-up: a harness that signals as soon as the announcing line
    # appears must get a clean stop, not the default SIGTERM death (rc -15).
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    print(await start(), flush=True)
    # What start-up built (modules, classes, tables, the store's files) lives as long as the
    # process: kept out of the collector, a full collection walks only what came after — about
    # 0.3-0.7 ms instead of 11-16 ms in a broker measured here, a pause that every request in
    # flight would wait out.
    gc.collect()
    gc.freeze()
    await stopped.wait()
    await stop()


def run(coro: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)
