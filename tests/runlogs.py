"""Finished runs to load back: real ones from the CLI, and summaries built by hand.

Reports read what users keep, so the loader is tested on the real thing: the CLI run
against nginx and a closed port, its stdout and stderr merged as `kubectl logs` merges
them. Hand-built summaries give the compare tests exact, known figures.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from runner.stats.histogram import LatencyHistogram
from tests.conftest import GOLDEN, REPO, free_port, soak_command

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
