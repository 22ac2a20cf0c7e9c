"""One place builds a run's parts, once, from its settings: everything below takes them ready-made.

`build` makes what one process of a run needs and checks, on the way, everything a run
refuses before it sends anything (so `soak validate` refuses exactly what a run does):
the URLs for a bench and its -c against its -n, this process's part of a split run, each
URL's request (headers from the environment, a body file), the HTTP client (TLS files that
cannot be used) and the latency CSV's path (a file made and removed, as only the kernel can
tell). The settings' own forms, addresses included, are the schema's, read by both alike.
Only what depends on the machine the run starts on is the run's alone: listening on
metricAddr (a port taken, an address it does not have) and the Linkerd proxy's readiness.
tests/integration/test_validate_agrees.py runs each case both ways.

Once running, the run asks its Parts for the schedule, the load and the recorder, which
depend on the moment the run starts (runner.run.engines builds the engine that sends it).
"""

from __future__ import annotations

import resource
import ssl
from collections.abc import Callable, Sequence
from typing import Literal

from runner.config.abflags import AB_FLAGS
from runner.config.files import check_output
from runner.config.settings import Settings
from runner.config.targets import Targets, as_targets, scope_problem, url_slots
from runner.core.errors import UsageError
from runner.core.lazymethods import dataclass
from runner.core.redact import Secrets
from runner.core.units import UNIT_NS
from runner.load.clients import TRANSPORTS
from runner.load.model import Bench, Load, LoadModel, Open, model_for, model_of, ramp_of, schedule_of
from runner.load.native.engine import refusal
from runner.load.request import Request, build_requests, origin
from runner.load.schedule import Grid, Schedule
from runner.load.shards import Shard, check_split, shard_of
from runner.load.tls import run_context
from runner.load.transport import Lifetime, Session, Transport, TransportOptions
from runner.stats.client import PaceTerms
from runner.stats.recorder import Recorder


@dataclass(frozen=True)
class Parts:
    """One process's run: its settings, URLs, part of the run, requests and HTTP client."""

    settings: Settings
    urls: Targets  # with their weights: which URL each send goes to
    url_source: str | None  # the list file the URLs came from, if any
    shard: Shard  # which part of the run this process sends
    requests: list[Request]  # one per URL, resolved once
    options: TransportOptions  # how every request is sent
    transport: Transport  # the Python engine's HTTP client (NO_CLIENT where the native engine sends)
    model: LoadModel  # this process's load model, with its share of the run's maxInFlight
    engine: EngineChoice  # which engine sends: "native" or "python", and why (engine_for)

    def schedule(self, start_ns: int) -> Schedule:
        """When each of this process's sends is due, from the run's start to its planned end."""
        return schedule_of(self.settings.pace, self.shard, start_ns)

    def load(self) -> Load:
        """What the engine does beyond the schedule: this process's share of the run's limits."""
        return Load(
            requests=self.requests,
            model=self.model,
            total_requests=self.shard.share(self.settings.pace.total_requests),
            hash_sample_rate=self.settings.report.hash_sample_rate,
            wheel=self.urls.wheel,
        )

    def recorder(self, grid: Grid, schedule: Schedule) -> Recorder:
        """The Python engine's counts and histograms on the run's interval grid, each interval's
        goal from the schedule; secret values kept out of failure texts."""
        s = self.settings
        return Recorder(grid, self.model, due=schedule.sends_due if self.model.paced else None,
                        hash_value=s.report.hash_value, unit_ns=self.unit_ns, shown=self.shown,
                        slot_of=url_slots(self.urls).slot_of, backends=bool(s.report.backend_header),
                        terms=self.pace_terms)

    @property
    def pace_terms(self) -> PaceTerms:
        """What judging each interval's pace needs of this process's run (stats.client.pace_of)."""
        return PaceTerms.of(self.settings, self.shard)

    @property
    def unit_ns(self) -> int | None:
        """The latency CSV's unit, when there is one: its histogram is kept in it."""
        report = self.settings.report
        return UNIT_NS[report.latency_unit] if report.report_latencies_csv else None

    @property
    def shown(self) -> Callable[[str], str]:
        """How a server's text is shown: with every secret value of the requests hidden (redact.Secrets)."""
        return Secrets(value for request in self.requests for value in request.hidden).shown


def build(settings: Settings, urls: Sequence[str], source: str | None, shard: Shard | None = None) -> Parts:
    """The parts of this process's run; UsageError for anything a run refuses before sending.

    `shard`: this process's part, when the caller knows it (a local worker); else it comes
    from the settings and the Indexed Job's index.
    """
    if isinstance(model_of(settings.pace), Bench) and len(urls) != 1:
        raise UsageError(f"bench mode takes exactly one URL, as ab does; got {len(urls)}")
    targets = as_targets(urls)
    check_scopes(settings, targets)  # a threshold scoped to a URL the run does not send to
    shard = shard if shard is not None else split_of(settings)
    found = {origin(url) for url in urls}
    origins = len(found)
    check_open_files(settings, shard, origins)  # more connections than the process may open
    requests = build_requests(settings, urls)  # bad headers or body files stop here
    options = options_for(settings, shard, origins, https=any(scheme == "https" for scheme, _, _ in found))
    tls = run_context(options)  # TLS files checked here, whichever engine sends
    for name, path in (("reportLatenciesCSV", settings.report.report_latencies_csv), ("junit", settings.report.junit)):
        if path:
            check_output(path, name)  # opened (and emptied) only once the run starts
    engine = engine_for(settings, requests, options)  # engine: native refuses here what it cannot send
    # The Python engine's client only where it sends: a run the native engine sends loads none.
    transport = transport_for(settings, options, tls) if engine.name == "python" else NO_CLIENT
    return Parts(settings, targets, source, shard, requests, options, transport, model_for(settings.pace, shard),
                 engine)


def check_scopes(settings: Settings, urls: Sequence[str]) -> None:
    """UsageError for a threshold scoped to a URL that the run cannot judge it on (targets.scope_problem)."""
    for rule in settings.thresholds.rules:
        problem = "" if rule.url is None else scope_problem(rule.url, urls)
        if problem:
            raise UsageError(f'thresholds: "{rule.text}" {problem}')


@dataclass(frozen=True)
class EngineChoice:
    """Which engine sends a run, and why not the other: said at start-up and in the summary."""

    name: Literal["native", "python"]
    why: str  # why the Python engine sends an `auto` run ("" when the native engine does, or when asked for)


def engine_for(settings: Settings, requests: list[Request], options: TransportOptions) -> EngineChoice:
    """The engine the settings ask for: `auto` takes the native one wherever it can send the load
    (runner.load.native.engine.refusal decides where).

    `engine: native` for a load it cannot send is refused, in one line, before anything is sent:
    a run never changes what measures it behind the configuration's back.
    """
    choice = settings.client.engine
    if choice == "python":
        return EngineChoice("python", "")
    why = refusal(settings, requests, options)
    if why is None:
        ramp = ramp_of(settings.pace)
        if ramp is not None:  # the native engine's due times, worked out before the run's start is chosen
            ramp.due_times()
        return EngineChoice("native", "")
    if choice == "native":
        raise UsageError(f"engine: native cannot send this run: {why}; use engine: auto or python")
    return EngineChoice("python", why)


def split_of(settings: Settings) -> Shard:
    """This process's part of the run, checked: every part needs a client and its share of the limits."""
    pace, split = settings.pace, settings.split
    model = model_of(pace)
    shard = shard_of(split.shards, split.shard, split.workers)
    bench = isinstance(model, Bench)
    if bench and shard.count > 1:
        raise UsageError("mode: bench runs in one pod; shards split soaks only (local workers split a bench too)")
    if bench:  # ab's words for ab's flags
        for name, value in (("concurrency", pace.concurrency), ("totalRequests", pace.total_requests)):
            if value and value < split.workers:
                raise UsageError(f"{AB_FLAGS[name]}: {value} is not allowed with workers: {split.workers}; must be at "
                                 f"least the number of workers, so that every worker has its share")
        if pace.total_requests and pace.concurrency > pace.total_requests:  # `soak bench` and `--mode bench` alike
            raise UsageError(f"{AB_FLAGS['concurrency']}: {pace.concurrency} is not allowed; must be at most the "
                             f"number of requests ({AB_FLAGS['totalRequests']} {pace.total_requests}), as in ab")
    check_split(shard, pace.concurrency, pace.total_requests, pace.max_in_flight if isinstance(model, Open) else None,
                settings.report.no_latency_summary)
    return shard


# The files a run keeps open beside its connections: stdio, the event loop's own, the kernel
# timer, the DNS threads', a metrics server, a latency CSV, the Linkerd probe, and room to spare.
OWN_FILES = 64


def connections_needed(settings: Settings, shard: Shard, origins: int) -> tuple[str, int, int]:
    """The setting that sizes this process's connections, its value, and how many connections it
    may hold open at once: a socket each, and so a file each.

    Each client keeps a connection to each origin it sends to; in the open model up to
    maxInFlight requests overlap, each on a connection of its own (or more clients than that,
    each with one left open)."""
    pace = settings.pace
    name, value = "concurrency", pace.concurrency
    if isinstance(model_of(pace), Open) and pace.max_in_flight > pace.concurrency:
        name, value = "maxInFlight", pace.max_in_flight
    return name, value, shard.share(value) * origins


def open_files_refusal(name: str, value: int, needed: int, limit: int) -> str | None:
    """Why a run cannot hold `needed` connections under an open-file limit of `limit`; None if it can."""
    if limit == resource.RLIM_INFINITY or needed + OWN_FILES <= limit:
        return None
    many = f" ({needed} connections in this process)" if needed != value else ""
    return (f"{name}: {value}{many} is more than this process can keep open: its open-file limit (ulimit -n) is "
            f"{limit}, of which {OWN_FILES} are kept for its own files; raise the limit or lower {name}")


def check_open_files(settings: Settings, shard: Shard, origins: int) -> None:
    """UsageError if the run would need more connections than the process may open.

    Past the limit, every connect fails with EMFILE, and in the open model the sends waiting
    to connect pile up without bound (1.3 GB and no interval line in 40 s). As Go does for
    slow_cooker, the soft limit is first raised as far as the hard limit allows.
    """
    name, value, needed = connections_needed(settings, shard, origins)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if open_files_refusal(name, value, needed, soft) is not None and soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    refusal = open_files_refusal(name, value, needed, soft)
    if refusal is not None:
        raise UsageError(refusal)


def options_for(settings: Settings, shard: Shard, origins: int = 1, https: bool = True) -> TransportOptions:
    """How every request is sent, whichever engine and client send it; `origins`: the servers
    (scheme, host, port) the URLs name, each of which a client keeps a connection to; `https`:
    whether any of them is https (without one, and no TLS file named, no TLS context is made:
    tls.run_context)."""
    client, model = settings.client, model_for(settings.pace, shard)
    return TransportOptions(
        timeout_ns=client.timeout_ns,
        no_reuse=client.no_reuse,
        compress=client.compress,
        max_connections=model.max_in_flight if isinstance(model, Open) else 1,
        ca_bundle=client.ca_bundle,
        insecure=client.insecure,
        client_cert=client.client_cert,
        client_key=client.client_key,
        http2=client.http2,
        origins=origins,
        lifetime=Lifetime(client.max_requests_per_connection, client.max_connection_age_ns),
        backend_header=settings.report.backend_header,
        https=https,
    )


class _NoClient:
    """Parts.transport in a run the native engine sends: never asked for a session."""

    def session(self) -> Session:
        raise AssertionError("the native engine sends this run: it has no Python client")


NO_CLIENT: Transport = _NoClient()


def transport_for(settings: Settings, options: TransportOptions, tls: ssl.SSLContext | None) -> Transport:
    """The Python engine's HTTP client, the one the settings name, on the run's TLS context."""
    return TRANSPORTS[settings.client.transport](options, tls)
