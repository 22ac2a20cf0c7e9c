"""`soak compare`: runs side by side, each against the first, in one latency unit."""

from __future__ import annotations

import re

import pytest

from runner.commands.compare import change, column_names, compare_text
from runner.readback.results import LoadedRun, load_run, read_run
from tests.conftest import GOLDEN, REPO
from tests.support.runlogs import REPLICAS_1, REPLICAS_10, summary_text

LINKERD_US = summary_text("us", p50=1500, p75=2250, p90=3000, p95=4000, p99=8000, p999=16000, min=700, mean=1800.5,
                          max=35000, requests=12000, good=12000, bad=0, failed=0, goalPercent=100,
                          rate={"target": 200, "achieved": 200.0})


def loaded(text: str, name: str) -> LoadedRun:
    return load_run(text, f"runs/{name}")


TWO_FILES = """\
                       replicas-1.json  replicas-10.json   change
requests                          6000              6000     0.0%
rate achieved (req/s)          100.000            99.983     0.0%
goal%                               99               100    +1.0%
good                              5990              6000    +0.2%
bad                                  4                 0  -100.0%
failed                               6                 0  -100.0%
failed %                           0.1               0.0  -100.0%
p50 (ms)                             2                 1   -50.0%
p75 (ms)                             3                 2   -33.3%
p90 (ms)                             4                 2   -50.0%
p95 (ms)                             5                 3   -40.0%
p99 (ms)                            10                 6   -40.0%
p999 (ms)                           20                12   -40.0%
min (ms)                             1                 0  -100.0%
mean (ms)                         2.50              1.25   -50.0%
max (ms)                            40                30   -25.0%
duration (s)                        60                60     0.0%
"""


def test_two_runs_side_by_side_with_the_change() -> None:
    runs = [loaded(REPLICAS_1, "replicas-1.json"), loaded(REPLICAS_10, "replicas-10.json")]
    assert compare_text(runs) == TWO_FILES


THREE_FILES = """\
                       replicas-1.json  replicas-10.json   change  linkerd.json   change
requests                          6000              6000     0.0%         12000  +100.0%
rate achieved (req/s)          100.000            99.983     0.0%       200.000  +100.0%
goal%                               99               100    +1.0%           100    +1.0%
good                              5990              6000    +0.2%         12000  +100.3%
bad                                  4                 0  -100.0%             0  -100.0%
failed                               6                 0  -100.0%             0  -100.0%
failed %                           0.1               0.0  -100.0%           0.0  -100.0%
p50 (ms)                           2.0               1.0   -50.0%           1.5   -25.0%
p75 (ms)                          3.00              2.00   -33.3%          2.25   -25.0%
p90 (ms)                             4                 2   -50.0%             3   -25.0%
p95 (ms)                             5                 3   -40.0%             4   -20.0%
p99 (ms)                            10                 6   -40.0%             8   -20.0%
p999 (ms)                           20                12   -40.0%            16   -20.0%
min (ms)                           1.0               0.0  -100.0%           0.7   -30.0%
mean (ms)                         2.50              1.25   -50.0%          1.80   -28.0%
max (ms)                            40                30   -25.0%            35   -12.5%
duration (s)                        60                60     0.0%            60     0.0%
"""


def test_three_runs_each_against_the_first_in_the_first_ones_unit() -> None:
    """The third was measured in us: its latencies are shown in ms, the baseline's unit."""
    runs = [loaded(REPLICAS_1, "replicas-1.json"), loaded(REPLICAS_10, "replicas-10.json"),
            loaded(LINKERD_US, "linkerd.json")]
    assert compare_text(runs) == THREE_FILES


def test_the_percent_changes_are_against_the_first() -> None:
    """By hand: p75 3 -> 2 is -33.3%, -> 2.25 is -25.0%; good 5990 -> 12000 is +100.3%."""
    lines = {line.split("  ")[0].strip(): line.split() for line in THREE_FILES.splitlines()[1:]}
    assert lines["p75 (ms)"][-4:] == ["2.00", "-33.3%", "2.25", "-25.0%"]
    assert lines["good"][-4:] == ["6000", "+0.2%", "12000", "+100.3%"]
    assert f"{(12000 - 5990) / 5990 * 100:+.1f}%" == "+100.3%"


def test_latencies_convert_to_the_unit_asked_for() -> None:
    runs = [loaded(LINKERD_US, "linkerd.json"), loaded(REPLICAS_1, "replicas-1.json")]
    text = compare_text(runs)
    assert "p50 (us)                       1500             2000  +33.3%" in text
    assert "mean (us)                    1800.5           2500.0  +38.9%" in text
    in_ms = compare_text(runs, "ms")
    assert "p50 (ms)                        1.5              2.0  +33.3%" in in_ms
    assert "mean (ms)                       1.8              2.5  +38.9%" in in_ms
    in_ns = compare_text(runs, "ns")
    assert "max (ns)                   35000000         40000000  +14.3%" in in_ns


def test_a_slow_cooker_log_compares_with_its_unknowns_and_estimates_marked() -> None:
    runs = [read_run(str(GOLDEN / "seed-pallet.log")), loaded(REPLICAS_1, "replicas-1.json")]
    assert compare_text(runs) == """\
                       seed-pallet.log  replicas-1.json   change
requests                        360000             6000   -98.3%
rate achieved (req/s)              100              100     0.0%
goal%                              100               99    -1.0%
good                            360000             5990   -98.3%
bad                                  0                4      n/a
failed                               0                6      n/a
failed %                           0.0              0.1      n/a
p50 (ms)                             1                2  +100.0%
p75 (ms)                             1                3  +200.0%
p90 (ms)                             1                4  +300.0%
p95 (ms)                             1                5  +400.0%
p99 (ms)                             2               10  +400.0%
p999 (ms)                            -               20
min (ms)                             0                1      n/a
mean (ms)                        ~0.81             2.50  +208.6%
max (ms)                            26               40   +53.8%
duration (s)                      3600               60   -98.3%
~ estimated from the interval lines' percentiles
- not in the file
"""


def test_a_bench_summary_compares_on_the_common_keys_and_shows_its_requests_per_second() -> None:
    bench = summary_text("ms", goalPercent=None, rate={"target": None, "achieved": 1234.5},
                         bench={"requestsPerSecond": 1234.56, "timeTakenSeconds": 4.86})
    text = compare_text([loaded(REPLICAS_1, "soak.json"), loaded(bench, "bench.json")])
    lines = text.splitlines()
    assert lines[0].split() == ["soak.json", "bench.json", "change"]
    assert lines[2].split() == ["rate", "achieved", "(req/s)", "100.0", "1234.5", "+1134.5%"]
    assert lines[3].split() == ["bench", "(req/s)", "-", "1234.56"]
    assert lines[4].split() == ["goal%", "99", "-"]
    assert lines[-1] == "- not in the file"


def test_rows_nobody_knows_are_left_out() -> None:
    """slow_cooker's logs have no p999 at all: no p999 row."""
    runs = [read_run(str(GOLDEN / name)) for name in ("100qps-ms.log", "faults-timeout-1s.log")]
    text = compare_text(runs)
    assert "p999" not in text and "bench" not in text
    assert text.splitlines()[0].split() == ["100qps-ms.log", "faults-timeout-1s.log", "change"]


@pytest.mark.parametrize(("baseline", "value", "shown"), [
    (100, 110, "+10.0%"), (100, 90, "-10.0%"), (3, 2, "-33.3%"), (100, 100.04, "0.0%"), (100, 99.96, "0.0%"),
    (0, 0, "0.0%"), (0, 5, "n/a"), (None, 5, ""), (5, None, ""), (-4, -2, "+50.0%"),
])
def test_change(baseline: float | None, value: float | None, shown: str) -> None:
    assert change(baseline, value) == shown


def test_column_names_drop_directories_unless_that_makes_two_alike() -> None:
    assert column_names(["a/run.log", "b/other.log"]) == ["run.log", "other.log"]
    assert column_names(["a/run.log", "b/run.log"]) == ["a/run.log", "b/run.log"]
    assert column_names(["run.log", "run.log"]) == ["run.log (#1)", "run.log (#2)"]
    assert column_names(["-", "x.json"]) == ["-", "x.json"]


# --- the command -------------------------------------------------------------------------------












def test_the_documented_example_is_what_compare_prints() -> None:
    page = (REPO / "docs" / "compare-and-plot.md").read_text()
    example = page.split("<!-- compare-example", 1)[1]
    command = example.split("```sh\n", 1)[1].split("\n```", 1)[0]
    shown = example.split("```\n", 2)[2].split("```", 1)[0]
    assert command.split()[:2] == ["soak", "compare"]
    assert compare_text([read_run(str(REPO / path)) for path in command.split()[2:]]) == shown


def _with_urls(p99s: dict[str, float], requests: int) -> str:
    entries = [{"url": url, "requests": requests, "good": requests, "bad": 0, "failed": 0, "min": 1, "mean": 2.0,
                "max": p99 + 1, "p50": 1, "p75": 1, "p90": 2, "p95": 2, "p99": p99, "p999": p99}
               for url, p99 in p99s.items()]
    return summary_text("ms", perUrl=entries)


def test_each_urls_part_has_its_rows_before_the_duration() -> None:
    runs = [loaded(_with_urls({"http://a/": 10, "http://b/": 20}, 100), "monday.json"),
            loaded(_with_urls({"http://b/": 30, "http://c/": 5}, 150), "tuesday.json")]
    lines = compare_text(runs).splitlines()
    table = [re.split(r"  +", line.strip()) for line in lines[1:] if "  " in line.strip()]
    rows = {cells[0]: cells[1:] for cells in table}
    assert rows["http://a/ requests"] == ["100", "-"]  # not in tuesday's run: no change to say
    assert rows["http://b/ p99 (ms)"] == ["20", "30", "+50.0%"]
    assert rows["http://c/ max (ms)"] == ["-", "6"]
    labels = [cells[0] for cells in table]
    assert [label for label in labels if label.startswith("http://b/")] == [
        "http://b/ requests", "http://b/ failed", "http://b/ p50 (ms)", "http://b/ p99 (ms)", "http://b/ max (ms)"]
    assert labels.index("http://a/ requests") < labels.index("http://c/ requests") < labels.index("duration (s)")
    assert lines[-1] == "- not in the file"
