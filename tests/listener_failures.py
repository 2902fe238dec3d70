"""Failures raised where pytest does not look, raised again where it does.

A test hands code to someone else to call: a consumer's listener, a remoting processor, a
callback run from an asyncio timer. Whoever calls it catches what it raises (the SDK logs it
and retries the messages, asyncio logs it), so an assertion failing there used to surface only
as a timeout without its message, or not at all. ``ListenerFailures`` records such failures;
the test raises them in its own thread or task, with their message and traceback, as soon as
it waits (``wait``, ``wait_async``) or when it asks (``check``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable


class ListenerFailures:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: list[BaseException] = []

    def record(self, failure: BaseException) -> None:
        with self._lock:
            self._failures.append(failure)

    def watch(self, function: Callable) -> Callable:
        """``function`` (plain or coroutine) wrapped so that what it raises is recorded, then
        raised on to its caller as before."""
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def watched_coroutine(*args, **kwargs):
                try:
                    return await function(*args, **kwargs)
                except BaseException as failure:
                    if not isinstance(failure, asyncio.CancelledError):
                        self.record(failure)
                    raise

            return watched_coroutine

        @functools.wraps(function)
        def watched(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except BaseException as failure:
                self.record(failure)
                raise

        return watched

    def never(self, what: str) -> Callable[..., None]:
        """A callback that must not be called: a call is recorded as a failure naming ``what``."""

        def called(*args, **kwargs) -> None:
            self.record(AssertionError(f"{what} was called with {args or ''}{kwargs or ''}"))

        return called

    def check(self) -> None:
        """Raise the first failure recorded (the others are noted on it)."""
        with self._lock:
            if not self._failures:
                return
            first, others = self._failures[0], self._failures[1:]
        for other in others:
            note = f"also failed: {type(other).__name__}: {other}"
            if note not in getattr(first, "__notes__", ()):
                first.add_note(note)
        raise first

    def wait(self, condition: Callable[[], object], timeout: float, interval: float = 0.02) -> bool:
        """Poll ``condition`` until it holds (True) or ``timeout`` passes (False); a failure
        recorded meanwhile is raised at once."""
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            if condition():
                self.check()
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)

    async def wait_until_async(self, condition: Callable[[], object], timeout: float) -> bool:
        """``wait`` for a test running on an event loop: the loop runs on while it polls."""

        def checked() -> object:
            self.check()
            return condition()

        return await wait_until_async(checked, timeout)

    async def wait_async(self, awaitable: Awaitable, timeout: float, interval: float = 0.02):
        """Await ``awaitable`` for at most ``timeout`` seconds (``TimeoutError`` after that); a
        failure recorded meanwhile is raised at once."""
        task = asyncio.ensure_future(awaitable)
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            while not task.done():
                self.check()
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    raise TimeoutError(f"not done within {timeout} s")
                await asyncio.wait({task}, timeout=min(interval, left))
            self.check()
            return task.result()
        finally:
            task.cancel()


async def wait_until_async(condition: Callable[[], object], timeout: float, interval: float = 0.005) -> bool:
    """Poll ``condition`` while the running loop goes on, until it holds (True) or ``timeout``
    seconds pass (False): ``harness.wait_until`` for a test on an event loop."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() >= deadline:
            return bool(condition())
        await asyncio.sleep(interval)
    return True
