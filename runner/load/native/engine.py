"""The native engine from Python: the C one (_engine) driven from the event loop, and whether it may send a run.

The C engine (core.c, engine.c) runs one process's clients in a thread of its own, with no
Python per request; this module only turns the run's parts into its configuration (a
records.Config) and drives its thread from the event loop: `run()` starts it and returns when
it has ended (its fd becomes readable: no polling), `stop()` and `cancel_in_flight()` pass on
at once, and take(), figures() and metrics() hand over what it counted as records.py's
records, which runner.stats.native turns into the recorder's.

It does what the Python engine's client does for HTTP/1.1, over TLS too (runner/load/tls.py's client,
made in C by tls.c from a records.TlsClient: the same files, checks, ALPN and failure texts),
and nothing else: `refusal()`, the one place that decides it, says why a run must take the
Python engine instead (a setting it does not do, HTTP/2, TLS where the engine was built
without OpenSSL's headers, ...); `soak validate`, the start-up line and docs/configuration.md's
`engine` row all say its answer. It hashes sampled bodies as the Python engine does (inflated
with `compress`), with runner.load.bodyhash's bounds and failure texts handed over as data.

Connections live as the Python engine's do (transport.Lifetime: a connection's last request
says `Connection: close`, decided in C at each send), and new ones rotate through a name's
addresses as transport.in_turn has them. The C engine resolves nothing: Python looks each
name up when the engine is made, and again as each answer expires, RESOLVE_TTL_NS after it
came, as the Python engine's Resolver keeps it (`_keep_resolved`, beside C's thread), and
hands C the whole list; or, when the lookup fails, the failure's text as the Python engine's
dial names it (wire.classify_connect_error), and C fails each new connection to
that origin as `dns` with it, as the Python engine fails each dial whose lookup failed, until
a lookup succeeds (asked again FAILED_RETRY_NS on; the Python engine asks at each dial). So a
name that stops resolving fails new connections from the same moment in both, give or take a
lookup's time (the Python engine's dial waits for a lookup that is due, C dials the last
answer until the lookup is back). One difference is left: a lookup slower than the timeout is
a `timeout` for each Python dial waiting on it, while C dials the last answer meanwhile. A name
that does not resolve at the start is refused here (`refusal`), so the Python engine,
which reports each failure, sends it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import os
import time
from collections.abc import Callable
from dataclasses import fields
from types import ModuleType
from typing import Any

from runner.config.settings import Settings, merge, settings_from
from runner.core.durations import format_duration
from runner.core.lazymethods import dataclass
from runner.load import bodyhash
from runner.load.failures import verify_mismatch
from runner.load.model import Load, Open, model_of, ramp_of
from runner.load.native.records import (
    AddressRecord,
    Config,
    MetricsCounts,
    OriginTls,
    RunFigures,
    Taken,
    Target,
)
from runner.load.request import Request
from runner.load.result import ErrorKind
from runner.load.schedule import Grid, Schedule
from runner.load.transport import (
    MAX_HEAD_BYTES,
    Address,
    Answers,
    TransportOptions,
    address_text,
    lookup_soon,
    numeric,
    resolve,
)
from runner.load.wire import classify_connect_error, wire_request

MetricsConfig = tuple[tuple[int, ...], int, tuple[int, ...]]  # (URL index -> slot, slots, bucket edges in ns)
# How soon a name whose lookup failed is asked again: the Python engine asks at each dial, so a
# name that resolves again is dialled at once there; here within this, at ten lookups a second.
FAILED_RETRY_NS = 100_000_000


def module() -> ModuleType | None:
    """The compiled engine, or None where it was not built (no compiler, not Linux)."""
    try:
        return importlib.import_module("runner.load.native._engine")
    except ImportError:
        return None


# What the native engine does with each ClientSpec and Pacing setting. Honoured: it sends as
# the Python engine does with it (the differential, lifetime and TLS tests hold it to that: the
# TLS files and insecure make tls.c's client as runner/load/tls.py makes Python's). Every other field, one
# added later included, refuses the native engine when it is not at its default: a run never
# quietly loses a setting to the engine that sends it.
HONOURS = frozenset({
    "engine", "timeout_ns", "no_reuse", "max_requests_per_connection", "max_connection_age_ns",
    "ca_bundle", "insecure", "client_cert", "client_key", "compress",  # client
    "mode", "qps", "concurrency", "interval_ns", "iterations", "duration_ns", "total_requests", "load_model",
    "max_in_flight", "precise",  # pace: precise needs no yielding in C, whose pacing timer is exact
    "stages",  # its ramp handed over as its due times (Ramp.due_times), up to MAX_RAMP_SENDS
    "warmup_ns",  # an engine of its own, whose clients hand their connections on to the run's (give_to)
})
# The most sends a ramp may make due for the native engine to send it: it is handed every one's due
# time (8 bytes each: 8 MB), worked out in Python before the run starts (about 1-2 us each).
MAX_RAMP_SENDS = 1_000_000
# Settings the native engine does not do, with what a refusal calls them.
REFUSES = {"transport": "the {value} transport", "http2": "HTTP/2"}


def refusal(settings: Settings, requests: list[Request], options: TransportOptions) -> str | None:
    """Why the native engine cannot send this run (HTTP/1.1, the `fast` transport's), or None if it can:
    a setting it does not do (HONOURS), or what the load needs (HTTP/2, TLS without OpenSSL's
    headers, a name that does not resolve)."""
    defaults = settings_from(merge())
    for group, default in ((settings.client, defaults.client), (settings.pace, defaults.pace)):
        for field in fields(group):
            value = getattr(group, field.name)
            if field.name in HONOURS or value == getattr(default, field.name):
                continue
            return REFUSES.get(field.name, "{name} (not in the native engine)").format(
                value=value, name=setting_name(field.name))
    ramp = ramp_of(settings.pace)
    if ramp is not None and ramp.total > MAX_RAMP_SENDS:
        return f"stages that make more than {MAX_RAMP_SENDS:,} sends due (these make {int(ramp.total):,})"
    return _load_refusal(Load(requests, model_of(settings.pace)), options)


def setting_name(field: str) -> str:
    """A settings field's name as the configuration spells it: backend_header -> backendHeader,
    warmup_ns -> warmup (a duration is kept in ns, written as "30s")."""
    first, *rest = field.removesuffix("_ns").split("_")
    return first + "".join(part.title() for part in rest)


def _load_refusal(load: Load, options: TransportOptions) -> str | None:
    """What of the load itself the native engine cannot send, if anything."""
    native = module()
    if native is None:
        return "the native engine is not built here"
    if not native.TLS and any(r.url.startswith("https:") for r in load.requests):
        return "TLS (the native engine was built without OpenSSL's headers: apt-get install libssl-dev)"
    if options.http2:
        return "HTTP/2"
    for host, port, _ in origins(load.requests, options):
        try:
            lookup(host, port, options.timeout_ns)
        except concurrent.futures.TimeoutError:  # an OSError too, since 3.11: first
            return f"{host} was not resolved within {format_duration(options.timeout_ns)}"
        except OSError as exc:
            return f"{host} does not resolve ({exc})"
    return None


@dataclass(frozen=True)
class Counting:
    """How the engine counts: what the Python recorder (and metrics tally) would be built with."""

    grid: Grid
    corrected: bool  # open model: latency from the due time
    unit_ns: int  # the latency CSV's unit (0: none)
    late_ns: int  # runner.stats.client.LATE_NS
    error_groups: int  # runner.stats.recorder.ERROR_GROUPS
    group_urls: int  # ... GROUP_URLS
    other_lengths: int  # ... OTHER_LENGTHS
    metrics: MetricsConfig | None = None  # runner.metrics.tally.MetricsTally.layout(), when metrics are on
    probe_ns: int = 0  # runner.stats.client.PROBE_PERIOD_NS: a timer firing later is a stall (0: none is)
    gap_ns: int = 0  # ... WATCH_GAP_NS: the timer fires at least this often, for the loop lag (0: only when due)
    url_slots: tuple[int, ...] = ()  # each URL's slot (targets.url_slots), as Recorder(slot_of=...): () for none
    hash_value: int = 0  # what a hashed body is checked against, as Recorder(hash_value=...)


class NativeEngine:
    """Runs the clients of one load on one schedule in the C engine's thread; made only for a run
    that refusal() let it send."""

    def __init__(self, schedule: Schedule, load: Load, options: TransportOptions, counting: Counting) -> None:
        native = module()
        assert native is not None, "the native engine is not built here"
        self._origins = origins(load.requests, options)
        self._core: Any = native.Engine(config(schedule, load, options, counting))
        self._steps: Callable[[int], int] | None = None
        self._step = 0

    def follow(self, first: int, told: Callable[[int], int]) -> None:
        """While it runs, call `told(done)` once the sends ended reach `first`, and again at each step
        `told` returns next, up to the last sends as the thread ends: C's thread tells the loop
        through an fd as it passes each step, so the loop wakes for a step, not ten times a second
        to read the count (which cost the main thread more CPU than its interval closes). Set
        before run()."""
        self._steps, self._step = told, first

    def _stepped(self) -> None:
        """The sends ended have reached the step asked for: tell, and ask for the next one."""
        assert self._steps is not None
        self._ask(self._steps(self.done))

    def _ask(self, step: int) -> None:
        """Ask C's thread to tell of `step`; one passed already is told now, not at the next one."""
        assert self._steps is not None
        while self._core.step_at(step):
            step = self._steps(self.done)
        self._step = step

    async def _keep_resolved(self) -> None:
        """Look each origin's name up again as its answer expires (Answers.expires), a failed one
        FAILED_RETRY_NS after it failed, and hand C what came of it; for as long as C's thread
        runs (see the module's docstring). IP addresses never change: they are not looked up."""
        due = {origin: _ANSWERS.expires(key[:2]) or 0 for origin, key in enumerate(self._origins)
               if numeric(*key[:2]) is None}
        while due:
            origin = min(due, key=due.__getitem__)
            wait_ns = due[origin] - time.monotonic_ns()
            if wait_ns > 0:
                await asyncio.sleep(wait_ns / 1e9)
                continue
            due[origin] = await self._look_up(origin)

    async def _look_up(self, origin: int) -> int:
        """Look the origin's name up now and give C its addresses, or the failure its new connections
        end as; when to look it up next."""
        key = self._origins[origin][:2]
        try:
            found = await resolve(*key)
        except OSError as exc:
            kind, text = classify_connect_error(exc)
            if kind is ErrorKind.DNS:
                self._core.set_addresses(origin, [], text)
            return time.monotonic_ns() + FAILED_RETRY_NS
        now = time.monotonic_ns()
        _ANSWERS.keep(key, found, now)
        if found:
            self._core.set_addresses(origin, [_address_tuple(a) for a in found])
        return now + _ANSWERS.ttl_ns

    @property
    def sent(self) -> int:
        return int(self._core.sent)

    @property
    def done(self) -> int:
        """Sends ended so far, each counted (a response or a failure): what progress reporters follow."""
        return int(self._core.done)

    @property
    def stopped_sending_ns(self) -> int | None:
        """As Engine.stopped_sending_ns: when sending stopped early (a stop, or the count spent)."""
        stopped: int | None = self._core.stopped_sending_ns
        return stopped

    async def run(self) -> None:
        """Run every client until the schedule ends, the count is reached, or a stop."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        fd = self._core.fileno()

        def readable() -> None:
            if not ended.done():
                ended.set_result(None)

        loop.add_reader(fd, readable)
        if self._steps is not None:
            loop.add_reader(self._core.step_fileno(), self._stepped)
            self._ask(self._step)
        resolving = asyncio.ensure_future(self._keep_resolved())
        try:
            self._core.start()
            try:
                await ended
            except asyncio.CancelledError:
                self._core.cancel()  # every request in flight counted, then the thread ends at once
                raise
        finally:
            loop.remove_reader(fd)
            if self._steps is not None:
                loop.remove_reader(self._core.step_fileno())
            resolving.cancel()
            self._core.join()
            if self._steps is not None and self.done >= self._step:  # the last, which may end the thread
                self._steps(self.done)
        if resolving.done() and not resolving.cancelled() and resolving.exception() is not None:
            raise resolving.exception()  # type: ignore[misc]  # a bug: reported, not left to the loop's log
        fatal = self.figures().fatal
        if fatal:
            raise OSError(fatal, f"the native engine stopped: {os.strerror(fatal)}")

    def stop(self, at_ns: int | None = None) -> None:
        """Send nothing more from `at_ns` (default: now); requests in flight may finish."""
        self._core.stop(time.monotonic_ns() if at_ns is None else at_ns)

    def cancel_in_flight(self) -> None:
        """Abandon requests still in flight; each is counted as a `cancelled` failure."""
        self._core.cancel()

    def drain_from(self, t_ns: int) -> None:
        """As Recorder.drain_from: results ending at or after `t_ns` are the drain."""
        self._core.drain_from(t_ns)

    def give_to(self, run: NativeEngine) -> None:
        """This engine sends a warm-up: each of its clients, once done with its connections, hands
        them on to the same client of `run`, which waits for them before it begins (engine.Handoff).
        Both unstarted, made for the same run's clients and URLs."""
        self._core.give_to(run._core)

    def take(self, k: int, *, final: bool = False, until_ns: int | None = None) -> Taken:
        """Interval k (the next untaken one) as Recorder.close files it, the skips of open clients due
        before `until_ns` (default: its end) counted in it first; with `final`, the rest of the run too."""
        taken: Taken = self._core.take(k, final=final, until_ns=until_ns)
        return taken

    def figures(self) -> RunFigures:
        """The run-wide figures so far, copied (live or after the end)."""
        figures: RunFigures = self._core.figures()
        return figures

    def metrics(self) -> MetricsCounts | None:
        """What it has counted for the metrics so far (MetricsTally's counts), if it counts them."""
        counts: MetricsCounts | None = self._core.metrics()
        return counts


def config(schedule: Schedule, load: Load, options: TransportOptions, counting: Counting) -> Config:
    """The C engine's configuration (records.Config; engine.c's header says what each field means)."""
    from runner.load.tls import native_client  # an https run's only (certifi, the files)

    model = load.model
    found = origins(load.requests, options)
    return Config(
        targets=targets(load.requests, options),
        model=model.name,
        clients=schedule.clients,
        max_in_flight=model.max_in_flight if isinstance(model, Open) else 1,
        total_requests=load.total_requests,
        start_ns=schedule.start_ns,
        qps=float(schedule.qps),
        end_ns=schedule.end_ns,
        stride=schedule.stride,
        offset=schedule.offset,
        dues=None if schedule.ramp is None else schedule.ramp.due_times(),
        grid_start_ns=counting.grid.start_ns,
        interval_ns=counting.grid.interval_ns,
        timeout_ns=options.timeout_ns,
        timeout_text=format_duration(options.timeout_ns),
        keep_alive=not options.no_reuse,
        corrected=counting.corrected,
        unit_ns=counting.unit_ns,
        late_ns=counting.late_ns,
        probe_ns=counting.probe_ns,
        gap_ns=counting.gap_ns,
        max_head=MAX_HEAD_BYTES,
        error_groups=counting.error_groups,
        group_urls=counting.group_urls,
        other_lengths=counting.other_lengths,
        metrics=counting.metrics,
        backend_header=options.backend_header,
        wheel=None if load.wheel is None or load.wheel == range(len(load.requests)) else tuple(load.wheel),
        url_slots=url_slots(counting.url_slots),
        origins=[[_address_tuple(a) for a in lookup(host, port)] for host, port, _ in found],
        max_requests=options.lifetime.max_requests,
        max_age_ns=options.lifetime.max_age_ns,
        hash_sample_rate=load.hash_sample_rate,
        hash_value=counting.hash_value,
        inflate=options.compress,
        inflate_step=bodyhash.INFLATE_STEP,
        max_inflated=bodyhash.MAX_INFLATED_BYTES,
        body_texts=bodyhash.body_texts(),
        tls=native_client(options) if any(https for _, _, https in found) else None,
        origins_tls=[origin_tls(host, port) if https else None for host, port, https in found],
    )


def origin_tls(host: str, port: int) -> OriginTls:
    """An https origin's TLS as C takes it: the name checked (an IP address checked as one, never
    sent as SNI) and, in CPython's words, what a certificate that does not cover it says."""
    is_ip = numeric(host, port) is not None
    return OriginTls(host=host, numeric=is_ip, mismatch=verify_mismatch(host, is_ip))


def url_slots(slot_of: tuple[int, ...]) -> tuple[tuple[int, ...], int] | None:
    """(slot of each URL, slots) for the C engine's per-URL tallies; None with one slot, as Recorder
    keeps no per_url then."""
    slots = max(slot_of, default=0) + 1
    return (slot_of, slots) if slots > 1 else None


def targets(requests: list[Request], options: TransportOptions) -> list[Target]:
    """Each URL's (request bytes, its bytes as a connection's last, is HEAD, body size, origin index)."""
    found = []
    known = {origin: index for index, origin in enumerate(origins(requests, options))}
    for request in requests:
        data, host, port, https = wire_request(request, not options.no_reuse, options.compress)
        last = data if options.no_reuse else wire_request(request, False, options.compress)[0]
        found.append((data, last, request.method == "HEAD", len(request.body), known[(host, port, https)]))
    return found


def origins(requests: list[Request], options: TransportOptions) -> list[tuple[str, int, bool]]:
    """The (host, port, https) of each origin the URLs name, in the order they first come: index =
    origin (a client's connections serve one origin each, as FastSession keys its idle ones)."""
    seen: dict[tuple[str, int, bool], None] = {}
    for request in requests:
        _, host, port, https = wire_request(request, not options.no_reuse, options.compress)
        seen.setdefault((host, port, https), None)
    return list(seen)


_ANSWERS = Answers()  # names looked up for the native engine, kept RESOLVE_TTL_NS as the Resolver keeps them


def lookup(host: str, port: int, timeout_ns: int | None = None) -> list[Address]:
    """host:port's addresses in the resolver's order: an IP address as it is, a name as last looked
    up if that was under RESOLVE_TTL_NS ago, else looked up now (socket.gaierror if it does not
    resolve, concurrent.futures.TimeoutError if no answer came within `timeout_ns`: a DNS server
    that never answers must not hold the start up for the resolver's own 30 s). Blocking: only
    before the run starts (the refusal, then the engine's config)."""
    known = numeric(host, port)
    if known is not None:
        return list(known)
    found = _ANSWERS.fresh((host, port), time.monotonic_ns())
    if found is None:
        answer = lookup_soon(host, port).result(None if timeout_ns is None else timeout_ns / 1e9)
        found = [(family, address) for family, _, _, _, address in answer]
        _ANSWERS.keep((host, port), found, time.monotonic_ns())
    return list(found)


def _address_tuple(address: Address) -> AddressRecord:
    """An address as the C engine takes it: (family, sockaddr, text)."""
    return address[0], address[1], address_text(address[1])
