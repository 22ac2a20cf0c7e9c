"""ab's report, character for character: real ab output (tests/golden/ab-*.txt) rebuilt from its numbers.

The golden files are real ApacheBench 2.3 runs. Each is parsed back into the summary dict's
"bench" section, the formatter prints it, and the text must be ab's exactly: every label,
space, blank line and number format. The rates are derived in the formatter, so the time
taken is recovered from ab's own "Requests per second" line, precise enough to print every
rate again to the last digit.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runner.report.abreport import (
    BUSY_SHARE,
    banner,
    busy_note,
    finished_line,
    heartbeat,
    progress_line,
    report,
    report_with_notes,
    round_ms,
    sanity_lines,
)
from tests.conftest import GOLDEN
from tests.support.abparse import parse_ab

COPYRIGHT = (
    "This is ApacheBench, Version 2.3 <$Revision$>\n"
    "Copyright 1996 Adam Twiss, Zeus Technology Ltd, http://www.zeustech.net/\n"
    "Licensed to The Apache Software Foundation, http://www.apache.org/\n"
    "\n"
)




@pytest.mark.parametrize("golden", ["ab-nginx.txt", "ab-faults.txt"])
def test_report_is_abs_layout_character_for_character(golden: str) -> None:
    text = (GOLDEN / golden).read_text()
    summary = parse_ab(text)
    every = heartbeat(summary["bench"]["complete"])
    assert COPYRIGHT + banner(summary["bench"]["host"], every) + report(summary) == text


def test_the_goldens_cover_every_optional_line() -> None:
    """Between them, the golden runs show each line ab prints only sometimes."""
    nginx, faults = ((GOLDEN / name).read_text() for name in ("ab-nginx.txt", "ab-faults.txt"))
    for line in ("Keep-Alive requests:", "Total body sent:", "kb/s sent", "kb/s total"):
        assert line in nginx and line not in faults
    for line in ("   (Connect: ", "Non-2xx responses:", "Server Software:        \n"):
        assert line in faults and line not in nginx


def test_progress_lines_are_abs() -> None:
    """ab -n 50000 prints a line every 5000 requests on stderr, then "Finished"."""
    expected = (GOLDEN / "ab-nginx-stderr.txt").read_text()
    every = heartbeat(50_000)
    assert every == 5000
    lines = [progress_line(done) for done in range(every, 50_001, every)]
    assert "".join(lines) + finished_line(50_000, every) == expected


@pytest.mark.parametrize("requests, every", [(1, 0), (150, 0), (151, 100), (1000, 100), (1999, 199), (50_000, 5000)])
def test_heartbeat_as_ab_computes_it(requests: int, every: int) -> None:
    assert heartbeat(requests) == every


def test_small_runs_have_no_progress_and_end_with_done() -> None:
    """ab -n 150 or fewer: "(be patient)...", then "..done" on stdout."""
    assert banner("127.0.0.1", heartbeat(100)) + finished_line(100, heartbeat(100)) == (
        "Benchmarking 127.0.0.1 (be patient).....done\n")


@pytest.mark.parametrize("ms, whole", [(0.0, 0), (0.499, 0), (0.5, 1), (1.499, 1), (2.5, 3), (1234.567, 1235)])
def test_round_ms_halves_up_like_ap_round_ms(ms: float, whole: int) -> None:
    assert round_ms(ms) == whole


# --- hand-made summaries: which lines appear when -----------------------------------------------


def phase(low: float, mean: float, sd: float, median: float, high: float) -> dict[str, float]:
    return {"min": low, "mean": mean, "sd": sd, "median": median, "max": high}


BASE: dict[str, Any] = {"bench": {
    "server": "nginx", "host": "example.test", "port": 80, "path": "/a?b=c", "documentLength": 612,
    "concurrency": 4, "keepAlive": False, "timeTakenSeconds": 2.0, "complete": 1000, "failed": 0,
    "failures": {"connect": 0, "receive": 0, "length": 0, "exceptions": 0}, "non2xx": 0, "keepAliveRequests": 0,
    "totalTransferred": 845_000, "htmlTransferred": 612_000, "bodySent": 0,
    "phases": {
        "connect": phase(0.1, 0.3, 0.1, 0.3, 1.2),
        "processing": phase(1.0, 7.6, 2.04, 7.4, 30.5),
        "waiting": phase(0.9, 7.0, 2.0, 6.8, 30.0),
        "total": phase(1.2, 7.9, 2.1, 7.7, 31.49),
    },
    "servedWithin": {"50": 7.7, "66": 8.2, "75": 8.6, "80": 9.1, "90": 10.4, "95": 11.5, "98": 13.6, "99": 15.5,
                     "100": 31.49},
}}


def with_bench(**changes: Any) -> dict[str, Any]:
    summary = copy.deepcopy(BASE)
    summary["bench"].update(changes)
    return summary


def test_a_plain_run() -> None:
    assert report(BASE) == """

Server Software:        nginx
Server Hostname:        example.test
Server Port:            80

Document Path:          /a?b=c
Document Length:        612 bytes

Concurrency Level:      4
Time taken for tests:   2.000 seconds
Complete requests:      1000
Failed requests:        0
Total transferred:      845000 bytes
HTML transferred:       612000 bytes
Requests per second:    500.00 [#/sec] (mean)
Time per request:       8.000 [ms] (mean)
Time per request:       2.000 [ms] (mean, across all concurrent requests)
Transfer rate:          412.60 [Kbytes/sec] received

Connection Times (ms)
              min  mean[+/-sd] median   max
Connect:        0    0   0.1      0       1
Processing:     1    8   2.0      7      31
Waiting:        1    7   2.0      7      30
Total:          1    8   2.1      8      31

Percentage of the requests served within a certain time (ms)
  50%      8
  66%      8
  75%      9
  80%      9
  90%     10
  95%     12
  98%     14
  99%     16
 100%     31 (longest request)
"""


def test_failure_breakdown_only_when_something_failed() -> None:
    assert "(Connect:" not in report(BASE)
    failures = {"connect": 1, "receive": 2, "length": 3, "exceptions": 4}
    text = report(with_bench(failed=10, failures=failures))
    assert "Failed requests:        10\n   (Connect: 1, Receive: 2, Length: 3, Exceptions: 4)\n" in text


def test_non_2xx_only_when_there_were_some() -> None:
    assert "Non-2xx" not in report(BASE)
    assert "Failed requests:        0\nNon-2xx responses:      7\nTotal transferred:" in report(with_bench(non2xx=7))


def test_keep_alive_line_only_with_keep_alive() -> None:
    assert "Keep-Alive" not in report(with_bench(keepAliveRequests=996))
    text = report(with_bench(keepAlive=True, keepAliveRequests=996))
    assert "Failed requests:        0\nKeep-Alive requests:    996\nTotal transferred:" in text


def test_body_sent_lines_only_with_a_body() -> None:
    assert "sent" not in report(BASE)
    text = report(with_bench(bodySent=45_000))
    assert "Total transferred:      845000 bytes\nTotal body sent:        45000\nHTML transferred:" in text
    assert ("Transfer rate:          412.60 [Kbytes/sec] received\n"
            "                        21.97 kb/s sent\n"
            "                        434.57 kb/s total\n") in text


def test_nothing_completed_has_no_rates_or_tables() -> None:
    failures = {"connect": 20, "receive": 0, "length": 0, "exceptions": 0}
    text = report(with_bench(complete=0, failed=20, failures=failures, documentLength=0, totalTransferred=0,
                             htmlTransferred=0, server=""))
    assert text.endswith("Failed requests:        20\n   (Connect: 20, Receive: 0, Length: 0, Exceptions: 0)\n"
                         "Total transferred:      0 bytes\nHTML transferred:       0 bytes\n")
    assert "Server Software:        \n" in text


def test_one_request_has_times_but_no_percentages() -> None:
    text = report(with_bench(complete=1))
    assert "Connection Times (ms)" in text and "Percentage" not in text


def test_no_time_taken_has_no_rates() -> None:
    text = report(with_bench(timeTakenSeconds=0.0))
    assert "Requests per second" not in text and "Connection Times" in text


@pytest.mark.parametrize("mean, median, sd, expected", [
    (8, 8, 0.0, []),
    (8.4, 7.6, 0.5, []),  # whole ms 8 and 8: no gap
    (9, 8, 1.0, []),  # one sd apart: fine
    (9, 8, 0.9, ["WARNING: The median and mean for the total time are not within a normal deviation",
                 "        These results are probably not that reliable."]),
    (10, 8, 1.0, ["WARNING: The median and mean for the total time are not within a normal deviation",
                  "        These results are probably not that reliable."]),
    (10, 8, 0.99, ["ERROR: The median and mean for the total time are more than twice the standard",
                   "       deviation apart. These results are NOT reliable."]),
])
def test_sanity_lines_as_abs_sane_macro(mean: float, median: float, sd: float, expected: list[str]) -> None:
    assert sanity_lines("the total time", phase(0, mean, sd, median, 20)) == expected


def test_sanity_lines_follow_the_table_in_row_order() -> None:
    summary = copy.deepcopy(BASE)
    summary["bench"]["phases"]["connect"] = phase(0, 3, 0.5, 0, 9)
    summary["bench"]["phases"]["total"] = phase(0, 12, 2.0, 9, 40)
    text = report(summary)
    table_end = text.index("Total:      ")
    connect = text.index("ERROR: The median and mean for the initial connection time")
    total = text.index("WARNING: The median and mean for the total time")
    assert table_end < connect < total < text.index("Percentage of the requests")


# --- the note after the report: clients that were mostly not in a request ----------------------


def with_total_mean(mean: float, **changes: Any) -> dict[str, Any]:
    summary = with_bench(**changes)
    summary["bench"]["phases"]["total"]["mean"] = mean
    return summary


def test_no_note_when_the_clients_were_busy() -> None:
    """BASE: Time per request 8.000 ms, Total's mean 7.9: the clients were in requests 99% of the time."""
    assert busy_note(BASE["bench"]) == ""
    assert report_with_notes(BASE) == report(BASE)


def test_the_note_when_the_two_figures_disagree() -> None:
    """The issue's bench: 100 clients, Time per request 99.798 ms, Total's mean 8 ms."""
    summary = with_total_mean(8.0, concurrency=100, timeTakenSeconds=0.99798, complete=1000)
    note = ("# clients busy 8% of the time: Time per request 99.798 [ms] (mean) counts 100 clients as always "
            "waiting for a response, but a request took 8.000 ms (Total, mean); the client kept 8.0 of its 100 "
            "requests in flight on average, so its pace, not the server's, set the rates above, and a server given "
            "that many at once may answer faster than under ab's 100\n")
    assert busy_note(summary["bench"]) == note
    assert report_with_notes(summary) == report(summary) + note, "ab's lines first, unchanged"
    assert "Time per request:       99.798 [ms] (mean)" in report(summary)


def test_with_failures_the_note_says_they_are_not_timed() -> None:
    summary = with_total_mean(1.0, failed=5)
    assert busy_note(summary["bench"]).endswith(
        "; the rest went on failed requests (which are not timed) and on the client's own work between requests\n")


@pytest.mark.parametrize("share", [0.0, 0.1, 0.49, 0.5, 0.75, 0.8999, 0.9, 0.9001, 1.0, 1.2])
@pytest.mark.parametrize("keep_alive", [0, 1000])
def test_the_note_is_due_whenever_a_tenth_fewer_requests_were_in_flight(share: float, keep_alive: int) -> None:
    """Kept alive or not: at 75% busy (7.5 of 10 requests in flight, ab keeping nearer 10) the
    latencies of the two differ, and the note was not printed above half."""
    per_request = 4 * 2.0 * 1000 / 1000  # BASE: 8 ms
    summary = with_total_mean(share * per_request, keepAlive=bool(keep_alive), keepAliveRequests=keep_alive)
    assert bool(busy_note(summary["bench"])) == (share < BUSY_SHARE) and BUSY_SHARE == 0.9


def test_no_note_without_times() -> None:
    assert busy_note(with_bench(complete=0)["bench"]) == ""
    assert busy_note(with_bench(timeTakenSeconds=0)["bench"]) == ""
