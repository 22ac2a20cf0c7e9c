"""A transport that answers every send at once: the engine's own loop is all that a test measures."""

from __future__ import annotations

import asyncio
import time

from runner.load.request import Request
from runner.load.result import Result


class InstantSession:
    """Answers each send with a 200 at once, after one yield to the loop (as a real send yields)."""

    async def send(self, request: Request, hash_body: bool) -> Result:
        await asyncio.sleep(0)
        now = time.monotonic_ns()
        return Result(start_ns=now, headers_ns=now, end_ns=now, status=200)

    async def aclose(self) -> None:
        pass


class InstantTransport:
    def session(self) -> InstantSession:
        return InstantSession()
