"""Finished runs to load back: real ones from the CLI, and summaries built by hand.

Reports read what users keep, so the loader is tested on the real thing: the CLI run
against nginx and a closed port, its stdout and stderr merged as `kubectl logs` merges
them. Hand-built summaries give the compare tests exact, known figures.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from runner.commands.plot import build_figure
from runner.readback.results import IntervalRow, LoadedRun
from runner.stats.histogram import LatencyHistogram
from tests.conftest import GOLDEN, REPO, free_port, soak_command

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SLOW_COOKER_LOGS = sorted(p.name for p in GOLDEN.glob("*.log"))


def kubectl_logs(*args: str, timeout: float = 60) -> str:
    """Run the CLI with stdout and stderr in one stream, line by line, as `kubectl logs` shows a pod."""
    done = subprocess.run(soak_command(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, cwd=REPO, env={**os.environ, "TZ": "UTC"})
    assert done.returncode == 0, done.stdout
    return done.stdout


def mixed_log(nginx_url: str) -> str:
    """Four 500 ms intervals of good (nginx), bad (its /fail, a 503) and failed (a closed port) requests."""
    closed = f"http://127.0.0.1:{free_port()}/"
    return kubectl_logs("--qps", "60", "--concurrency", "3", "--interval", "500ms", "--iterations", "4",
                        "--latencyUnit", "us", nginx_url, nginx_url + "fail", closed)


def split_log(log: str) -> tuple[str, str]:
    """(everything before the JSON summary, the summary's text)."""
    lines = log.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip() == "{")
    end = next(i for i in range(start, len(lines)) if lines[i].rstrip() == "}")
    return "".join(lines[:start]), "".join(lines[start:end + 1])


def histogram_of(latencies_ns: list[int]) -> str:
    histogram = LatencyHistogram()
    for ns in latencies_ns:
        histogram.record(ns)
    return histogram.encode()


def summary(unit: str = "ms", **changes: Any) -> dict[str, Any]:
    """A soak summary with round figures, in `unit`; `changes` replace its keys."""
    data: dict[str, Any] = {
        "p50": 2, "p75": 3, "p90": 4, "p95": 5, "p99": 10, "p999": 20,
        "latencyUnit": unit, "min": 1, "mean": 2.5, "max": 40, "stdev": 1.5,
        "requests": 6000, "good": 5990, "bad": 4, "failed": 6, "skipped": 0, "goalPercent": 99,
        "rate": {"target": 100, "achieved": 100.0},
        "statusCodes": {"200": 5990, "503": 4}, "errors": {"refused": 6},
        "durationSeconds": 60.0, "sendingSeconds": 60.0, "intervals": 6, "stopReason": "iterations",
        "intervalStats": [],
    }
    data.update(changes)
    return data


def summary_text(unit: str = "ms", **changes: Any) -> str:
    return json.dumps(summary(unit, **changes), indent=2) + "\n"


MS = 1_000_000


US = 1_000


def golden(name: str) -> str:
    return (GOLDEN / name).read_text()


def columns(intervals: tuple[IntervalRow, ...] | list[IntervalRow]) -> list[tuple]:
    """What an interval line shows, without what only intervalStats know (skipped, errors by kind,
    latencies finer than whole units): t as a float, latencies truncated as the line prints them."""
    def printed(i: IntervalRow) -> IntervalRow:
        whole = {k: int(v) for k in ("min", "p50", "p95", "p99", "p999", "max") if (v := getattr(i, k)) is not None}
        return dataclasses.replace(i, skipped=None, errors=None, t=None if i.t is None else float(i.t), **whole)
    return [dataclasses.astuple(printed(i)) for i in intervals]


def interval_rows(text: str) -> list[list[str]]:
    """The interval lines' columns, split on spaces: an oracle independent of the loader's regex."""
    return [line.split() for line in text.splitlines() if re.match(r"^\d{4}-\d\d-\d\dT", line)]


def assert_one_line_notes(run: LoadedRun) -> None:
    assert all(isinstance(n, str) and n and "\n" not in n and "\r" not in n for n in run.notes), run.notes


def bhash_ends(text: str) -> Iterator[int]:
    """For each interval line, the offset just after the space that follows its bhash column."""
    offset = 0
    for line in text.splitlines(keepends=True):
        m = re.match(r"^\d{4}-\d\d-\d\dT.*\] +\d+ +\d+ ", line)
        if m:
            yield offset + m.end()
        offset += len(line)


GARBAGE = ["hello world", "#### not a header", "2026-11-30T01:10:32Z     garbage 1/2/3", "{oops", "[1, 2, 3",
           "Traceback (most recent call last):", "\x00\x01binary\x7f", "]", "x" * 500, "# sending lots"]


def mangled(text: str, rng: random.Random) -> str:
    """One of the ways a saved log gets damaged."""
    lines = text.splitlines(keepends=True)
    how = rng.randrange(6)
    if how == 0 and lines:  # lines lost
        del lines[rng.randrange(len(lines))]
    elif how == 1 and lines:  # lines repeated
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif how == 2:  # characters changed
        chars = list(text)
        for _ in range(rng.randrange(1, 10)):
            if chars:
                chars[rng.randrange(len(chars))] = rng.choice("{}[]\",: 0123456789ab\n\x00é")
        return "".join(chars)
    elif how == 3:  # lines shuffled
        rng.shuffle(lines)
    elif how == 4:  # cut off
        return text[: rng.randrange(len(text) + 1)]
    else:  # random bytes spliced in
        at = rng.randrange(len(text) + 1)
        return text[:at] + bytes(rng.randrange(256) for _ in range(40)).decode("latin-1") + text[at:]
    return "".join(lines)


REPLICAS_1 = summary_text("ms")


REPLICAS_10 = summary_text("ms", p50=1, p75=2, p90=2, p95=3, p99=6, p999=12, min=0, mean=1.25, max=30, good=6000, bad=0,
                           failed=0, goalPercent=100, rate={"target": 100, "achieved": 99.983})


def latency_lines(run: LoadedRun) -> dict[str, list[float]]:
    return latency_lines_of(build_figure(run))


def latency_lines_of(figure: Figure) -> dict[str, list[float]]:
    """The latency panel's lines as drawn, by name: p50, p95, p99, max."""
    return {str(line.get_label()): list(line.get_ydata()) for line in figure.axes[0].get_lines()}


def error_bars(figure: Figure) -> list[float]:
    """The heights of the bottom panel's error bars as drawn, one per interval, in order."""
    (bars,) = figure.axes[2].collections  # one collection of rectangles, not a patch per bar
    return [float(path.vertices[:, 1].max()) for path in bars.get_paths()]
