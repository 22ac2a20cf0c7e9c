"""What crosses between Python and the native engine, declared once: each record's fields in order.

The C side (engine.c) has one table per record, the same fields in the same order; as the
compiled engine loads, it checks each class here against its table (a TypeError naming the
first field that differs) and builds its answers as instances of these classes, field by
field, with no dict and no key read by name. Python hands it a Config (an https run's with a
TlsClient and an OriginTls per https origin); it answers take() with a Taken, figures() with
RunFigures, metrics() with MetricsCounts. Who reads them: the run's
engine-run (runner.run.engines), the stats layer's conversion into the recorder's records
(runner.stats.native), and the metrics' tally (runner.metrics.tally).

A histogram travels as HistogramCounts, hdrhistogram's own counts layout
(LatencyHistogram.from_counts takes the slots up to its max as they are).

Each record is a Record: a tuple whose fields are its class's annotations, in order, read by
name. Not a NamedTuple: making the eight classes cost every process 3 ms of its start (11 M
instructions, 3% of a short bench), where a Record costs a few microseconds each.
"""

from __future__ import annotations

from array import array
from collections import _tuplegetter  # type: ignore[attr-defined]  # namedtuple's own field reader
from typing import Any, ClassVar, Self, dataclass_transform


@dataclass_transform(frozen_default=True)
class Record(tuple[Any, ...]):
    """A tuple whose fields are the annotations of its class, in order, each read by name: made
    by name or in order like a NamedTuple (and seen so by type checkers), field for field one of
    engine.c's tables. A subclass says `__slots__ = ()`, so a record is a tuple and no more."""

    __slots__ = ()

    _fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls) -> None:
        cls._fields = tuple(cls.__dict__.get("__annotations__", {}))
        for index, name in enumerate(cls._fields):
            setattr(cls, name, _tuplegetter(index, f"Field {index}: {name}"))  # as fast as a dict's []

    def __new__(cls, *values: Any, **named: Any) -> Self:
        fields = cls._fields
        if named:
            missing = [name for name in fields[len(values):] if name not in named]
            unknown = set(named) - set(fields[len(values):])
            if missing or unknown:
                raise TypeError(f"{cls.__name__}: {'missing ' + ', '.join(missing) if missing else ''}"
                                f"{'; ' if missing and unknown else ''}"
                                f"{'unknown ' + ', '.join(sorted(unknown)) if unknown else ''}")
            values = (*values, *(named[name] for name in fields[len(values):]))
        if len(values) != len(fields):
            raise TypeError(f"{cls.__name__} takes {len(fields)} fields, not {len(values)}")
        return tuple.__new__(cls, values)

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True))
        return f"{type(self).__name__}({shown})"

    def _replace(self, **changed: Any) -> Self:
        """A copy with some fields changed, as NamedTuple's."""
        return type(self)(**{**dict(zip(self._fields, self, strict=True)), **changed})

AddressRecord = tuple[int, tuple[Any, ...], str]  # (family, sockaddr as connect() takes it, its text)
Target = tuple[bytes, bytes, bool, int, int]  # (request, the same as a connection's last, is HEAD, body bytes, origin)
Stall = tuple[int, int]  # a pacing timer's firing later than probe_ns: (due_ns, ran_ns)
Backend = tuple[bytes, int]  # a backendHeader value as received, and its responses


class Config(Record):
    """Everything the engine is made from (engine.c's header says each field's meaning)."""

    __slots__ = ()

    targets: list[Target]  # index = URL index
    model: str  # "closed" | "open" | "bench"
    clients: int
    max_in_flight: int  # open model
    total_requests: int  # 0: no limit
    start_ns: int  # runner.load.schedule.Schedule, from here to offset
    qps: float
    end_ns: int | None
    stride: int
    offset: int
    dues: array[int] | None  # a ramp's due times (Ramp.due_times, array("q")); None: the constant qps
    grid_start_ns: int  # runner.load.schedule.Grid
    interval_ns: int
    timeout_ns: int
    timeout_text: str  # format_duration's
    keep_alive: bool
    corrected: bool  # latency from the due time (open model)
    unit_ns: int  # the latency CSV's unit; 0: none
    late_ns: int  # runner.stats.client.LATE_NS, and the other constants the recorder counts by
    probe_ns: int
    gap_ns: int
    max_head: int
    error_groups: int
    group_urls: int
    other_lengths: int
    metrics: tuple[tuple[int, ...], int, tuple[int, ...]] | None  # (slot of each URL, slots, bucket edges in ns)
    backend_header: str  # "" for none
    wheel: tuple[int, ...] | None  # the URL of each send of a turn (Targets.wheel); None: in order
    url_slots: tuple[tuple[int, ...], int] | None  # (slot of each URL, slots) for per-URL tallies; None: one slot
    origins: list[list[AddressRecord]]  # index = origin: its addresses in the resolver's order
    max_requests: int  # transport.Lifetime; 0: no limit
    max_age_ns: int
    hash_sample_rate: float  # each send's body hashed when random() < this; 0: none
    hash_value: int  # what a hashed body is checked against (hash_mismatches)
    inflate: bool  # compress: a hashed body that says gzip is inflated first
    inflate_step: int  # runner.load.bodyhash.INFLATE_STEP
    max_inflated: int  # ... MAX_INFLATED_BYTES
    body_texts: tuple[str, str, str, str]  # ... BODY_TEXTS: what a hashed body's failures are called
    tls: TlsClient | None  # the run's TLS client; None: no origin is https
    origins_tls: list[OriginTls | None]  # index = origin: its TLS, None for plain HTTP


class TlsClient(Record):
    """The run's TLS client (tls.c's), as runner.load.tls.client_context makes Python's: the same
    files (checked by Python first, which names a bad one) and the texts its failures are named by."""

    __slots__ = ()

    ca_file: str  # caBundle, else certifi's bundle
    cert_file: str  # clientCert; "": none
    key_file: str  # clientKey; "": the key is in cert_file
    insecure: bool  # verify nothing
    ciphers: str  # Python's default cipher list, for TLS 1.2
    verify_failed: str  # what a failed certificate check's text begins with
    reasons: list[tuple[int, int, str]]  # (library, reason, text): OpenSSL's codes and each one's failure text


class OriginTls(Record):
    """An https origin's TLS: the name its certificate must cover (sent as SNI unless an IP address)."""

    __slots__ = ()

    host: str
    numeric: bool  # host is an IP address: checked as one, never sent as SNI
    mismatch: str  # the text of a certificate that does not cover host (failures.verify_mismatch)


class HistogramCounts(Record):
    """A histogram: its counts (a writable buffer in hdrhistogram's layout; None when empty) and sums."""

    __slots__ = ()

    counts: Any
    total: int  # values recorded
    min: int
    max: int
    sum: int
    sum_sq: int


class GroupCounts(Record):
    """One group of failures alike (recorder.ErrorGroup): its kind and pattern, and an example."""

    __slots__ = ()

    kind: str
    pattern: str
    total: int  # failures in it
    text: str
    url: int
    urls: tuple[int, ...]
    more_urls: bool
    varied: bool


class TallyCounts(Record):
    """One interval's counts (recorder.Tally's), the drain's, or a URL slot's for the run."""

    __slots__ = ()

    good: int
    bad: int
    failed: int
    skipped: int
    skipped_at_end: int  # of the skipped, those a client got to only once sending was over
    late: int
    late_max_ns: int
    delayed_max_ns: int  # the slowest response whose latency the client's delay may be in
    kernel_clocked: int
    bytes_in: int
    bytes_out: int
    statuses: dict[int, int]
    errors: dict[str, int]
    groups: list[GroupCounts]
    latency: HistogramCounts
    # connect_new, tls_new (the new connections made over TLS only), ttfb, body, reused
    phases: tuple[HistogramCounts, HistogramCounts, HistogramCounts, HistogramCounts, int]
    backends: list[Backend]  # in the order met
    other_backends: int  # responses beyond the values kept
    opened: int  # a URL slot's: connections its sends opened, and closed
    closed: int
    hash_checked: int  # responses whose body was hashed ...
    hash_mismatches: int  # ... and of those, the ones whose hash was not hashValue


class Taken(Record):
    """One interval, taken: its counts, and what the engine's timer and connections did meanwhile."""

    __slots__ = ()

    tally: TallyCounts | None  # None: nothing landed in it
    later: list[TallyCounts]  # final only: the later intervals' that held anything, in order
    drain: TallyCounts | None  # final only: what came back after the end, if anything
    drain_end_ns: int
    loop_lag: HistogramCounts  # the timer's lateness since the last take (ClientMeter.loop_lags)
    stalls: list[Stall]  # ... its firings later than probe_ns, in order (ClientMeter.tick)
    next_tick_ns: int | None  # when it fires next; None once the thread has ended
    opened: int  # connections opened and closed since the last take
    closed: int
    per_url: list[TallyCounts | None] | None  # final, with url_slots: each slot's tally for the run


class BenchCounts(Record):
    """ab's figures (recorder.BenchTally's)."""

    __slots__ = ()

    waiting: HistogramCounts
    total_reused: HistogramCounts
    connect_new: HistogramCounts
    processing_new: HistogramCounts
    total_new: HistogramCounts
    document_length: int | None
    length_mismatches: int
    kept_alive: int
    header_bytes: int
    server: str | None
    last_end_ns: int
    first_response_ns: int
    server_ns: int
    other_lengths: dict[int, int]


class RunFigures(Record):
    """The run's figures so far, copied (live or after the end)."""

    __slots__ = ()

    sent: int
    stopped_sending_ns: int | None
    send_lag: HistogramCounts | None  # None where the run keeps none
    lateness: HistogramCounts | None
    uncorrected: HistogramCounts | None
    in_unit: HistogramCounts | None
    connections: int  # new connections that carried a response
    tls_connections: dict[str, int]  # ... of them over TLS, by version ("TLSv1.3"): the versions met only
    opened: int  # sockets opened and closed
    closed: int
    finished: bool  # the thread has ended
    fatal: int  # errno of what ended the thread early; 0 if nothing did
    bench: BenchCounts | None


class MetricsCounts(Record):
    """A MetricsTally's counts (runner.metrics.tally), as the engine counts them while it runs."""

    __slots__ = ()

    skipped: int
    late: int
    opened: int
    closed: int
    statuses: list[list[int]]  # per slot, by status
    failures: dict[tuple[int, str], int]  # (slot, error kind) -> failed sends
    good: list[list[int]]  # per slot, per place among the bucket edges
    bad: list[list[int]]
    good_ns: list[int]  # per slot, the sum of latencies
    bad_ns: list[int]
