"""slow_cooker's text layout, checked against real slow_cooker output (tests/golden)."""

from __future__ import annotations

import dataclasses
import io
import math
import random
import re

import pytest

from runner.config.settings import merge, settings_from
from runner.core.columns import Line, header_line, interval_line
from runner.load.result import Result
from runner.readback.results import load_run
from runner.report.slowcooker import (
    MAX_ERROR_LINES,
    ChangeWindow,
    SlowCookerReporter,
    change_indicator,
    error_lines,
    format_rate,
    rounded_goal,
    shown_percent,
    startup_line,
)
from runner.stats.figures import goal_percent
from runner.stats.recorder import GROUP_URLS, Interval, Tally
from runner.stats.runinfo import RunInfo, RunSummary
from tests.conftest import GOLDEN, parse_interval

LOGS = ["100qps-ms.log", "100qps-us.log", "url-list-3.log", "with-csv-us.log", "faults-timeout-1s.log"]


def interval_lines(name: str) -> list[str]:
    return [line for line in (GOLDEN / name).read_text().splitlines() if line[:1].isdigit()]


@pytest.mark.parametrize("name", LOGS)
def test_interval_lines_reproduce_real_slow_cooker_output(name: str) -> None:
    lines = interval_lines(name)
    assert lines
    for line in lines:
        assert interval_line(parse_interval(line).line()) == line + "\n"


@pytest.mark.parametrize("name", LOGS)
def test_change_column_follows_the_zero_filled_window(name: str) -> None:
    window = ChangeWindow()
    for line in interval_lines(name):
        values = parse_interval(line)
        assert window.push(values.latency("p99")) == values.change, line


def latency_column_ends(line: str) -> list[int]:
    """Where each of min, p50, p95, p99, p999 and max ends on an interval line or the header, counted
    from the `[` (what comes before it shifts with `t`, which slow_cooker prints with no width)."""
    bracket, close = line.index("["), line.index("]")
    ends = [m.end() for m in re.finditer(r"\w+", line[bracket:close])]
    min_end = len(line[:bracket].rstrip()) - bracket
    max_end = close - bracket + 1 + re.search(r"\w+", line[close + 1:]).end()  # type: ignore[union-attr]
    return [min_end, *ends, max_end]


@pytest.mark.parametrize("name", ["100qps-us.log", "with-csv-us.log"])
def test_microsecond_columns_line_up_under_the_header(name: str) -> None:
    """slow_cooker's own us lines drift (`135 [496 857 1308 1645 ] 1645`); ours keep every latency
    column where the header puts it, with the same figures."""
    header = header_line("2026-11-30T01:10:51Z", "2s", "us")
    lines = [interval_line(parse_interval(line).line(), unit="us") for line in interval_lines(name)]
    assert len({tuple(latency_column_ends(line)) for line in lines}) == 1, "".join(lines)
    ends = latency_column_ends(lines[0])
    assert latency_column_ends(header)[:4] + latency_column_ends(header)[5:] == ends[:4] + ends[5:]
    assert latency_column_ends(header)[4] == ends[4] + 1, "p999 sits as in slow_cooker's header, a column right"
    def words(line: str) -> list[str]:
        return line.replace("[", "[ ").split()

    assert [words(line) for line in lines] == [words(line) for line in interval_lines(name)], "the same figures"


def test_columns_drift_only_where_ms_ones_would() -> None:
    """Three digits more than ms hold any latency under 1 s (p999 and max: 10 s) in place."""
    def line(*latencies: int) -> Line:
        return Line("2026-11-30T01:10:51Z", 0, 195, 0, 0, 200, 97, "2s", latencies, 0, "+")  # type: ignore[arg-type]

    held = interval_line(line(999_999, 999_999, 999_999, 999_999, 9_999_999, 9_999_999), unit="us")
    assert latency_column_ends(held) == latency_column_ends(interval_line(line(1, 2, 3, 4, 5, 6), unit="us"))
    wider = interval_line(line(1, 2, 3, 1_000_000, 5, 6), unit="us")
    assert latency_column_ends(wider)[3:] == [end + 1 for end in latency_column_ends(held)[3:]]
    ms = interval_line(line(1, 2, 3, 4, 5, 6))
    assert ms == interval_line(line(1, 2, 3, 4, 5, 6), unit="ms")
    assert interval_line(line(1, 2, 3, 4, 5, 6), unit="ns").index("]") == ms.index("]") + 5 * 6


def test_seed_lines_match_after_its_spaces_were_collapsed() -> None:
    """The pallet README's example is real output pasted with runs of spaces collapsed."""
    text = (GOLDEN / "seed-pallet.log").read_text().splitlines()
    window = ChangeWindow()
    lines = [line for line in text if line[:1].isdigit()]
    assert len(lines) == 60
    for line in lines:
        # The paste also lost the space that ends a line with no change marker.
        parsed = parse_interval(line if line.endswith(("+", "-")) else line + " ")
        values = dataclasses.replace(parsed, change=window.push(parsed.latency("p99")))
        assert " ".join(interval_line(values.line()).split()) == line.strip()


@pytest.mark.parametrize("name", ["100qps-ms.log", "url-list-3.log", "faults-timeout-1s.log"])
def test_header_matches_for_a_z_timestamp_and_2s_interval(name: str) -> None:
    header = (GOLDEN / name).read_text().splitlines()[1]
    assert header_line("2026-11-30T01:10:32Z", "2s") == header + "\n"


@pytest.mark.parametrize(
    ("timestamp", "interval", "time_pad", "interval_pad"),
    [("2026-11-30T01:10:32Z", "10s", 18, 1), ("2026-11-30T01:10:32+01:00", "1m0s", 23, 2), ("2026-11-30T01:10:32Z", "500ms", 18, 3)],
)
def test_header_padding_follows_timestamp_and_interval_width(timestamp: str, interval: str, time_pad: int, interval_pad: int) -> None:
    header = header_line(timestamp, interval)
    assert header.startswith("# " + " " * time_pad + " iter   good/b/f t   goal% " + " " * interval_pad + " min [")
    assert header.endswith(" max bhash change\n")


def test_seed_header_collapsed() -> None:
    header = (GOLDEN / "seed-pallet.log").read_text().splitlines()[1]
    assert " ".join(header_line("2024-03-21T19:01:01Z", "1m0s").split()) == header


def test_startup_lines() -> None:
    first = (GOLDEN / "100qps-ms.log").read_text().splitlines()[0]
    url = "http://127.0.0.1:39533/ok"
    assert startup_line(100, "GET", 5, [url], None) == first + "\n"
    listed = (GOLDEN / "url-list-3.log").read_text().splitlines()[0]
    assert startup_line(40, "GET", 4, ["http://a/", "http://b/", "http://c/"], "urls.txt") == listed + "\n"
    seed = (GOLDEN / "seed-pallet.log").read_text().splitlines()[0]
    one_from_file = startup_line(100, "GET", 5, ["http://nginx.nginx.svc.cluster.local"], "/etc/soak/urls/urls.txt")
    assert one_from_file == seed + "\n"


def test_a_ramps_startup_line_says_its_shape_and_reads_back_with_no_rate() -> None:
    """Issue 32: a ramp whose peak is 100 said `sending 100 GET req/s`, a rate it keeps for none of
    its run. It says its shape now; read back, the line names no rate (the intervals give the ramp's
    average), and a constant rate's line reads back as before."""
    url = "http://127.0.0.1:8080/"
    ramp = startup_line(100, "GET", 5, [url], None, stages=3)
    assert ramp == f"# sending up to 100 GET req/s in 3 stages with concurrency=5 to {url} ...\n"
    assert startup_line(12.5, "POST", 2, [url], None, stages=1).startswith("# sending up to 12.5 POST req/s in 1 stage ")
    assert startup_line(100, "GET", 5, [url], None, stages=0) == startup_line(100, "GET", 5, [url], None)
    line = interval_line(Line("2026-12-01T10:20:43Z", 0, 10, 0, 0, 10, 100, "1s", (0, 0, 0, 0, 0, 0), 0, "+"))
    staged, steady = load_run(ramp + line, "ramp.log"), load_run(startup_line(100, "GET", 5, [url], None) + line, "x")
    assert staged.startup is not None and staged.startup.rate is None and staged.startup.concurrency == 5
    assert staged.startup.target == url and staged.figures.rate_target == 10
    assert steady.startup is not None and steady.startup.rate == 100 == steady.figures.rate_target


@pytest.mark.parametrize(("qps", "text"), [(100, "100"), (100.0, "100"), (12.5, "12.5"), (0.1, "0.1"), (33.25, "33.25"), (1e-7, "0.0000001")])
def test_rate_is_whole_or_exact(qps: float, text: str) -> None:
    assert format_rate(qps) == text


@pytest.mark.parametrize(("target", "printed"), [(2.5, 3), (0.5, 1), (1.5, 2), (2.4999, 2), (0.0, 0), (6000.0, 6000),
                                                (59.99999, 60), (0.49, 0)])
def test_the_goal_prints_rounded_halves_up_as_go_does(target: float, printed: int) -> None:
    assert rounded_goal(target) == printed


@pytest.mark.parametrize(
    ("responses", "target", "percent"),
    [(195, 200, 97), (200, 200, 100), (204, 200, 100), (0, 200, 0), (0, 0, 100), (5, 0, 100), (199, 200, 99), (1, 3, 33)],
)
def test_goal_percent_truncates_and_caps(responses: int, target: float, percent: int) -> None:
    assert shown_percent(goal_percent(responses, target)) == percent


@pytest.mark.parametrize(
    ("history", "p99", "marker"),
    [
        ([0, 0, 0, 0, 0], 0, ""),
        ([0, 0, 0, 0, 0], 2, "+"),
        ([5, 5, 5, 5, 5], 0, "-"),
        ([1, 1, 1, 1, 1], 10, "+"),
        ([1, 1, 1, 1, 1], 9, ""),
        ([3, 3, 3, 3, 3], 30, "+"),  # exactly ten times: floats say 0.999..., the answer is +
        ([1, 1, 1, 1, 1], 100, "++"),
        ([1, 1, 1, 1, 1], 1000, "+++"),
        ([1, 1, 1, 1, 1], 10**6, "+++"),
        ([100, 100, 100, 100, 100], 10, "-"),
        ([100, 100, 100, 100, 100], 11, ""),
        ([1000, 1000, 1000, 1000, 1000], 1, "---"),
        ([10**6] * 5, 1, "---"),
        ([2, 3, 0, 0, 0], 1, ""),  # mean is the integer mean, 1
    ],
)
def test_change_indicator(history: list[int], p99: int, marker: str) -> None:
    assert change_indicator(history, p99) == marker


def test_change_indicator_agrees_with_slow_cookers_formula_away_from_exact_powers() -> None:
    rng = random.Random(7)
    for _ in range(5000):
        history = [rng.choice([0, rng.randint(1, 10), rng.randint(1, 100_000)]) for _ in range(5)]
        p99 = rng.choice([0, rng.randint(1, 10), rng.randint(1, 100_000)])
        mean = sum(history) // 5
        if mean and p99:
            ratio = math.log10(p99) - math.log10(mean)
            if abs(ratio - round(ratio)) < 1e-9:
                continue  # exact powers of ten: slow_cooker's floats may slip, ours do not
            steps = max(-3, min(3, int(ratio)))
            expected = "+" * steps if steps > 0 else "-" * -steps
        else:
            expected = "" if mean == p99 == 0 else ("+" if mean == 0 else "-")
        assert change_indicator(history, p99) == expected, (history, p99)


def test_the_window_starts_as_zeros_so_a_steady_p99_shows_plus_at_first() -> None:
    """What README and docs/output.md say of `change`: with nothing changing, interval 0 (and 1, here)
    shows `+` while the zeros fill the window; a mean under 1 unit is 0, against which a 1 is `+`."""
    window = ChangeWindow()
    assert [window.push(4) for _ in range(8)] == ["+", "+", "", "", "", "", "", ""]
    window = ChangeWindow()
    assert [window.push(p99) for p99 in [9, 20, 12, 10, 11, 10]] == ["+", "+", "", "", "", ""]
    window = ChangeWindow()
    assert [window.push(p99) for p99 in [0, 0, 1, 0, 0, 0, 1, 1, 0]] == ["", "", "+", "", "", "", "+", "+", ""]


def failed(tally: Tally, url_index: int, text: str, times: int = 1, kind: str = "refused") -> None:
    for _ in range(times):
        tally.add(Result(url_index=url_index, error=kind, error_text=text), 0, 0)


def test_error_lines_are_one_per_distinct_error_with_counts() -> None:
    """slow_cooker's own form, for the common case of one URL per line."""
    tally = Tally()
    failed(tally, 0, "connection refused", 37)
    failed(tally, 1, "timeout: no response headers within 1s", kind="timeout")
    assert error_lines("GET", ["http://127.0.0.1:1/", "http://127.0.0.1:2/x"], tally) == [
        'GET "http://127.0.0.1:1/": connection refused (37 times)\n',
        'GET "http://127.0.0.1:2/x": timeout: no response headers within 1s (1 time)\n',
    ]


def test_one_error_on_several_urls_is_one_line_naming_one_of_them() -> None:
    urls = [f"http://127.0.0.1:1/{k}" for k in range(100)]
    tally = Tally()
    for k in (5, 3, 7):
        failed(tally, k, "connection refused", 2)
    assert error_lines("GET", urls, tally) == ['GET 3 URLs, e.g. "http://127.0.0.1:1/5": connection refused (6 times)\n']
    for k in range(100):
        failed(tally, k, "connection refused")
    assert error_lines("GET", urls, tally) == [
        f'GET more than {GROUP_URLS} URLs, e.g. "http://127.0.0.1:1/5": connection refused (106 times)\n']


def test_texts_that_differ_in_numbers_are_one_line_with_one_real_text() -> None:
    tally = Tally()
    for expected in range(1000, 1975):
        failed(tally, 0, f"closed: cut short (received 3 bytes, expected {expected})", kind="closed")
    assert error_lines("GET", ["http://h/"], tally) == [
        'GET "http://h/": closed: cut short (received 3 bytes, expected 1000) (numbers vary) (975 times)\n']


def test_error_lines_are_bounded_the_rest_in_one_line() -> None:
    """The MAX_ERROR_LINES most frequent groups, in the usual order, then one line for the rest."""
    tally = Tally()
    for k in range(15):
        failed(tally, k, f"error {'x' * k}", times=k + 1, kind="protocol")
    lines = error_lines("POST", [f"http://h/{k}" for k in range(15)], tally)
    assert len(lines) == MAX_ERROR_LINES + 1
    assert lines[0] == f'POST "http://h/5": error {"x" * 5} (6 times)\n'
    assert lines[-2] == f'POST "http://h/14": error {"x" * 14} (15 times)\n'
    assert lines[-1] == "... and 5 more errors (15 times)\n"  # 1 + 2 + 3 + 4 + 5


def test_error_lines_escape_what_a_log_read_back_may_hold() -> None:
    """Texts are escaped when counted; a summary read back (`soak merge`) is escaped when printed too."""
    tally = Tally()
    failed(tally, 0, "evil\x1b[2J\u202e")
    assert error_lines("GET", ["http://h/"], tally) == ['GET "http://h/": evil\\x1b[2J\\u202e (1 time)\n']




# --- the last line of a totalRequests run ------------------------------------------------------

START, WALL, MS = 7_000_000_000_000, 1_767_225_600.0, 1_000_000


def count_run(total: int, sent_at_ms: list[int], skipped: int, sending_end_ms: int,
              reason: str = "totalRequests") -> list[str]:
    """A run of `total` requests at 100 req/s in 1 s intervals, `skipped` sends skipped in its last
    interval and sending ending at sending_end_ms: its lines as the reporter prints them."""
    info = RunInfo(settings_from(merge({"qps": 100, "interval": "1s", "totalRequests": total})), ["http://a/"],
                   None, START, WALL)
    out = io.StringIO()
    reporter = SlowCookerReporter(out, io.StringIO())
    run = Tally()
    end = START + sending_end_ms * MS
    last = sending_end_ms // 1000
    for k in range(last + 1):
        tally = Tally()
        for at in (t for t in sent_at_ms if k * 1000 <= t < (k + 1) * 1000):
            tally.add(Result(status=200, start_ns=START + at * MS), 54 * MS, 0)
        for _ in range(skipped if k == last else 0):
            tally.skipped += 1
        run.merge(tally)
        start = START + k * 1000 * MS
        stop = end if k == last else start + 1000 * MS
        reporter.interval(info, Interval(k, start, stop, tally, end, due=100 * (min(stop, end) - start) / 1e9))
    reporter.finish(RunSummary(info, last + 1, end, end, run, None, None, None, reason, 0.1, 1,
                               due=100 * (end - START) / 1e9))
    return out.getvalue().splitlines()


def test_a_count_sent_in_full_says_so_after_its_last_line() -> None:
    """`50/0/0 54 92%` alone reads as 4 requests lost; the line after it says all 50 went out and
    what the 92% is: sends skipped (its note says so, and that the server set that pace: each request
    took longer than the client's gap between sends), due but not taken from the count."""
    lines = count_run(50, [i * 10 + 40 for i in range(50)], 4, 540)
    assert " 50/0/0 54  92% 540ms " in lines[0]
    assert lines[1] == "# iter 0: 4 sends skipped while requests were still in flight"
    assert lines[2] == "# totalRequests reached: 50 of 50 sent; goal% counts the 4 due sends skipped, which do not use up the count"
    lines = count_run(150, [i * 10 for i in range(150)], 0, 1500)
    assert " 50/0/0 50 100% 500ms " in lines[1] and lines[2] == "# totalRequests reached: 150 of 150 sent"
    assert len(lines) == 3


def test_a_count_line_is_read_back_as_part_of_the_log() -> None:
    lines = count_run(50, [i * 10 + 40 for i in range(50)], 4, 540)
    run = load_run("\n".join(lines) + "\n", "count.log")
    assert not any("totalRequests reached" in note for note in run.notes), run.notes
    assert [i.good for i in run.intervals] == [50]


def test_a_run_stopped_before_its_count_has_no_count_line() -> None:
    assert count_run(50, [i * 10 for i in range(20)], 0, 300, reason="signal SIGTERM") == [
        "2026-01-01T00:00:00Z    0     20/0/0 30  66% 300ms  54 [ 54  54  54   54 ]   54      0 +"]
