"""Failure lines on stderr, end to end: grouped, bounded, and exact in their counts.

A server in trouble is when a soak matters, and when stderr must stay readable: a server that
puts a new number in every answer, or a long URL list against a dead port, must give a few
lines per interval, not one per failure, and every failure must still be counted in them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from runner.core.errors import EXIT_NO_RESPONSE, EXIT_SHARD_MISSING
from runner.report.slowcooker import MAX_ERROR_LINES
from runner.stats.recorder import GROUP_URLS
from tests.conftest import assert_counts_add_up, failure_lines, run_soak
from tests.support.echoserver import EchoServer
from tests.support.faultserver import refused_port

LINE = re.compile(r'^(?:GET|\.\.\.) .*\((\d+) times?\)$')


def error_lines(stderr: str) -> list[str]:
    lines = failure_lines(stderr)  # the last line, that nothing answered, aside
    assert all(LINE.match(line) for line in lines), stderr
    return lines


def counted(lines: list[str]) -> int:
    return sum(int(LINE.match(line).group(1)) for line in lines)  # type: ignore[union-attr]


def test_failures_that_differ_in_their_numbers_are_one_line_per_interval(transport: str) -> None:
    """Each failure says how many bytes it expected, a different number every time."""
    with EchoServer() as server:
        run = run_soak("--qps", "40", "--concurrency", "2", "--interval", "500ms", "--iterations", "3",
                       server.url("/short"))
    assert run.returncode == EXIT_NO_RESPONSE, run.stderr  # every send failed
    summary = assert_counts_add_up(run.stdout)
    assert summary["failed"] == summary["requests"] > 3
    lines = error_lines(run.stderr)
    # One line per interval (one group, one URL), and one for the drain: on a busy machine a
    # request still in flight when the last interval closed fails after it, on a line of its own.
    assert len(lines) <= summary["intervals"] + (summary.get("drain") is not None)
    assert counted(lines) == summary["failed"]
    several = [line for line in lines if not line.endswith("(1 time)")]
    assert several, run.stderr
    assert all(re.fullmatch(rf'GET "{re.escape(server.url("/short"))}": closed: .*\(received 3 bytes, expected '
                            r'1\d\d\d\) \(numbers vary\) \(\d+ times\)', line) for line in several), run.stderr


def test_many_urls_against_a_refused_port_print_a_few_lines(transport: str, tmp_path: Path) -> None:
    """20,000 URLs, each failure on another one: one line per interval naming one URL and how many,
    and a shard's summary whose error records stay small, which `soak merge` prints alike."""
    blocker = refused_port()
    try:
        port = blocker.getsockname()[1]
        urls = tmp_path / "urls.txt"
        urls.write_text("".join(f"http://127.0.0.1:{port}/u{k}\n" for k in range(20_000)))
        run = run_soak("--qps", "400", "--concurrency", "4", "--interval", "500ms", "--iterations", "3",
                       "--shards", "2", "--shard", "0", "--urls", str(urls))
    finally:
        blocker.close()
    assert run.returncode == EXIT_NO_RESPONSE, run.stderr  # every send refused
    summary = assert_counts_add_up(run.stdout)
    assert summary["failed"] == summary["requests"] > 0
    lines = error_lines(run.stderr)
    assert len(lines) <= summary["intervals"] * (MAX_ERROR_LINES + 1)
    assert counted(lines) == summary["failed"]
    # Each send goes to another URL, so an interval with more failures than a group names says
    # "more than". How many an interval gets is the machine's pace (300 due, 70 sent, with both
    # cores kept busy), so the line is asked of the intervals that had them.
    crowded = sum(interval["tally"]["failed"] > GROUP_URLS for interval in summary["shard"]["intervals"])
    assert sum(line.startswith(f'GET more than {GROUP_URLS} URLs, e.g. "http://127.0.0.1:{port}/u') and
               line.endswith(" times)") for line in lines) == crowded, run.stderr
    for interval in summary["shard"]["intervals"]:
        groups = interval["tally"]["errorGroups"]
        # One group wherever something failed; on a busy machine an interval can go by with every
        # send skipped (both cores kept busy: interval 0 sent none), and it has no group at all.
        assert len(groups) == (1 if interval["tally"]["failed"] else 0), groups
        assert all(len(group["urls"]) <= GROUP_URLS for group in groups)
        assert len(json.dumps(groups)) < 1000

    log = tmp_path / "shard-0.log"
    log.write_text(run.stdout)
    merged = run_soak("merge", str(log))
    assert merged.returncode == EXIT_SHARD_MISSING, merged.stderr  # shard 1 of the 2 never ran
    merged_lines = [line for line in merged.stderr.splitlines() if not line.startswith("soak merge: ")]
    assert counted(error_lines("\n".join(merged_lines))) == summary["failed"]
    assert len(merged_lines) <= summary["intervals"] * (MAX_ERROR_LINES + 1)


def test_a_control_character_in_a_summary_read_back_is_printed_escaped(tmp_path: Path) -> None:
    """`soak merge` prints failure texts from logs, which anyone may have written: escaped too."""
    blocker = refused_port()
    try:
        run = run_soak("--qps", "20", "--interval", "500ms", "--iterations", "1", "--shards", "2", "--shard", "0",
                       f"http://127.0.0.1:{blocker.getsockname()[1]}/")
    finally:
        blocker.close()
    assert run.returncode == EXIT_NO_RESPONSE, run.stderr  # every send refused
    lines = run.stdout.splitlines()
    start = lines.index("{")
    summary = json.loads("\n".join(lines[start:]))
    evil = "refused \x1b[2J\x1b]0;owned\x07"
    for interval in summary["shard"]["intervals"]:
        for group in interval["tally"].get("errorGroups", []):
            group["text"] = evil
        for entry in interval["tally"].get("errorTexts", []):  # as an earlier version wrote them
            entry[1] = evil
    log = tmp_path / "shard-0.log"
    log.write_text("\n".join(lines[:start]) + "\n" + json.dumps(summary, indent=2) + "\n")
    merged = run_soak("merge", str(log))
    assert merged.returncode == EXIT_SHARD_MISSING, merged.stderr  # shard 1 of the 2 never ran
    assert "\x1b" not in merged.stderr and "\x07" not in merged.stderr
    assert 'refused \\x1b[2J\\x1b]0;owned\\x07 (' in merged.stderr
