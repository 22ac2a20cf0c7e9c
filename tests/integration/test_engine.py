"""The engine's own guarantee: every due send ends as one counted Result, whatever a transport does.

Transports turn everything a server can do into a Result; these tests stand in for a
transport with a bug (an exception from send or aclose), which no socket can provoke once
the transports are right. The engine must still count each send, keep every client going
and finish the run.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from runner.load.engine import Engine
from runner.load.model import Closed, Load, Open
from runner.load.request import Request
from runner.load.result import Result
from runner.load.schedule import Schedule, Skips
from tests.support.sessions import send_numbers, sent

MS = 1_000_000


class _BuggySession:
    """Raises from every other send, and from aclose: a transport with a bug in it."""

    def __init__(self) -> None:
        self._sends = 0

    async def send(self, request: Request, hash_body: bool) -> Result:
        self._sends += 1
        await asyncio.sleep(0)
        if self._sends % 2:
            raise RuntimeError("unable to perform operation on <TCPTransport closed=True>")
        now = time.monotonic_ns()
        return Result(start_ns=now, headers_ns=now, end_ns=now, status=200)

    async def aclose(self) -> None:
        raise AttributeError("'NoneType' object has no attribute 'getpeername'")


class _BuggyTransport:
    def session(self) -> _BuggySession:
        return _BuggySession()


@pytest.mark.parametrize("open_model", [False, True], ids=["closed", "open"])
def test_a_transport_that_raises_costs_no_client_and_no_count(open_model: bool) -> None:
    results: list[Result | Skips] = []

    async def go() -> None:
        start = time.monotonic_ns()
        schedule = Schedule(start, 200.0, 4, start + 300 * MS)  # 60 sends due, 15 per client
        load = Load([Request("GET", "http://x/", (), b"")], Open(1000) if open_model else Closed())
        await asyncio.wait_for(Engine(schedule, load, _BuggyTransport(), results.append).run(), 10)

    asyncio.run(go())
    assert send_numbers(results) == list(range(60)), "each due send is sent or skipped, once"
    made = sent(results)
    crashed = [r for r in made if r.error]
    assert crashed and len(crashed) < len(made), "the clients went on after the exceptions"
    for r in crashed:
        assert r.error == "other"
        assert r.error_text.startswith("other: RuntimeError: unable to perform operation"), r.error_text
        assert 0 < r.start_ns <= r.end_ns


class _StallSession:
    """Never answers: every send waits until it is cancelled (a server that stalls every request)."""

    async def send(self, request: Request, hash_body: bool) -> Result:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        pass


class _StallTransport:
    def session(self) -> _StallSession:
        return _StallSession()


def test_open_clients_without_room_account_for_every_due_send_in_bulk() -> None:
    """max_in_flight 2 taken by requests that never return: the 4 clients wait for room, and when
    the run is abandoned after the schedule's end, each due send was sent (2) or skipped (the
    rest), exactly once, in a few records rather than one per send."""
    records: list[Result | Skips] = []

    async def go() -> None:
        start = time.monotonic_ns()
        schedule = Schedule(start, 20_000.0, 4, start + 100 * MS)  # 2,000 sends due
        load = Load([Request("GET", "http://x/", (), b"")], Open(2))
        engine = Engine(schedule, load, _StallTransport(), records.append)
        running = asyncio.ensure_future(engine.run())
        while time.monotonic_ns() < start + 150 * MS:
            await asyncio.sleep(0.01)
            engine.skip_due_before(time.monotonic_ns())  # as the run's driver does at each interval's end
        engine.cancel_in_flight()
        await asyncio.wait_for(running, 10)

    asyncio.run(go())
    assert send_numbers(records) == list(range(2000)), "each due send is sent or skipped, once"
    made = sent(records)
    assert len(made) == 2 and all(r.error == "cancelled" for r in made)
    assert len(records) - len(made) < 200, "skips come in runs, not one record per send"
