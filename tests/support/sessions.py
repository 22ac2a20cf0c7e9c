"""A transport that answers every send at once: the engine's own loop is all that a test measures."""

from __future__ import annotations

import asyncio
import time

from runner.load.request import Request
from runner.load.result import Result
from runner.load.schedule import Skips


class InstantSession:
    """Answers each send with a 200 at once, after one yield to the loop (as a real send yields)."""

    async def send(self, request: Request, hash_body: bool) -> Result:
        await asyncio.sleep(0)
        now = time.monotonic_ns()
        return Result(start_ns=now, headers_ns=now, end_ns=now, status=200)

    async def aclose(self) -> None:
        pass

    def held(self) -> list[str]:
        return []


def send_numbers(records: list[Result | Skips]) -> list[int]:
    """Every send an engine's sink heard of, sent or skipped, by its number in the run, sorted."""
    numbers = []
    for record in records:
        if isinstance(record, Skips):
            numbers += [record.schedule.send_number(record.client, k) for k in range(record.first, record.end)]
        else:
            numbers.append(record.seq)
    return sorted(numbers)


def sent(records: list[Result | Skips]) -> list[Result]:
    """The Results of the sends that were made."""
    return [record for record in records if isinstance(record, Result)]


class InstantTransport:
    def session(self) -> InstantSession:
        return InstantSession()
