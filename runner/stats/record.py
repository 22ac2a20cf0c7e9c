"""The shard record: a run's results as JSON-ready data, and back, checked.

A shard (a pod of an Indexed Job, or a local worker) prints, inside its JSON summary, a
`shard` record: every interval's whole tally (counts, error groups, and its HDR histogram
with the exact min, max and sums) and the run's other histograms, so that the shards can
be merged exactly later (runner.stats.merge). Everything about that record is here: how a
tally, a histogram, an interval and a run are written, how they are read back, and the
checks that name the first value a damaged or edited log holds that a merge could not use.
"""

from __future__ import annotations

import binascii
import json
import math
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runner.config.schema import schema, settings_names, shortened, validate
from runner.config.settings import merge, settings_from
from runner.core.errors import UsageError
from runner.core.lazymethods import dataclass
from runner.core.redact import printable
from runner.stats.client import ClientFigures
from runner.stats.histogram import HIGHEST_NS, LatencyHistogram
from runner.stats.phases import PhaseTally
from runner.stats.recorder import GROUP_URLS, BenchTally, ErrorGroup, Interval, Tally, error_pattern
from runner.stats.runinfo import RunInfo, RunSummary, Warmup

# A tally's counts: attribute, and key in the record.
_COUNTS = (("good", "good"), ("bad", "bad"), ("failed", "failed"), ("skipped", "skipped"),
           ("hash_checked", "hashChecked"), ("hash_mismatches", "hashMismatches"),
           ("bytes_in", "bytesIn"), ("bytes_out", "bytesOut"))
# Counts an earlier version did not record: 0 when a record has none.
_LATER_COUNTS = (("late", "late"), ("late_max_ns", "lateMaxNs"), ("kernel_clocked", "kernelClocked"),
                 ("connections_opened", "connectionsOpened"), ("connections_closed", "connectionsClosed"),
                 ("skipped_at_end", "skippedAtEnd"))


# --- histograms, error groups, tallies ------------------------------------------------------


def histogram_record(histogram: LatencyHistogram) -> dict[str, Any]:
    """Everything recorded, as JSON-ready data: the buckets and the exact statistics.

    Percentiles of merged shards come from the merged buckets, never from averaged percentiles.
    """
    return {"hdr": histogram.encode() if histogram.count else "", "min": histogram.min, "max": histogram.max,
            "sum": histogram.sum, "sumSq": histogram.sum_sq}


def histogram_from_record(record: dict[str, Any]) -> LatencyHistogram:
    """The histogram a histogram_record() was made from; ValueError if the record is not one."""
    try:
        return LatencyHistogram.restored(record["hdr"], int(record["min"]), int(record["max"]), int(record["sum"]),
                                         int(record["sumSq"]))
    except (KeyError, TypeError, ValueError, IndexError, zlib.error, binascii.Error) as e:
        raise ValueError(f"not a latency histogram record: {e}") from None


def error_group_record(kind: str, pattern: str, group: ErrorGroup) -> dict[str, Any]:
    return {"kind": kind, "pattern": pattern, "count": group.count, "text": group.text, "url": group.url,
            "urls": sorted(group.urls), "moreUrls": group.more_urls, "varied": group.varied}


def error_group_from_record(record: dict[str, Any]) -> tuple[tuple[str, str], ErrorGroup]:
    """(key, group) of an error_group_record(); KeyError, TypeError or ValueError if it is not one."""
    kind, pattern, text = record["kind"], record["pattern"], record["text"]
    if not all(isinstance(value, str) for value in (kind, pattern, text)):
        raise TypeError("an error group's kind, pattern and text are strings")
    kind, pattern, text = printable(kind), printable(pattern), printable(text)  # as a run shows them
    urls = {int(u) for u in record["urls"]}
    if len(urls) > GROUP_URLS:
        raise ValueError(f"more than {GROUP_URLS} URLs in an error group")
    group = ErrorGroup(int(record["count"]), text, int(record["url"]), urls, bool(record["moreUrls"]),
                       bool(record["varied"]))
    return (kind, pattern), group


def tally_record(tally: Tally) -> dict[str, Any]:
    """The whole tally as JSON-ready data, so another process can merge it exactly."""
    record: dict[str, Any] = {key: getattr(tally, name) for name, key in (*_COUNTS, *_LATER_COUNTS)}
    record["statuses"] = {str(code): n for code, n in sorted(tally.statuses.items())}
    record["errors"] = dict(sorted(tally.errors.items()))
    record["backends"] = dict(sorted(tally.backends.items()))
    record["errorGroups"] = [error_group_record(*key, group) for key, group in sorted(tally.error_groups.items())]
    record["latency"] = histogram_record(tally.latency)
    record["delayedMaxNs"] = tally.delayed_max_ns
    if tally.phases is not None:
        record["phases"] = phases_record(tally.phases)
    return record


# A tally's phase histograms (runner.stats.phases.PhaseTally): attribute, and key in the record.
_PHASE_HISTOGRAMS = (("dns_new", "dnsNew"), ("connect_new", "connectNew"), ("tls_new", "tlsNew"), ("ttfb", "ttfb"),
                     ("body", "body"))


def phases_record(phases: PhaseTally) -> dict[str, Any]:
    """The phase histograms, whole, and the count of responses on reused connections."""
    record: dict[str, Any] = {key: histogram_record(getattr(phases, name)) for name, key in _PHASE_HISTOGRAMS}
    record["reused"] = phases.reused
    return record


def phases_from_record(record: Any) -> PhaseTally:
    """The PhaseTally a phases_record() was made from; ValueError if the record is not one."""
    if not isinstance(record, dict):
        raise ValueError("not a phases record")
    phases = PhaseTally()
    for name, key in _PHASE_HISTOGRAMS:
        setattr(phases, name, histogram_from_record(record.get(key, {})))
    reused = record.get("reused")
    if type(reused) is not int or reused < 0:
        raise ValueError(f"not a phases record: reused {_shown(reused)}")
    phases.reused = reused
    return phases


def tally_from_record(record: dict[str, Any]) -> Tally:
    """The tally a tally_record() was made from; ValueError if the record is not one."""
    tally = Tally()
    try:
        for name, key in _COUNTS:
            setattr(tally, name, int(record[key]))
        for name, key in _LATER_COUNTS:
            setattr(tally, name, int(record.get(key, 0)))
        tally.statuses = Counter({int(code): int(n) for code, n in record["statuses"].items()})
        tally.errors = Counter({str(kind): int(n) for kind, n in record["errors"].items()})
        for backend, n in record.get("backends", {}).items():  # none in an earlier version's record
            tally.count_backend(printable(str(backend)), int(n))  # as a run shows it: a log may hold anything
        if "errorGroups" not in record and "errorTexts" in record:
            _error_texts(tally, record["errorTexts"])
        else:
            for entry in record["errorGroups"]:
                where, group = error_group_from_record(entry)
                tally.error_groups[where] = group
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"not a tally record: {e}") from None
    tally.latency = histogram_from_record(record["latency"] if isinstance(record, dict) else {})
    if isinstance(record, dict) and record.get("phases") is not None:  # none in an earlier version's record
        tally.phases = phases_from_record(record["phases"])
    delayed = record.get("delayedMaxNs") if isinstance(record, dict) else None
    # An earlier version's record does not say which responses may hold the client's delay: any may.
    tally.delayed_max_ns = tally.latency.max if delayed is None else _whole_ns(delayed)
    return tally


def _whole_ns(value: Any) -> int:
    if type(value) is not int or not 0 <= value <= HIGHEST_NS:
        raise ValueError(f"not a tally record: delayedMaxNs {_shown(value)}")
    return value


def _error_texts(tally: Tally, entries: list[list[Any]]) -> None:
    """Failures as an earlier version recorded them, `[url, text, count]` without their kind, grouped
    as now: a shard's summary saved before can still be merged."""
    for url, text, n in entries:
        shown = printable(str(text))
        tally.add_group(("", error_pattern(shown)), ErrorGroup(int(n), shown, int(url), {int(url)}))


# A bench's phase histograms: attribute, and key in the record.
_BENCH_HISTOGRAMS = (("waiting", "waiting"), ("total_reused", "totalReused"), ("connect_new", "connectNew"),
                     ("processing_new", "processingNew"), ("total_new", "totalNew"))
_BENCH_COUNTS = (("length_mismatches", "lengthMismatches"), ("kept_alive", "keptAlive"),
                 ("header_bytes", "headerBytes"))
_BENCH_MOMENTS = (("first_response_ns", "firstResponseNs"), ("server_ns", "serverNs"),
                  ("last_end_ns", "lastEndNs"))


def bench_record(bench: BenchTally, start_ns: int) -> dict[str, Any]:
    """A local worker's ab figures, whole, its moments as offsets from the run's start (null: none yet).

    Only local workers send it, over their pipes: a bench is not split over pods, so this
    record is never printed and never read back from a log.
    """
    record: dict[str, Any] = {key: histogram_record(getattr(bench, name)) for name, key in _BENCH_HISTOGRAMS}
    record |= {key: getattr(bench, name) for name, key in _BENCH_COUNTS}
    record |= {key: getattr(bench, name) - start_ns if getattr(bench, name) else None for name, key in _BENCH_MOMENTS}
    record |= {"documentLength": bench.document_length, "server": bench.server,
               "otherLengths": {str(n): count for n, count in sorted(bench.other_lengths.items())}}
    return record


def bench_from_record(record: dict[str, Any], start_ns: int) -> BenchTally:
    """The BenchTally a bench_record() was made from, its moments on a clock whose run started at `start_ns`."""
    bench = BenchTally(document_length=record["documentLength"], server=record["server"])
    for name, key in _BENCH_HISTOGRAMS:
        setattr(bench, name, histogram_from_record(record[key]))
    for name, key in _BENCH_COUNTS:
        setattr(bench, name, int(record[key]))
    for name, key in _BENCH_MOMENTS:
        setattr(bench, name, 0 if record[key] is None else int(record[key]) + start_ns)
    bench.other_lengths = Counter({int(n): int(count) for n, count in record["otherLengths"].items()})
    return bench


MAX_NS = 2**63 - 1  # a time offset a shard can have written (int64 nanoseconds)


MAX_START_WALL = 1e11  # seconds since 1970 (the year 5138): a later start is no start time


# --- intervals and runs -------------------------------------------------------------------


def interval_record(info: RunInfo, interval: Interval) -> dict[str, Any]:
    """One closed interval of a shard, whole: times as offsets from the run's start, and its tally."""
    return {
        "iter": interval.index,
        "startNs": interval.start_ns - info.start_ns,
        "endNs": interval.end_ns - info.start_ns,
        "sendingEndNs": None if interval.sending_end_ns is None else interval.sending_end_ns - info.start_ns,
        "tally": tally_record(interval.tally),
        "client": client_record(interval.client),
    }


def client_record(client: ClientFigures) -> dict[str, Any]:
    """The client's own figures over a span, to merge: the busiest process's CPU, every loop-lag sample."""
    record: dict[str, Any] = {"cpuShare": round(client.cpu_share, 6), "loopLag": histogram_record(client.loop_lag),
                              "saturated": client.saturated, "saturatedIntervals": client.saturated_intervals}
    if client.lateness is not None:
        record["lateness"] = histogram_record(client.lateness)
    return record


def client_from_record(record: Any) -> ClientFigures:
    """The figures of a client_record(); empty ones from a record that has none (an earlier version)."""
    if not isinstance(record, dict):
        return ClientFigures()
    try:
        lateness = record.get("lateness")
        return ClientFigures(float(record["cpuShare"]), histogram_from_record(record["loopLag"]),
                             bool(record["saturated"]), int(record.get("saturatedIntervals", 0)),
                             None if lateness is None else histogram_from_record(lateness))
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"not a client record: {e}") from None


def run_record(summary: RunSummary, intervals: list[dict[str, Any]]) -> dict[str, Any]:
    """A shard's whole run: which shard, its intervals, and what only the run knows."""
    info = summary.info
    record: dict[str, Any] = {
        "index": info.shard.index,
        "count": info.shard.count,
        "worker": info.shard.worker,
        "workers": info.shard.workers,
        "startWall": info.wall_start,
        "urls": info.urls,
        "urlSource": info.url_source,
        "endNs": summary.end_ns - info.start_ns,
        "sendingEndNs": summary.sending_end_ns - info.start_ns,
        "stopReason": summary.stop_reason,
        "engine": info.engine,
        "cpuSeconds": summary.cpu_seconds,
        "maxRssBytes": summary.max_rss_bytes,
        "uncorrected": _histogram_record(summary.uncorrected),
        "sendLag": _histogram_record(summary.send_lag),
        "inUnit": _histogram_record(summary.in_unit),
        "connections": summary.connections,
        "client": None if summary.client is None else client_record(summary.client),
        "drain": None if summary.drain is None else tally_record(summary.drain),
        "perUrl": None if summary.per_url is None else [tally_record(t) for t in summary.per_url],
        "warmup": None if summary.warmup is None else warmup_record(summary.warmup),
        "intervals": intervals,
    }
    # Here, as the bench's figures are, goes any other run-only figure that local workers must
    # merge (merge.merged_summary, and workers._Gather for what a dead worker sent before).
    if summary.bench is not None:
        record["bench"] = bench_record(summary.bench, info.start_ns)
    return record


def warmup_record(warmup: Warmup) -> dict[str, Any]:
    """A shard's warm-up, whole, so a merge keeps it apart from the run as the shard did."""
    return {"tally": tally_record(warmup.tally), "due": warmup.due, "spanNs": warmup.span_ns,
            "intervals": warmup.intervals, "connections": dict(sorted(warmup.connections.items()))}


def warmup_from_record(record: dict[str, Any]) -> Warmup:
    """The warm-up a checked warmup_record() was made from."""
    due = record["due"]
    return Warmup(tally_from_record(record["tally"]), None if due is None else float(due), int(record["spanNs"]),
                  int(record["intervals"]), {str(k): int(n) for k, n in (record.get("connections") or {}).items()})


def _histogram_record(histogram: LatencyHistogram | None) -> dict[str, Any] | None:
    return None if histogram is None else histogram_record(histogram)


# --- reading a shard back, checked -----------------------------------------------------------


@dataclass
class ShardRun:
    """One shard's results: its record, the config it ran with, and whether it finished.

    `intervals` is any sequence of interval records: read back from a log, one that decodes
    each record as it is read (runner.readback.lazyjson), so that a long shard's thousands of
    records are never all decoded at once.
    """

    index: int
    count: int
    start_wall: float
    config: dict[str, Any]
    urls: list[str]
    url_source: str | None
    intervals: Sequence[dict[str, Any]]
    totals: dict[str, Any] | None = None  # the run-wide record; None until (or unless) the shard finished
    source: str = ""  # where it was read: a file, or a pod in `kubectl logs --prefix` output

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any], source: str = "") -> ShardRun:
        """A finished shard from its JSON summary; ValueError naming what is wrong if it cannot be merged.

        The summary comes back from a log, which may have been damaged or edited: every value
        the merge uses is checked here, so that a bad one is named once, with where it is,
        instead of failing deep inside the merge.
        """
        record = summary.get("shard")
        if not isinstance(record, dict):
            raise ValueError("the summary has no shard record (was the run split over shards?)")
        config = checked_config(summary.get("config"))
        check_run_record(record)
        return cls(record["index"], record["count"], float(record["startWall"]), config, list(record["urls"]),
                   record.get("urlSource"), record["intervals"], record, source)


def run_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """A shard's settings that are the run's: the ones every shard of one run has alike."""
    return {key: value for key, value in config.items() if key not in _RUN_ONLY}


def checked_config(config: Any) -> dict[str, Any]:
    """A shard's printed config, checked against the schema as a config file would be.

    Keys this version does not know are left out of the check (a newer runner may print
    more); the merged run is made from the rest, so those must be valid.
    """
    if not isinstance(config, dict):
        raise ValueError(f"config: {_shown(config)} is not allowed; must be an object")
    names = set(settings_names())
    known = {key: value for key, value in config.items() if key in names}
    try:
        validate(known, lambda error: "config" + error.json_path[1:])
        settings = settings_from(merge(run_settings(known)))
    except UsageError as e:
        raise ValueError(str(e)) from None
    if settings.pace.mode == "bench":
        raise ValueError(f"config.mode: {_shown(settings.pace.mode)} is not allowed; shards split soaks only")
    return dict(config)


def check_run_record(record: Mapping[str, Any]) -> None:
    """ValueError naming the first value of a shard record that the merge could not use."""
    most = int(schema()["properties"]["shards"]["maximum"])  # a count above it could not have run
    index, count = _whole(record, "index", 0, MAX_NS), _whole(record, "count", 1, most)
    if index >= count:
        raise ValueError(f"shard.index: {index} is not allowed; must be below shard.count ({count})")
    _value(record, "startWall", _is_start_wall, f"a time in seconds since 1970, below {MAX_START_WALL:.0e}")
    _value(record, "urls", lambda v: isinstance(v, list) and bool(v) and all(isinstance(u, str) for u in v),
           "a list of URLs")
    _value(record, "urlSource", lambda v: v is None or isinstance(v, str), "a string or null", required=False)
    _whole(record, "endNs", 0, MAX_NS)
    _whole(record, "sendingEndNs", 0, MAX_NS)
    _value(record, "stopReason", lambda v: isinstance(v, str), "a string")
    _value(record, "cpuSeconds", lambda v: _is_number(v) and v >= 0, "a number, at least 0")
    _whole(record, "maxRssBytes", 0, MAX_NS)
    for key in ("uncorrected", "sendLag", "inUnit"):
        _histogram(record.get(key), f"shard.{key}")
    _value(record, "connections", _is_counts, "null or an object of whole numbers", required=False)
    _check_client(record.get("client"), "shard.client")
    if record.get("drain") is not None:
        _value(record, "drain", lambda v: isinstance(v, dict), "a tally record")
        _check_tally(record["drain"], "shard.drain", len(record["urls"]))
    if record.get("perUrl") is not None:
        _value(record, "perUrl", lambda v: isinstance(v, list) and all(isinstance(t, dict) for t in v),
               "a list of tally records")
        for k, tally in enumerate(record["perUrl"]):
            _check_tally(tally, f"shard.perUrl[{k}]", len(record["urls"]))
    if record.get("warmup") is not None:
        _check_warmup(record["warmup"], len(record["urls"]))
    _value(record, "intervals", _is_list, "a list")
    for k, interval in enumerate(record["intervals"]):
        _check_interval(interval, f"shard.intervals[{k}]", len(record["urls"]))


def _check_warmup(record: Any, urls: int) -> None:
    """ValueError naming what is wrong with a shard's warm-up record (an earlier version's has none)."""
    where = "shard.warmup"
    if not isinstance(record, dict):
        raise ValueError(f"{where}: {_shown(record)} is not allowed; must be a warm-up record")
    _value(record, "tally", lambda v: isinstance(v, dict), "a tally record", where)
    _check_tally(record["tally"], f"{where}.tally", urls)
    _value(record, "due", lambda v: v is None or (_is_number(v) and v >= 0), "null or a number, at least 0", where)
    _whole(record, "spanNs", 0, MAX_NS, where)
    _whole(record, "intervals", 0, MAX_NS, where)
    _value(record, "connections", _is_counts, "null or an object of whole numbers", where, required=False)


def _check_interval(interval: Any, where: str, urls: int) -> None:
    """ValueError naming what is wrong with one interval record of a shard."""
    if not isinstance(interval, dict):
        raise ValueError(f"{where}: {_shown(interval)} is not allowed; must be an interval record")
    start = _whole(interval, "startNs", 0, MAX_NS, where)
    _whole(interval, "endNs", start, MAX_NS, where)
    if interval.get("sendingEndNs") is not None:
        _whole(interval, "sendingEndNs", 0, MAX_NS, where)
    _value(interval, "tally", lambda v: isinstance(v, dict), "a tally record", where)
    _check_tally(interval["tally"], f"{where}.tally", urls)
    _check_client(interval.get("client"), f"{where}.client")


def _check_tally(record: dict[str, Any], where: str, urls: int) -> None:
    """ValueError unless the tally reads back with counts of at least 0 and errors of the shard's URLs."""
    _histogram(record.get("latency"), f"{where}.latency", required=True)
    if isinstance(record.get("phases"), dict):
        for _, key in _PHASE_HISTOGRAMS:
            _histogram(record["phases"].get(key), f"{where}.phases.{key}", required=True)
    try:
        tally = tally_record(tally_from_record(record))
    except (ValueError, OverflowError) as e:  # int(Infinity) is an OverflowError
        raise ValueError(f"{where}: {e}") from None
    counts = [n for n in tally.values() if isinstance(n, int)] + [*tally["statuses"].values(),
                                                                   *tally["errors"].values(),
                                                                   *tally["backends"].values()]
    if any(n < 0 for n in counts + [g["count"] for g in tally["errorGroups"]]):
        raise ValueError(f"{where}: a count below 0")
    grouped = sum(g["count"] for g in tally["errorGroups"])
    if grouped != tally["failed"]:
        raise ValueError(f"{where}.errorGroups: {grouped} failures is not allowed; must be the {tally['failed']} "
                         "failed")
    for group in tally["errorGroups"]:
        for url in [group["url"], *group["urls"]]:
            if not 0 <= url < urls:
                raise ValueError(f"{where}.errorGroups: URL index {url} is not allowed; must be below the number of "
                                 f"shard.urls ({urls})")


def _check_client(record: Any, where: str) -> None:
    """ValueError unless the client figures read back (an earlier version's record has none)."""
    if record is None:
        return
    if not isinstance(record, dict):
        raise ValueError(f"{where}: {_shown(record)} is not allowed; must be a client record")
    _value(record, "cpuShare", lambda v: _is_number(v) and v >= 0, "a number, at least 0", where)
    _value(record, "saturated", lambda v: isinstance(v, bool), "true or false", where)
    if "saturatedIntervals" in record:
        _whole(record, "saturatedIntervals", 0, MAX_NS, where)
    _histogram(record.get("loopLag"), f"{where}.loopLag", required=True)
    _histogram(record.get("lateness"), f"{where}.lateness")


def _histogram(record: Any, where: str, *, required: bool = False) -> None:
    """ValueError unless the histogram record reads back, its exact statistics within its range."""
    if record is None and not required:
        return
    if not isinstance(record, dict):
        raise ValueError(f"{where}: {_shown(record)} is not allowed; must be a histogram record")
    top = _whole(record, "max", 0, HIGHEST_NS, where)
    low = _whole(record, "min", 0, top, where)
    for key in ("sum", "sumSq"):
        _value(record, key, lambda v: type(v) is int and v >= 0, "a whole number, at least 0", where)
    try:
        n = histogram_from_record(record).count
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    _whole(record, "sum", n * low, n * top, where)
    _whole(record, "sumSq", n * low * low, n * top * top, where)


def _whole(record: Mapping[str, Any], key: str, low: int, high: int, where: str = "shard") -> int:
    """record[key], a whole number from low to high, or a ValueError naming it."""
    allowed = f"a whole number, at least {low}" if high == MAX_NS else f"a whole number from {low} to {high}"
    _value(record, key, lambda v: type(v) is int and low <= v <= high, allowed, where)
    return int(record[key])


def _value(record: Mapping[str, Any], key: str, good: Callable[[Any], bool], allowed: str, where: str = "shard",
           *, required: bool = True) -> None:
    """A ValueError naming record[key] and what is allowed, unless it is good (or absent and not required)."""
    if key not in record:
        if required:
            raise ValueError(f"{where}.{key}: missing")
        return
    if not good(record[key]):
        raise ValueError(f"{where}.{key}: {_shown(record[key])} is not allowed; must be {allowed}")


def _is_list(value: Any) -> bool:
    """A JSON array: a list, or one whose elements are decoded as they are read."""
    return isinstance(value, Sequence) and not isinstance(value, str)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_start_wall(value: Any) -> bool:
    return _is_number(value) and 0 <= value < MAX_START_WALL


def _is_counts(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and all(type(n) is int and n >= 0 for n in value.values()))


def _shown(value: Any) -> str:
    """A bad value as JSON, shortened: enough to find it in the log."""
    return shortened(json.dumps(value, ensure_ascii=False, default=str))


# Settings about running, not about the result: a merge neither splits, nor stops early,
# nor serves metrics, nor writes the pods' CSV file paths on this machine.
_RUN_ONLY = ("shard", "shards", "workers", "abortOnThreshold", "metricAddr", "pushgateway", "remoteWrite",
             "remoteWriteHeaders", "remoteWriteBearerTokenFile", "otlp", "otlpHeaders", "reportLatenciesCSV",
             "junit", "terminationMessagePath", "linkerdAwait", "linkerdShutdown")
