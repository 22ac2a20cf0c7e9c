"""The engine: sends each request when the schedule says, and hands every Result to a sink.

It never prints and never interprets a result. Every send it makes produces exactly one
Result (a response, a failure, or, when cancelled at a hard stop, a `cancelled` failure),
and every run of sends it cannot make on time produces one Skips record (schedule.Skips:
one record however many sends it covers), so whoever counts results can account for the
whole schedule, at a cost per send made, not per send due.

Closed model (default): each client has one request in flight; when a response comes
back after the client's next send was due, the newest send that fell due while it was in
flight goes out at once and older ones are skipped (the server set that pace). A send that
fell due after the response came back is never skipped: if the client was slow to send
it, it goes out late, and the lateness is the client's (Result.client_lag_ns).
Open model: each send goes out at its due time whatever is in flight, up to
`max_in_flight` across all clients; beyond that, sends are skipped. A client behind
schedule sends late, yielding to the loop between sends so the run's intervals still close
on time.
In both, once sending has ended nothing goes out late: what a client free to send gets to
only then is skipped (Skips.at_end: its own delay), never sent after the end, so a run ends
on time however late its client ran (as vegeta and k6 drop such sends).
Bench (ab's loop): each client has one request in flight and sends the next one as soon
as it is answered, with no pacing at all; nothing is ever due, so nothing is skipped.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from runner.load import failures
from runner.load.clock import Clock, MonotonicClock
from runner.load.handoff import close_session
from runner.load.model import Bench, Load, Open
from runner.load.result import ErrorKind, Result
from runner.load.schedule import Schedule, Skips
from runner.load.transport import Session, Transport

Sink = Callable[[Result | Skips], None]


class Engine:
    """Runs the clients of one load on one schedule.

    Every moment it acts on comes from its clock (runner.load.clock): the real one by default,
    a scripted one in tests.
    """

    def __init__(self, schedule: Schedule, load: Load, transport: Transport, sink: Sink,
                 clock: Clock | None = None) -> None:
        self._schedule = schedule
        self._clock = clock if clock is not None else MonotonicClock(load.model.precise)
        self._load = load
        self._transport = transport
        self._sink = sink
        self._sent = 0
        self._in_flight = 0
        self._room: asyncio.Event | None = None  # open model: set when a request in flight ends (made in run())
        self._waiting: dict[int, int] = {}  # open model: clients waiting for room, and the k each sends next
        self._stopping = False
        self._stopped_ns: int | None = None  # when sending stopped early: a stop, or the count spent
        self._last_claimed = -1  # the highest send number claimed, for where a spent count's time ends
        self._count_end_ns: int | None = None  # paced runs: the end of the last counted send's slot
        self._clients: list[asyncio.Task[None]] = []
        self._idle: set[asyncio.Task[None]] = set()  # clients waiting for a due time
        self._sends: set[asyncio.Task[int]] = set()  # open model: requests in flight
        self._random = random.Random()
        self._wheel = load.turn
        model = load.model
        self._max_in_flight = model.max_in_flight if isinstance(model, Open) else 1  # the open model's bound

    @property
    def sent(self) -> int:
        """Requests sent so far."""
        return self._sent

    @property
    def stopped_sending_ns(self) -> int | None:
        """When sending stopped before the schedule's end (a stop, or totalRequests spent), if it did.

        N paced sends take N slots of 1/qps: when the count is spent, sending time ends
        with the last send's slot, not when that send left (which would be one slot short
        and overstate the rate: 2 req/s for 1 request at 1 req/s).
        """
        if self._stopped_ns is None or self._count_end_ns is None:
            return self._stopped_ns
        return max(self._stopped_ns, self._count_end_ns)

    async def run(self) -> None:
        """Run every client until the schedule ends, the count is reached, or a stop."""
        model = self._load.model
        match model:
            case Bench():
                client = self._bench_client
            case Open():
                client = self._open_client
                self._room = asyncio.Event()
            case _:
                client = self._closed_client
        try:
            self._clients = [asyncio.ensure_future(client(c)) for c in range(self._schedule.clients)]
            outcomes = await asyncio.gather(*self._clients, return_exceptions=True)
        finally:
            self._clock.close()
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise outcome

    def stop(self, at_ns: int | None = None) -> None:
        """Send nothing more from `at_ns` (default: now); requests in flight may finish.

        Sends that fell due before then and were not made count as skipped, so every send
        due before the stop is accounted for (see cancel_in_flight for the requests); one due at
        the stop or after is not the run's. The stop is never before a send already made.
        Called for a signal, and by the engine itself once totalRequests have been sent.
        """
        if self._stopped_ns is None:
            at = self._now() if at_ns is None else at_ns
            if self._last_claimed >= 0:  # paced: every send made is due before the stop, as in C's begin_stop
                at = max(at, self._schedule.due_ns(self._last_claimed) + 1)
            self._stopped_ns = at
        self._stopping = True
        for task in list(self._idle):
            task.cancel()

    def cancel_in_flight(self) -> None:
        """Abandon requests still in flight; each still yields a `cancelled` Result."""
        self.stop()
        for task in [*self._clients, *self._sends]:
            task.cancel()

    async def _closed_client(self, client: int) -> None:
        session: Session | None = None
        k = 0  # the client's next send
        free = 0  # when its previous request ended
        try:
            session, free = await self._session(client)  # inside: a stop while it waits still counts the skips
            if free:  # its session was busy with the warm-up's last request when the run's sends fell due
                k, skipped = self._schedule.catch_up(client, k, free, self._now())
                self._skip(client, k - skipped, k)
            while self._ready(n := self._schedule.send_number(client, k)) and await self._wait_until_due(n):
                if not self._schedule.before_end(now := self._now()):  # got to it once sending was over
                    k = self._skip(client, k, self._schedule.last_in_run(client, k, now) + 1, at_end=True)
                    break
                if not self._claim(n):
                    break
                try:
                    free = await self._send(session, n, free_ns=free)
                finally:
                    k += 1
                if self._stopping:
                    break
                k, skipped = self._schedule.catch_up(client, k, free, self._now())
                self._skip(client, k - skipped, k)
        finally:
            if self._stopping:  # stopped or count spent: account for what fell due before that
                self._skip_missed(client, k)
            if session is not None:
                await self._release(client, session, free)

    def _skip_missed(self, client: int, k: int) -> None:
        """Count as skipped the client's sends from its k-th that fell due before the stop.

        A client stuck on a slow request learns what it missed only when the request
        returns; when the run stops first, this is where those sends are accounted for.
        """
        assert self._stopped_ns is not None
        self._skip(client, k, self._schedule.last_in_run(client, k, self._stopped_ns - 1) + 1)

    async def _open_client(self, client: int) -> None:
        session: Session | None = None
        mine: set[asyncio.Task[int]] = set()
        schedule = self._schedule
        k = 0
        try:
            session, _ = await self._session(client)
            while self._ready(n := schedule.send_number(client, k)) and await self._wait_until_due(n):
                full = self._in_flight >= self._max_in_flight
                if full:
                    self._waiting[client] = k
                    try:
                        room = await self._wait_for_room()
                    finally:
                        k = self._waiting.pop(client)  # skip_due_before may have counted some meanwhile
                    if not room:
                        break
                now = self._now()
                if full or not schedule.before_end(now):
                    # Every send that fell due while there was no room, or that is still unsent once
                    # sending is over, is skipped: all of them in one record.
                    k = self._skip(client, k, schedule.last_in_run(client, k, now) + 1, at_end=not full)
                    continue
                if not self._claim(n):
                    break
                k += 1
                # Counted in flight now, not when the task first runs: the next send may start
                # before this one's task has, and must see it.
                self._in_flight += 1
                task = asyncio.ensure_future(self._send(session, n, counted=True))
                for group in (mine, self._sends):
                    group.add(task)
                    task.add_done_callback(group.discard)
                if schedule.due_ns(schedule.send_number(client, k)) <= now:
                    await asyncio.sleep(0)  # behind schedule: let the loop run (the sends, the run's intervals)
            if mine:
                await asyncio.wait(mine)
        finally:
            if self._stopping:  # account for what fell due before the stop and was not sent
                self._skip_missed(client, k)
            if session is not None:
                await self._release(client, session, self._now())

    async def _bench_client(self, client: int) -> None:
        """ab's loop: send, wait for the answer, send again at once, until the count or the time is up.

        Sends are numbered in the order the clients claim them, so totalRequests stays
        exact and URLs still take turns. The schedule only says when the run starts (send
        0's due time, when every client begins) and when sending ends.
        """
        session = self._transport.session()
        before_end = self._schedule.before_end
        try:
            if await self._wait_until_due(0):
                while not self._stopping and before_end(self._now()) and self._claim():
                    await self._send(session, self._sent - 1, paced=False)
        finally:
            await close_session(session)

    async def _session(self, client: int) -> tuple[Session, int]:
        """A client's session, and when its previous request ended (0: none yet): a new one, or the
        one a warm-up's client hands over (Handoff)."""
        handoff = self._load.take_sessions
        if handoff is None:
            return self._transport.session(), 0
        return await handoff.take(client)

    async def _release(self, client: int, session: Session, free_ns: int) -> None:
        """A client is done with its session: hand it on (a warm-up's), or close it."""
        handoff = self._load.give_sessions
        if handoff is None:
            await close_session(session)
        else:
            await handoff.give(client, session, free_ns)

    def _ready(self, n: int) -> bool:
        """Whether send n belongs to the run and the engine is still sending."""
        return not self._stopping and self._schedule.in_run(n)

    async def _wait_until_due(self, n: int) -> bool:
        """Sleep until send n is due, by the clock; False if the engine was stopped meanwhile.

        The clock may wake a client early (the loop's timers keep milliseconds), so it is read
        again after every wake-up rather than trusted.
        """
        due = self._schedule.due_ns(n)
        clock = self._clock
        task = asyncio.current_task()
        assert task is not None
        self._idle.add(task)
        try:
            while not self._stopping and clock.now_ns() < due:
                await clock.sleep_until(due)
        except asyncio.CancelledError:
            if not self._stopping:
                raise
        finally:
            self._idle.discard(task)
        return not self._stopping

    def skip_due_before(self, t_ns: int) -> None:
        """Count the sends that clients waiting for room let fall due before `t_ns` as skipped, now.

        The run's driver calls this as it closes an interval at `t_ns`, so the interval holds
        its own skips even when no request has ended since they fell due (a server that
        stalls every request): they are skipped whatever happens later, so there is no need
        to wait to know it. Never past a stop: what fell due after it was never in the run.
        """
        if self._stopped_ns is not None:
            t_ns = min(t_ns, self._stopped_ns)
        for client, k in self._waiting.items():
            self._waiting[client] = self._skip(client, k, self._schedule.last_in_run(client, k, t_ns - 1) + 1)

    async def _wait_for_room(self) -> bool:
        """Open model, max_in_flight reached: wait until a request in flight ends; False if stopped.

        Woken once per request that ends, not once per send that falls due meanwhile: at a
        million sends a second, waking for each only to skip it cost more than a core.
        """
        room = self._room
        assert room is not None
        task = asyncio.current_task()
        assert task is not None
        self._idle.add(task)
        try:
            while not self._stopping and self._in_flight >= self._max_in_flight:
                room.clear()
                await room.wait()
        except asyncio.CancelledError:
            if not self._stopping:
                raise
        finally:
            self._idle.discard(task)
        return not self._stopping

    def _claim(self, n: int | None = None) -> bool:
        """Take one send (paced: send n) from the totalRequests budget; False when it is spent."""
        limit = self._load.total_requests
        if limit and self._sent >= limit:
            return False
        self._sent += 1
        if n is not None:
            self._last_claimed = max(self._last_claimed, n)
        if self._sent == limit:
            self.stop()  # the run's sending ends with this send
            if n is not None:
                # Its time covers every send accounted for: the ones claimed, and those a late
                # client skips at the stop because they fell due before it (see _skip_missed).
                assert self._stopped_ns is not None
                last = max(self._last_claimed, self._schedule.last_send_by(self._stopped_ns))
                self._count_end_ns = self._schedule.slot_end_ns(last)
        return True

    async def _send(self, session: Session, n: int, paced: bool = True, counted: bool = False,
                    free_ns: int = 0) -> int:
        """Send n and sink its Result, even when cancelled midway; return when it ended.

        A paced send was due when the schedule says; an unpaced (bench) one is due when it
        is actually sent, so its latency is the same whether corrected or not. `counted`:
        the caller has already counted this send in flight. `free_ns`: when the client's
        previous request ended (closed model), so its lateness can be told from the server's.
        """
        requests, wheel = self._load.requests, self._wheel
        url_index = wheel[n % len(wheel)]
        due = self._schedule.due_ns(n) if paced else self._now()
        rate = self._load.hash_sample_rate
        if not counted:
            self._in_flight += 1
        try:
            result = await session.send(requests[url_index], rate > 0 and self._random.random() < rate)
        except asyncio.CancelledError:
            now = self._now()
            result = Result(start_ns=min(due, now), end_ns=now, error=ErrorKind.CANCELLED,
                            error_text="cancelled: still in flight when the run stopped")
            self._sink(self._stamp(result, n, url_index, due))
            raise
        except Exception as exc:  # noqa: BLE001 - a transport's bug must not cost a client its sends
            result = _crashed(exc, due, self._now())
        finally:
            self._in_flight -= 1
            if self._room is not None:
                self._room.set()
        result.seq, result.url_index, result.due_ns = n, url_index, due if paced else result.start_ns or due
        result.free_ns = free_ns
        self._sink(result)
        return result.end_ns

    def _skip(self, client: int, first: int, end: int, at_end: bool = False) -> int:
        """Count the client's sends from its `first`-th up to its `end`-th as skipped, in one record
        (`at_end`: it got to them only once sending was over, Skips.at_end); returns `end`."""
        if end > first:
            self._sink(Skips(self._schedule, client, first, end, at_end))
        return end

    def _now(self) -> int:
        return self._clock.now_ns()

    @staticmethod
    def _stamp(result: Result, n: int, url_index: int, due: int) -> Result:
        result.seq, result.url_index, result.due_ns = n, url_index, due
        return result


def _crashed(exc: Exception, due: int, now: int) -> Result:
    """A send whose transport raised: a failed Result of kind `other` naming the exception.

    Transports turn everything a server can do into a Result; an exception here is a bug
    in one. Letting it escape would end the client, and with it every send it still had
    to make, uncounted; a counted failure with the exception's type keeps the run going,
    keeps the books balanced, and still shows the bug on stderr, once per interval.
    """
    name, text = type(exc).__name__, failures.message([exc])
    return Result(start_ns=min(due, now), end_ns=now, error=ErrorKind.OTHER,
                  error_text=f"other: {name}" if text == name else f"other: {name}: {text}")
