"""The real CLI against real nginx on loopback: layout, rate accuracy, and what nginx saw."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from runner.core.columns import interval_line
from runner.load.fnv import fnv1a64
from runner.report.clientnotes import INTERVAL_NOTE
from runner.report.slowcooker import shown_percent
from runner.stats.figures import goal_percent
from tests.conftest import DEFAULT, GOLDEN, NGINX_PAGE, Nginx, assert_counts_add_up, parse_interval, run_soak
from tests.support import nginxlog

# What nginx sees of a run, and its layout, are not the transport's: every test here runs once, as a
# user's run goes (test_faults.py, test_fault_matrix.py and test_tls.py run each transport and engine).
pytestmark = [pytest.mark.usefixtures("transport"), pytest.mark.transports(DEFAULT)]


def new_log_lines(nginx: Nginx, before: int) -> list[str]:
    return nginx.log_lines()[before:]


def test_100_qps_5_clients_2s_intervals_match_the_reference_layout(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    run = run_soak("--qps", "100", "--concurrency", "5", "--interval", "2s", "--iterations", "3", nginx.url)
    assert run.returncode == 0, run.stderr
    reference = (GOLDEN / "100qps-ms.log").read_text().splitlines()
    assert run.lines[0] == f"# sending 100 GET req/s with concurrency=5 to {nginx.url} ..."
    assert run.lines[1] == reference[1]
    lines = run.interval_lines
    assert len(lines) == 3
    for line in lines:
        # Character for character slow_cooker's layout: the line is exactly what the
        # format (checked against real slow_cooker output in test_slowcooker) makes of
        # its own values, with a Z timestamp and the `2s` interval.
        # How close the rate comes to 200 per interval is the benchmark's to measure
        # (bench/README.md): on a busy machine the client falls behind and skips.
        values = parse_interval(line)
        assert interval_line(values.line()) == line + "\n"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", values.timestamp)
        assert (values.bad, values.failed, values.target, values.interval) == (0, 0, 200, "2s")
    summary = assert_counts_add_up(run.stdout)
    assert list(summary)[:6] == ["p50", "p75", "p90", "p95", "p99", "p999"]
    assert summary["requests"] + summary["skipped"] == 600
    assert summary["statusCodes"] == {"200": summary["requests"]}
    assert summary["bytesIn"] == summary["requests"] * len(NGINX_PAGE)
    # The summary keeps what the lines truncate: sub-millisecond latencies to the microsecond.
    stats = summary["intervalStats"]
    assert [s["good"] for s in stats] == [parse_interval(line).good for line in lines]
    assert all(0 < s["p50"] and int(s["p50"]) == parse_interval(line).latency("p50")
               for s, line in zip(stats, lines, strict=True))
    assert nginx.requests_logged() - before == summary["requests"]


def test_total_requests_stops_at_exactly_that_many(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    run = run_soak("--qps", "200", "--concurrency", "5", "--interval", "1s", "--totalRequests", "137", nginx.url)
    assert run.returncode == 0, run.stderr
    assert run.summary["requests"] == 137
    assert run.summary["stopReason"] == "totalRequests"
    assert_counts_add_up(run.stdout)
    assert nginx.requests_logged() - before == 137


@pytest.mark.parametrize(("qps", "count", "clients"), [(1, 1, 1), (7, 10, 3), (50, 73, 5)])
def test_total_requests_take_their_whole_slots(nginx: Nginx, qps: int, count: int, clients: int) -> None:
    """N sends at q req/s take N/q seconds, the last send's slot included: the rate is q, the
    goals add up to N, and all of them answered is 100% (the sending time once ended when the
    last send left, one slot short: 1 request at 1 req/s read as 34,506 req/s)."""
    run = run_soak("--qps", str(qps), "--concurrency", str(clients), "--interval", "1s", "--iterations", "0",
                   "--totalRequests", str(count), nginx.url)
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    # A send skipped on a busy machine does not use up the count: the run takes its slot too.
    due = count + summary["skipped"]
    assert summary["requests"] == count
    assert summary["rate"]["achieved"] == pytest.approx(qps * count / due, rel=1e-3)
    assert summary["sendingSeconds"] == round(due / qps, 3)
    assert sum(i["t"] for i in summary["intervalStats"]) == pytest.approx(due)
    assert summary["goalPercent"] == shown_percent(goal_percent(count, due))


def test_duration_stops_on_time_with_a_partial_last_interval(nginx: Nginx) -> None:
    run = run_soak("--qps", "50", "--concurrency", "2", "--interval", "1s", "--duration", "2500ms", nginx.url)
    assert run.returncode == 0, run.stderr
    lines = run.interval_lines
    assert [line.split()[5] for line in lines] == ["1s", "1s", "500ms"]
    assert [parse_interval(line).target for line in lines] == [50, 50, 25]
    summary = assert_counts_add_up(run.stdout)
    assert summary["requests"] + summary["skipped"] == 125 and summary["stopReason"] == "duration"


def test_url_list_spreads_sends_evenly(nginx: Nginx, tmp_path: Path) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text(f"# three paths\n{nginx.url}\n\n{nginx.url}teapot\n{nginx.url}fail\n")
    # The open model sends every due send however late the client is, up to the run's end, so the
    # spread is even on a busy machine too: each path gets its 40 but for the sends a client got to
    # only once sending was over (skipped, its own: assert_open_skips_are_the_clients), which may fall
    # on any path. The closed model would skip some unevenly all along.
    before = nginx.requests_logged()
    run = run_soak("--qps", "60", "--concurrency", "4", "--interval", "1s", "--iterations", "2",
                   "--loadModel", "open", f"@{urls}")
    assert run.returncode == 0, run.stderr
    assert run.lines[0] == f"# sending 60 GET req/s with concurrency=4 using url list {urls} ..."
    summary = assert_counts_add_up(run.stdout)
    skipped = assert_open_skips_are_the_clients(run.stdout, summary, 120)
    statuses = {code: n for code, n in summary["statusCodes"].items() if n}
    assert set(statuses) <= {"200", "418", "503"} and sum(statuses.values()) == summary["requests"]
    assert all(40 - skipped <= statuses.get(code, 0) <= 40 for code in ("200", "418", "503")), (statuses, skipped)
    assert (summary["good"], summary["bad"], summary["failed"]) == (statuses.get("200", 0) + statuses.get("418", 0),
                                                                   statuses.get("503", 0), 0)
    # nginx's own count, path by path (`/` is served as its index page), is the runner's
    assert nginxlog.paths(new_log_lines(nginx, before)) == {
        path: statuses[code] for path, code in (("/index.html", "200"), ("/teapot", "418"), ("/fail", "503"))
        if code in statuses}


def assert_open_skips_are_the_clients(stdout: str, summary: dict, due: int) -> int:
    """An open-model run against nginx (maxInFlight never reached): every send due was made or
    skipped, and a skip is one a client got to only once sending was over, its own delay: the notes
    of the intervals they were due in count them all as such, and the run says its client's delay
    may have changed it, never that requests in flight held them up. The skips, 0 where the client
    kept pace (on a busy machine 2 of 120 were: `118/0/0`)."""
    assert summary["requests"] + summary["skipped"] == due, summary
    notes = [line for line in stdout.splitlines() if line.startswith(INTERVAL_NOTE)]
    said = sum(int(n) for note in notes for n in re.findall(r"(\d+) sends? skipped at the run's end", note))
    assert said == summary["skipped"], notes
    assert summary["clientSaturated"] or not summary["skipped"], summary["client"]
    assert "while requests were still in flight" not in stdout, stdout
    return summary["skipped"]


def test_keep_alive_uses_one_connection_per_client_and_no_reuse_one_per_request(nginx: Nginx) -> None:
    for flag in ("--no-noReuse", "--noReuse"):
        before = nginx.requests_logged()
        # A count, not a time, ends the run: exactly 60 requests, however slow the machine.
        run = run_soak("--qps", "60", "--concurrency", "3", "--interval", "1s", "--iterations", "0",
                       "--totalRequests", "60", flag, nginx.url)
        assert run.returncode == 0, run.stderr
        lines = new_log_lines(nginx, before)
        assert len(lines) == 60 == run.summary["requests"]
        expected_connections = 3 if flag == "--no-noReuse" else 60
        assert len(nginxlog.connections(lines)) == expected_connections, flag


def counted_run(nginx: Nginx, count: int, *args: str) -> tuple[dict, list[list[bool]]]:
    """A run of `count` requests (totalRequests: a count, not a time, ends it, however slow the
    machine), all answered and each logged by nginx: its summary, and the connections nginx saw."""
    before = nginx.requests_logged()
    run = run_soak("--interval", "1s", "--iterations", "0", "--totalRequests", str(count), *args, nginx.url)
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    lines = new_log_lines(nginx, before)
    assert len(lines) == count == summary["requests"] == summary["good"]
    return summary, nginxlog.connections(lines)


def assert_each_connection_ended_by_its_last_request(connections: list[list[bool]], clients: int) -> None:
    """The lifetime's one rule, as the server saw it: only a connection's last request says
    Connection: close, and every connection's last says it, but those the run's end left open
    (one per client at most)."""
    assert not any(any(requests[:-1]) for requests in connections), "Connection: close before a connection's last"
    assert sum(1 for requests in connections if not requests[-1]) <= clients


def test_max_requests_per_connection_ends_each_connection_at_its_nth_request(nginx: Nginx) -> None:
    # 60 requests, 3 clients, so at least 60 / 7 connections.
    summary, connections = counted_run(nginx, 60, "--qps", "60", "--concurrency", "3", "--maxRequestsPerConnection", "7")
    assert max(len(requests) for requests in connections) == 7 and len(connections) >= 9
    assert_each_connection_ended_by_its_last_request(connections, clients=3)
    assert all(requests[-1] for requests in connections if len(requests) == 7)  # the 7th said close
    assert sum(summary["connections"].values()) == len(connections)  # the runner's count of them agrees


def test_max_requests_per_connection_holds_for_the_open_models_overlapping_connections(nginx: Nginx) -> None:
    """In the open model a client opens a connection for each request that overlaps another;
    each is held to the limit on its own."""
    _, connections = counted_run(nginx, 100, "--loadModel", "open", "--qps", "200", "--concurrency", "2",
                                 "--maxRequestsPerConnection", "4")
    assert max(len(requests) for requests in connections) <= 4 and len(connections) >= 25
    assert not any(any(requests[:-1]) for requests in connections), "Connection: close before a connection's last"
    assert all(requests[-1] for requests in connections if len(requests) == 4)


def test_max_connection_age_ends_each_connection_once_it_is_that_old(nginx: Nginx) -> None:
    _, connections = counted_run(nginx, 60, "--qps", "60", "--concurrency", "3", "--maxConnectionAge", "200ms")
    assert_each_connection_ended_by_its_last_request(connections, clients=3)
    # At any load some client made at least 20 of the sends, whose due times span 950 ms at 20 req/s
    # each; a client late for some sends its newest due one and skips the rest, so its sends never
    # bunch more than the schedule allows: 20 of them cannot fit into one connection's 200 ms.
    assert len(connections) > 3


def test_headers_host_and_body_arrive_and_secrets_are_never_printed(nginx: Nginx, tmp_path: Path) -> None:
    body = tmp_path / "body.json"
    body.write_bytes(b'{"hello": "soak"}')
    before = nginx.requests_logged()
    run = run_soak(
        "--qps", "20", "--concurrency", "2", "--interval", "500ms", "--iterations", "0", "--totalRequests", "10",
        "--method", "POST", "--body", f"@{body}", "--host", "soak.example", "--headerFromEnv", "Authorization=SOAK_TOKEN",
        f"{nginx.url}echo",
        env={"SOAK_TOKEN": "Bearer s3cr3t-t0ken"},
    )
    assert run.returncode == 0, run.stderr
    lines = new_log_lines(nginx, before)
    assert len(lines) == 10
    for line in lines:
        assert ' POST /echo 200 "soak.example" "Bearer s3cr3t-t0ken" ' in line
    assert run.summary["bytesOut"] == 10 * len(b'{"hello": "soak"}')
    assert "s3cr3t" not in run.stdout + run.stderr
    assert run.summary["config"]["headers"] == {"Authorization": {"fromEnv": "SOAK_TOKEN"}}


def test_hash_check_counts_mismatches_in_bhash(nginx: Nginx) -> None:
    right = str(fnv1a64(NGINX_PAGE))
    for value, mismatches in ((right, False), ("12345", True)):
        run = run_soak("--qps", "40", "--concurrency", "2", "--interval", "1s", "--iterations", "1",
                       "--loadModel", "open", "--hashSampleRate", "1", "--hashValue", value, nginx.url)
        assert run.returncode == 0, run.stderr
        summary = assert_counts_add_up(run.stdout)
        # Every response is checked (a busy machine may skip a send the open model could no
        # longer make before the end, and that one has nothing to check).
        answered = summary["good"] + summary["bad"]
        assert_open_skips_are_the_clients(run.stdout, summary, 40)
        assert answered >= 1
        assert summary["hashChecked"] == answered
        assert summary["hashMismatches"] == (answered if mismatches else 0)
        assert parse_interval(run.interval_lines[0]).bhash == summary["hashMismatches"]


def test_compress_asks_for_gzip_and_hashes_the_decoded_body(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    run = run_soak("--qps", "20", "--concurrency", "1", "--interval", "500ms", "--iterations", "0",
                   "--totalRequests", "10", "--compress",
                   "--hashSampleRate", "1", "--hashValue", str(fnv1a64(NGINX_PAGE)), nginx.url)
    assert run.returncode == 0, run.stderr
    assert all('"gzip"' in line for line in new_log_lines(nginx, before))
    assert run.summary["hashMismatches"] == 0 and run.summary["hashChecked"] == 10
    assert run.summary["bytesIn"] < 10 * len(NGINX_PAGE) / 4, "the wire carried the compressed body"


def test_latency_csv_is_written(nginx: Nginx, tmp_path: Path) -> None:
    csv = tmp_path / "latencies.csv"
    run = run_soak("--qps", "50", "--concurrency", "5", "--interval", "1s", "--iterations", "0",
                   "--totalRequests", "50", "--latencyUnit", "us", "--reportLatenciesCSV", str(csv), nginx.url)
    assert run.returncode == 0, run.stderr
    rows = [tuple(map(int, row.split(", "))) for row in csv.read_text().splitlines()]
    assert rows[0][:2] == (0, 0)
    assert sum(count for _, _, count in rows) == run.summary["good"] == 50
    # The CSV holds each latency in whole units, cut down (slow_cooker's); the summary's max is exact.
    assert rows[-1][2] > 0 and rows[-1][0] <= math.floor(run.summary["max"]) <= rows[-1][1]


def test_open_model_keeps_the_rate_and_reports_both_latencies(nginx: Nginx) -> None:
    run = run_soak("--qps", "100", "--concurrency", "5", "--interval", "1s", "--iterations", "2",
                   "--loadModel", "open", "--latencyUnit", "us", nginx.url)
    assert run.returncode == 0, run.stderr
    summary = assert_counts_add_up(run.stdout)
    # Every due send goes out, however late the client is, up to the run's end: what a client got
    # to only after it is skipped, and its own (none where it kept pace).
    assert_open_skips_are_the_clients(run.stdout, summary, 200)
    assert set(summary["uncorrected"]) == {"p50", "p75", "p90", "p95", "p99", "p999"}
    assert summary["uncorrected"]["p50"] <= summary["p50"]


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
def test_latency_units(nginx: Nginx, unit: str) -> None:
    run = run_soak("--qps", "20", "--concurrency", "2", "--interval", "500ms", "--iterations", "1",
                   "--latencyUnit", unit, nginx.url)
    assert run.returncode == 0, run.stderr
    summary = run.summary
    assert summary["latencyUnit"] == unit
    # A round trip through the kernel takes more than a microsecond, however fast the machine; loopback
    # nginx has answered in 18.6 us, so a floor of tens of microseconds is a guess about speed, not units.
    floor = {"ms": 0, "us": 1, "ns": 1_000}[unit]
    assert summary["p50"] >= floor and summary["max"] >= summary["p999"] >= summary["p50"]


def test_head_requests_have_no_body(nginx: Nginx) -> None:
    """A HEAD response announces a body it does not send: nothing is waited for, nothing counted."""
    before = nginx.requests_logged()
    run = run_soak("--qps", "20", "--concurrency", "2", "--interval", "500ms", "--iterations", "0",
                   "--totalRequests", "10", "--method", "HEAD", "--timeout", "2s", nginx.url)
    assert run.returncode == 0, run.stderr
    summary = run.summary
    assert summary["good"] == summary["requests"] == 10 == nginx.requests_logged() - before
    assert summary["bytesIn"] == 0 and summary["max"] < 1000, "no response waited for the timeout"


def test_send_lag_is_reported_for_paced_runs(nginx: Nginx) -> None:
    for flags in ([], ["--precisePacing"]):
        run = run_soak("--qps", "100", "--concurrency", "2", "--interval", "500ms", "--iterations", "1", *flags,
                       nginx.url)
        assert run.returncode == 0, run.stderr
        lag = run.summary["sendLagUs"]
        assert list(lag) == ["p50", "p99", "p999", "max"]
        assert 0 <= lag["p50"] <= lag["p99"] <= lag["p999"] <= lag["max"]
        assert run.summary["config"]["precisePacing"] is bool(flags)
