"""Per URL, in real runs: weights split the sends as written, each URL has its own figures, and a
threshold scoped to a URL is judged on that URL alone.

The server's own counts are the truth: nginx's access log (one line per request, by path) and
the fault server's count of each path it was asked for. Every assertion holds however slow the
machine: counts add up, and latencies the server itself imposes (a /slow/MS answer is never
faster than MS) are only ever bounded from below.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from runner.core.errors import EXIT_THRESHOLDS
from tests.conftest import Nginx, assert_counts_add_up, run_soak
from tests.support import nginxlog
from tests.support.faultserver import FaultServer

# Every test on each client, the native engine's and httpx's (tests/conftest.py's `transport`):
# the native engine sends by the same wheel and counts each URL apart as the Python engine does.
pytestmark = pytest.mark.usefixtures("transport")

SHORT = ("--qps", "40", "--concurrency", "4", "--interval", "500ms", "--iterations", "3")


def assert_per_url_adds_up(summary: dict) -> None:
    """Every send made went to one URL: the perUrl entries add up to the run, count by count."""
    per_url = summary["perUrl"]
    for key in ("requests", "good", "bad", "failed"):
        assert sum(entry[key] for entry in per_url) == summary[key], key
    errors: Counter[str] = Counter()
    for entry in per_url:
        errors.update(entry["errors"])
        assert entry["requests"] == entry["good"] + entry["bad"] + entry["failed"]
    assert errors == Counter(summary["errors"])


def test_a_weighted_list_splits_three_to_one_within_one_send(nginx: Nginx, tmp_path: Path) -> None:
    """3 /echo : 1 /teapot. Sends are numbered and go round the wheel (a a b a), so whatever the
    machine's pace, the requests made split 3:1 to within one: the runner's count and nginx's agree."""
    urls = tmp_path / "urls.txt"
    urls.write_text(f"# three quarters to /echo\n3 {nginx.url}echo\n{nginx.url}teapot\n")
    checked = run_soak("validate", "--urls", str(urls))
    assert checked.returncode == 0, checked.stderr
    assert f"  to {nginx.url}echo (weight 3: 75% of the requests)" in checked.stdout
    before = nginx.requests_logged()
    done = run_soak(*SHORT, "--urls", str(urls))
    assert done.returncode == 0, done.stderr
    summary = done.summary
    assert_counts_add_up(done.stdout)
    assert_per_url_adds_up(summary)
    counts = {entry["url"]: entry["requests"] for entry in summary["perUrl"]}
    echo, teapot = counts[f"{nginx.url}echo"], counts[f"{nginx.url}teapot"]
    requests = summary["requests"]
    assert requests > 0 and echo + teapot == requests
    assert abs(echo - requests * 3 / 4) < 1 and abs(teapot - requests / 4) < 1, counts
    served = nginxlog.paths(nginx.log_lines()[before:])
    assert served == Counter({"/echo": echo, "/teapot": teapot})  # the server's own count agrees
    assert {entry["url"]: entry["statusCodes"] for entry in summary["perUrl"]} == {
        f"{nginx.url}echo": {"200": echo}, f"{nginx.url}teapot": {"418": teapot}}


def test_weights_on_the_command_line_split_the_same_way(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    done = run_soak(*SHORT, "3", f"{nginx.url}echo", f"{nginx.url}teapot")
    assert done.returncode == 0, done.stderr
    served = nginxlog.paths(nginx.log_lines()[before:])
    requests = done.summary["requests"]
    assert sum(served.values()) == requests and abs(served["/echo"] - requests * 3 / 4) < 1, served


def test_a_bad_weight_is_refused_in_one_line_naming_file_line_and_value(nginx: Nginx, tmp_path: Path) -> None:
    urls = tmp_path / "urls.txt"
    urls.write_text(f"{nginx.url}echo\n0 {nginx.url}teapot\n")
    before = nginx.requests_logged()
    for done in (run_soak("validate", "--urls", str(urls)), run_soak(*SHORT, "--urls", str(urls))):
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (f"soak: {urls}:2: weight '0' is not allowed; a weight is a whole number "
                               "from 1 to 1000\n")
    assert nginx.requests_logged() == before  # nothing sent


def test_a_delayed_url_breaks_its_own_scoped_rule_and_not_the_others(fault_server: FaultServer,
                                                                     tmp_path: Path) -> None:
    """/slow/1000 answers after a second, /ok at once. Every /slow/1000 latency is at least 1 s, so
    its rules break whatever the load; /ok's `p50 < 1s` holds unless half of its answers took that
    long on loopback. The broken rules name their URL in the verdict lines and the termination message."""
    message = tmp_path / "termination-log"
    slow, ok = fault_server.url("/slow/1000"), fault_server.url("/ok")
    rules = "p99{url=/slow/1000} < 1s,p50{url=/slow/1000} < 1s,p50{url=/ok} < 1s," \
            f"errors%{{url={ok}}} <= 0"
    done = run_soak("--qps", "20", "--concurrency", "4", "--interval", "500ms", "--iterations", "3",
                    "--thresholds", rules, "--terminationMessagePath", str(message), slow, ok)
    assert done.returncode == EXIT_THRESHOLDS, done.stderr
    lines = [line for line in done.lines if line.startswith("# threshold")]
    verdicts = {line.split(": ")[0].removeprefix("# threshold run "): line.rsplit(" ", 1)[1] for line in lines[:-1]}
    assert verdicts == {"p99{url=/slow/1000} < 1s": "BROKEN", "p50{url=/slow/1000} < 1s": "BROKEN",
                        "p50{url=/ok} < 1s": "ok", f"errors%{{url={ok}}} <= 0": "ok"}, lines
    summary = done.summary
    assert_per_url_adds_up(summary)
    per_url = {entry["url"]: entry for entry in summary["perUrl"]}
    assert per_url[slow]["min"] >= 1000 and per_url[slow]["requests"] > 0
    rules_out = {rule["rule"]: rule for rule in summary["thresholds"]["rules"]}
    assert rules_out["p50{url=/ok} < 1s"]["url"] == "/ok" and rules_out["p50{url=/ok} < 1s"]["ok"]
    assert rules_out["p99{url=/slow/1000} < 1s"]["measured"] >= 1
    assert fault_server.seen("/slow/1000") == per_url[slow]["requests"]  # the server's own count, per path
    assert fault_server.seen("/ok") == per_url[ok]["requests"]
    text = message.read_text()
    assert "2 of 4 thresholds broken" in text and "p99{url=/slow/1000} < 1s" in text and "/ok" not in text
