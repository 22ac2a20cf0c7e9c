"""A long run's summary stays short enough to read at the end of `kubectl logs` (issue 14).

A real run of 60 intervals, as many as the default run has, with the shipped configuration.json
(its thresholds too), against nginx; the intervals are 50 ms and the rate low, so it takes
seconds. The layout itself is runner.report.compactjson's, tested exhaustively in tests/unit.
"""

from __future__ import annotations

import json

from tests.conftest import Nginx, assert_counts_add_up, run_soak

MAX_LINES = 150


def test_a_60_interval_summary_is_one_short_json_document(nginx: Nginx) -> None:
    run = run_soak("--config", "configuration.json", "--interval", "50ms", "--iterations", "60", "--qps", "40",
                   nginx.url)
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)  # one summary, last, and it parses whole
    lines = run.lines[run.lines.index("{"):]
    assert len(lines) <= MAX_LINES, f"the summary is {len(lines)} lines"
    assert summary["intervals"] == len(summary["intervalStats"]) == 60

    rows = [line.strip().removesuffix(",") for line in lines if line.startswith('    {"iter": ')]
    assert [json.loads(row) for row in rows] == summary["intervalStats"], "one line per interval"
    top = [line for line in lines if line.startswith('  "')]
    assert [line[3:].split('"', 1)[0] for line in top] == list(summary), "one line per top-level key"
    assert any(line.startswith('  "thresholds": {') for line in lines[-12:]), "`tail` shows the verdict"
