"""The JSON summary printed at the end of a run.

slow_cooker's six percentile keys come first, in its order, in the latency unit; every latency
of the summary is a number to three decimals of that unit (latency_figure), where slow_cooker's
keys were integers, truncated: all 0 in ms on a fast service. After them comes what a
reader of `kubectl logs` needs to judge the run without the interval lines: counts, rate,
errors, timings, every interval's figures and the histogram itself (so every report can be
rebuilt from the summary alone), and the config. A bench run adds a "bench" section with
everything ab's report shows, so that report too can be rebuilt from a saved summary.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO
from urllib.parse import urlsplit

from runner.config.targets import OTHER_URLS, url_slots
from runner.core.durations import format_duration
from runner.core.units import UNIT_NS, rfc3339
from runner.load.result import ErrorKind
from runner.report import keys as k
from runner.report.base import Reporter
from runner.report.compactjson import compact_json
from runner.report.slowcooker import shown_percent, to_ms
from runner.stats.client import ClientFigures
from runner.stats.figures import PHASE_PERCENTILES, SUMMARY_PERCENTILES, Figures, Latency
from runner.stats.histogram import LatencyHistogram
from runner.stats.recorder import BenchTally, Interval, Tally
from runner.stats.runinfo import RunInfo, RunSummary

# ab's failure breakdown, from our error kinds: a connection never made, a response cut short
# or never finished, and anything else. ab's fourth kind, Length, is judged on responses.
AB_FAILURES = {
    "connect": (ErrorKind.DNS, ErrorKind.REFUSED, ErrorKind.CONNECT, ErrorKind.TLS),
    "receive": (ErrorKind.RESET, ErrorKind.CLOSED, ErrorKind.TIMEOUT),
    "exceptions": (ErrorKind.PROTOCOL, ErrorKind.CANCELLED, ErrorKind.OTHER),
}
SERVED_WITHIN = (50, 66, 75, 80, 90, 95, 98, 99, 100)  # ab's percentages of the total time


def latency_figure(ns: float, unit: str) -> float:
    """A latency as the summary writes every one: in the run's unit, to three decimals (ms to the
    microsecond). Truncated to whole units, as the interval lines show them, a fast service's
    headline percentiles were all 0 in ms beside exact figures everywhere else in the JSON."""
    return round(ns / UNIT_NS[unit], 3)


def percentile_keys(latency: Latency, unit: str) -> dict[str, float]:
    """slow_cooker's summary keys, p50 ... p999, in the unit (latency_figure)."""
    return {key: latency_figure(latency.percentiles[key], unit) for key in SUMMARY_PERCENTILES}


def send_lag_dict(lag: LatencyHistogram) -> dict[str, float]:
    """How late sends went out against their due times, in microseconds: the pacing's accuracy."""
    found = lag.percentiles([50, 99, 99.9])
    return {"p50": round(found[50] / 1000, 1), "p99": round(found[99] / 1000, 1),
            "p999": round(found[99.9] / 1000, 1), "max": round(lag.max / 1000, 1)}


def _lag_ms(histogram: LatencyHistogram) -> dict[str, float]:
    found = histogram.percentiles([50, 99])
    return {"p50": round(found[50] / 1e6, 3), "p99": round(found[99] / 1e6, 3), "max": round(histogram.max / 1e6, 3)}


def latency_clock(tally: Tally) -> str:
    """Whose clock timed the run's responses: `kernel` (every one by its receive timestamp), `loop`
    (none: TLS, httpx, another platform), or `mixed`."""
    if tally.responses and tally.kernel_clocked == tally.responses:
        return "kernel"
    return "mixed" if tally.kernel_clocked else "loop"


def client_dict(client: ClientFigures) -> dict[str, Any]:
    """How the client itself fared over the run: what clientSaturated was judged on (docs/output.md)."""
    data: dict[str, Any] = {
        k.CPU_PERCENT: round(client.cpu_share * 100, 1),
        k.LOOP_LAG_MS: _lag_ms(client.loop_lag),
        k.SATURATED_INTERVALS: client.saturated_intervals,
    }
    if client.lateness is not None:
        data[k.LATENESS_MS] = _lag_ms(client.lateness)
    return data


def drain_dict(summary: RunSummary) -> dict[str, Any]:
    """What came back after the last interval ended: counted in the run's totals, not in that interval."""
    drain = summary.drain
    assert drain is not None
    last = summary.last_interval_end_ns or summary.end_ns
    return {k.REQUESTS: drain.requests, k.GOOD: drain.good, k.BAD: drain.bad, k.FAILED: drain.failed,
            k.DURATION_SECONDS: round((summary.end_ns - last) / 1e9, 3)}


def warmup_dict(summary: RunSummary) -> dict[str, Any]:
    """What the warm-up measured: the run's counts and latencies, kept apart from the run's own."""
    warmup, unit = summary.warmup, summary.info.settings.report.latency_unit
    assert warmup is not None
    f = warmup.figures
    return {
        **percentile_keys(f.latency, unit),
        k.MIN: latency_figure(f.latency.min_ns, unit),
        k.MAX: latency_figure(f.latency.max_ns, unit),
        k.REQUESTS: f.requests, k.GOOD: f.good, k.BAD: f.bad, k.FAILED: f.failed, k.SKIPPED: f.skipped,
        k.GOAL_T: f.due,
        k.GOAL_PERCENT: None if f.goal_percent is None else shown_percent(f.goal_percent),
        k.STATUS_CODES: {str(code): n for code, n in sorted(warmup.tally.statuses.items())},
        k.ERRORS: dict(f.errors),
        k.DURATION_SECONDS: round(warmup.span_ns / 1e9, 3),
        k.INTERVALS: warmup.intervals,
        k.CONNECTIONS: dict(sorted(warmup.connections.items())),
        # Those still open at its end go on in the run, which counts them as opened too (Recorder.took_over).
        k.CONNECTIONS_OPENED: f.connections_opened,
        k.CONNECTIONS_CLOSED: f.connections_closed,
    }


def line_latencies_precise(latency: Latency, unit: str) -> dict[str, float]:
    """min, the line's percentiles and max in the unit to three decimals, where the line truncates.

    A fast service answers in well under a millisecond: in ms, every interval line says 0,
    and a plot of them would be a flat line. The summary keeps what was measured.
    """
    return {key: latency_figure(ns, unit) for key, ns in latency.in_line().items()}


def interval_dict(info: RunInfo, interval: Interval) -> dict[str, Any]:
    """One interval's figures: its line's, with latencies to 3 decimals, skipped sends and errors.

    A bench has no rate to reach, so its intervals have no goal: `t` and goalPercent are null.
    """
    f = interval.figures
    return {
        k.ITER: interval.index,
        k.END: rfc3339(info.wall(interval.end_ns)),
        k.INTERVAL: format_duration(to_ms(interval.span_ns)),
        k.GOOD: f.good,
        k.BAD: f.bad,
        k.FAILED: f.failed,
        k.SKIPPED: f.skipped,
        k.LATE: f.late,
        k.GOAL_T: f.due,
        k.GOAL_PERCENT: None if f.goal_percent is None else shown_percent(f.goal_percent),
        **line_latencies_precise(f.latency, info.settings.report.latency_unit),
        k.BHASH: f.bhash,
        k.ERRORS: dict(f.errors),
        **connection_keys(info, f),
        k.CLIENT_SATURATED: interval.client.saturated,
    }


def connection_keys(info: RunInfo, f: Figures) -> dict[str, Any]:
    """Connections opened and closed in a span, and with a backendHeader which backends answered."""
    data: dict[str, Any] = {k.CONNECTIONS_OPENED: f.connections_opened, k.CONNECTIONS_CLOSED: f.connections_closed}
    if info.settings.report.backend_header:
        data |= {k.BACKENDS_REACHED: f.backends_reached, k.BACKENDS: dict(f.backends)}
    return data


def summary_dict(summary: RunSummary, intervals: list[dict[str, Any]] | None = None,
                 shard_intervals: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The summary as an ordered dict, ready for json.dumps; `intervals` from interval_dict().

    A shard of a split run adds its `shard` record (`shard_intervals` from
    merge.interval_record()), everything `soak merge` needs to add the shards up exactly.
    A merged run says which shards it is made of, and which were missing or cut off.
    """
    info, tally, f = summary.info, summary.tally, summary.figures
    unit = info.settings.report.latency_unit
    elapsed_s = summary.elapsed_ns / 1e9
    paced = info.model.paced  # a bench has no schedule, hence no goal and no target rate
    data: dict[str, Any] = percentile_keys(f.latency, unit)
    data |= {
        k.LATENCY_UNIT: unit,
        k.LATENCY_CLOCK: latency_clock(tally),
        k.MIN: latency_figure(f.latency.min_ns, unit),
        k.MEAN: latency_figure(f.latency.mean_ns, unit),
        k.MAX: latency_figure(f.latency.max_ns, unit),
        k.STDEV: latency_figure(f.latency.stdev_ns, unit),
        k.REQUESTS: f.requests,
        k.GOOD: f.good,
        k.BAD: f.bad,
        k.FAILED: f.failed,
        k.SKIPPED: f.skipped,
        k.LATE: f.late,
        k.GOAL_PERCENT: None if f.goal_percent is None else shown_percent(f.goal_percent),
        k.CLIENT_SATURATED: summary.client is not None and summary.client.saturated,
        k.RATE: {
            k.RATE_TARGET: _number(round(_target_rate(summary), 6)) if paced else None,
            k.RATE_ACHIEVED: round(f.rate_achieved, 3),
        },
        k.STATUS_CODES: {str(code): n for code, n in sorted(tally.statuses.items())},
        k.ERRORS: dict(sorted(tally.errors.items())),
        k.HASH_CHECKED: tally.hash_checked,
        k.HASH_MISMATCHES: tally.hash_mismatches,
        k.BYTES_IN: tally.bytes_in,
        k.BYTES_OUT: tally.bytes_out,
        k.START: rfc3339(info.wall_start, fraction=True),
        k.END: rfc3339(info.wall(summary.end_ns), fraction=True),
        k.DURATION_SECONDS: round(elapsed_s, 3),
        k.SENDING_SECONDS: round(summary.sending_ns / 1e9, 3),
        k.INTERVALS: summary.intervals,
        k.STOP_REASON: summary.stop_reason,
        k.ENGINE: info.engine,
    }
    if summary.connections is not None:
        data[k.CONNECTIONS] = dict(sorted(summary.connections.items()))
    data |= connection_keys(info, f)
    if f.phases:
        data[k.PHASES] = phases_dict(f.phases)
    if summary.uncorrected is not None:
        data[k.UNCORRECTED] = percentile_keys(Latency.of(summary.uncorrected, SUMMARY_PERCENTILES), unit)
    if summary.send_lag is not None:
        data[k.SEND_LAG_US] = send_lag_dict(summary.send_lag)
    if summary.client is not None:
        data[k.CLIENT] = client_dict(summary.client)
    if summary.drain is not None:
        data[k.DRAIN] = drain_dict(summary)
    if summary.warmup is not None:
        data[k.WARMUP] = warmup_dict(summary)
    if summary.bench is not None:
        data[k.BENCH] = bench_dict(summary, summary.bench)
    if summary.per_url is not None:
        data[k.PER_URL] = per_url_list(summary)
    data[k.INTERVAL_STATS] = intervals or []
    data[k.HISTOGRAM] = {k.HISTOGRAM_UNIT: "ns", k.HISTOGRAM_HDR: tally.latency.encode()}
    data[k.PROCESS] = {k.CPU_SECONDS: round(summary.cpu_seconds, 3), k.MAX_RSS_BYTES: summary.max_rss_bytes}
    data[k.CONFIG] = info.settings.effective
    if summary.shards is not None:
        data[k.SHARDS] = summary.shards
    if summary.failed_workers:
        data[k.FAILED_WORKERS] = {str(w): text for w, text in summary.failed_workers.items()}
    if not info.shard.alone:
        from runner.stats.record import run_record  # a shard's only: a run alone does not load the records' code

        data[k.SHARD] = run_record(summary, shard_intervals or [])
    return data


def phases_dict(phases: Mapping[str, Latency]) -> dict[str, dict[str, float]]:
    """Where the responses' time went: each phase's count and latencies in ms, to the microsecond."""
    return {name: {k.COUNT: latency.count, k.MIN: _ms(latency.min_ns), k.MEAN: _ms(latency.mean_ns),
                   **{key: _ms(latency.percentiles[key]) for key in PHASE_PERCENTILES}, k.MAX: _ms(latency.max_ns)}
            for name, latency in phases.items()}


def per_url_list(summary: RunSummary) -> list[dict[str, Any]]:
    """Each URL's part of the run, by its url label as the metrics label it (runner.config.targets:
    the first URL_SERIES_CAP distinct ones, then "other" for the rest together, with how many)."""
    unit = summary.info.settings.report.latency_unit
    slots = url_slots(summary.info.urls)
    assert summary.per_url is not None
    entries = []
    for label, tally, f in zip(slots.labels, summary.per_url, summary.url_figures, strict=True):
        entry: dict[str, Any] = {k.URL: label}
        if label == OTHER_URLS:
            entry[k.URLS] = slots.others
        entry |= {
            k.REQUESTS: f.requests, k.GOOD: f.good, k.BAD: f.bad, k.FAILED: f.failed,
            k.ERRORS: dict(f.errors),
            k.STATUS_CODES: {str(code): n for code, n in sorted(tally.statuses.items())},
            k.MIN: latency_figure(f.latency.min_ns, unit), k.MEAN: latency_figure(f.latency.mean_ns, unit),
            k.MAX: latency_figure(f.latency.max_ns, unit),
            **percentile_keys(f.latency, unit),
        }
        entries.append(entry)
    return entries


def _target_rate(summary: RunSummary) -> float:
    """The rate asked for: qps, or with stages the ramp's average over the time it was sending."""
    info = summary.info
    if info.settings.pace.stages:
        return summary.figures.rate_target or 0.0
    return info.qps


def bench_dict(summary: RunSummary, bench: BenchTally) -> dict[str, Any]:
    """Everything ab's report shows, in ab's order; times in ms to the microsecond, as ab keeps them.

    "complete" counts responses (ab's "Complete requests"); "failed" adds ab's four kinds of
    failure, of which Length counts responses too, so complete + failed - length == requests.
    """
    info, tally = summary.info, summary.tally
    url = urlsplit(info.urls[0])
    failures = {name: sum(tally.errors[kind] for kind in group) for name, group in AB_FAILURES.items()}
    failures = {
        "connect": failures["connect"],
        "receive": failures["receive"],
        "length": bench.length_mismatches,
        "exceptions": failures["exceptions"],
    }
    # Until the last response ended, or until sending stopped if that was later: a bench that
    # -t ends lasts at least its time limit, as ab's does, even when the last responses came
    # back a moment before the clients next looked at the clock.
    end_ns = max(bench.last_end_ns, summary.sending_end_ns)
    time_taken_ns = max(end_ns - info.start_ns, 0) if bench.last_end_ns else 0
    served = bench.total.percentiles(SERVED_WITHIN)
    return {
        "server": bench.server or "",
        "host": url.hostname or "",
        "port": url.port or (443 if url.scheme == "https" else 80),
        "path": (url.path or "/") + (f"?{url.query}" if url.query else ""),
        "documentLength": bench.document_length or 0,
        "concurrency": info.concurrency,
        "keepAlive": not info.settings.client.no_reuse,
        "timeTakenSeconds": round(time_taken_ns / 1e9, 6),
        k.BENCH_REQUESTS_PER_SECOND: round(tally.responses * 1e9 / time_taken_ns, 2) if time_taken_ns else 0.0,
        "requests": tally.requests,
        "complete": tally.responses,
        "failed": sum(failures.values()),
        "failures": failures,
        "non2xx": sum(n for status, n in tally.statuses.items() if not 200 <= status < 300),
        "keepAliveRequests": bench.kept_alive,
        "totalTransferred": bench.header_bytes + tally.bytes_in,
        "htmlTransferred": tally.bytes_in,
        "bodySent": tally.bytes_out,
        "phases": {name: _phase(histogram) for name, histogram in bench.phases().items()},
        "servedWithin": {str(p): _ms(served[p]) for p in SERVED_WITHIN},
    }


def _phase(histogram: LatencyHistogram) -> dict[str, Any]:
    """One row of ab's "Connection Times" in ms, with its histogram (ns) to rebuild anything else."""
    median = histogram.percentiles([50])[50]
    return {
        "min": _ms(histogram.min),
        "mean": _ms(histogram.mean),
        "sd": _ms(histogram.stdev(sample=True)),
        "median": _ms(median),
        "max": _ms(histogram.max),
        "hdr": histogram.encode(),
    }


def _ms(ns: float) -> float:
    """Nanoseconds as milliseconds to the microsecond: ab's own resolution."""
    return round(ns / 1e6, 3)


def _number(x: float) -> int | float:
    """A whole float as an int, so 100 prints as 100, not 100.0."""
    return int(x) if x == int(x) else x


class JsonSummaryReporter(Reporter):
    """Prints the summary as JSON on `out`: one top-level key a line, as slow_cooker's indented
    summary has, but one line per interval and per record (runner.report.compactjson), so a long
    run's summary stays short enough to read at the end of `kubectl logs`.

    `before` is a text made from the same summary dict and printed first (a bench's ab
    report), so the dict is built once; `with_json=False` prints that text alone.
    `sections` add keys made elsewhere from the same summary (the thresholds' verdict).
    `stored` is handed the finished dict (sections included) before anything is printed, and
    the keys it returns are printed with the rest: the resultsStore writer (runner.store.writer),
    which keeps the very summary printed and says in it where it went.
    """

    def __init__(self, out: TextIO, *, before: Callable[[dict[str, Any]], str] | None = None,
                 with_json: bool = True, sections: Sequence[Callable[[RunSummary], dict[str, Any]]] = (),
                 stored: Callable[[RunSummary, dict[str, Any]], dict[str, Any]] | None = None) -> None:
        self._out = out
        self._sections = sections
        self._stored = stored
        self._before = before
        self._json = with_json
        self._intervals: list[dict[str, Any]] = []  # a few small dicts per interval, not per request
        self._shard_intervals: list[dict[str, Any]] = []  # a shard's whole tallies, for merging

    def interval(self, info: RunInfo, interval: Interval) -> None:
        self._intervals.append(interval_dict(info, interval))
        if not info.shard.alone:
            from runner.stats.record import interval_record  # as summary_dict's run_record

            self._shard_intervals.append(interval_record(info, interval))

    def finish(self, summary: RunSummary) -> None:
        data = summary_dict(summary, self._intervals, self._shard_intervals)
        for section in self._sections:
            data |= section(summary)
        if self._stored is not None:
            data |= self._stored(summary, data)
        text = self._before(data) if self._before is not None else ""
        if self._json:
            text += compact_json(data) + "\n"
        self._out.write(text)
        self._out.flush()
