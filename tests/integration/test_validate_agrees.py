"""`soak validate` and a run give the same verdict on the same arguments, and the same line.

docs/troubleshooting.md promises it: validate is how a CronJob's settings are checked before
they are deployed. It held for most settings, but validate said valid for a metricAddr host
that is no address (`999.1.1.1`), a CSV path no file can be made at (`/proc/x.csv`), a
linkerdAdmin port of 0 and a bench's -c above its -n, each of which the run then refused. Both
now check through the schema and runner/run/build.py, so each case below is run both ways.
What only the machine the run starts on can tell (a port already taken, an address it does
not have, the proxy's readiness) is the run's alone, and said so in troubleshooting.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Run, free_port, run_soak
from tests.support.faultserver import FaultServer

RUN = ["--qps", "20", "--concurrency", "1", "--interval", "200ms", "--iterations", "1"]

REFUSED = [
    (["--metricAddr", "999.1.1.1:80"],
     '--metricAddr: "999.1.1.1:80" is not allowed: 999.1.1.1 is not an IPv4 address (four numbers from 0 to 255, '
     "without leading zeros)"),
    (["--metricAddr", "[1::2::3]:9090"], '--metricAddr: "[1::2::3]:9090" is not allowed: 1::2::3 is not an IPv6 address'),
    (["--metricAddr", "a..b:9090"], '--metricAddr: "a..b:9090" is not allowed: a..b has an empty label in its host name '
                                    "(a dot first, or two in a row)"),
    (["--reportLatenciesCSV", "/proc/x.csv"], "reportLatenciesCSV: /proc/x.csv: No such file or directory"),
    (["--reportLatenciesCSV", "/nonexistent/x.csv"], "reportLatenciesCSV: /nonexistent/x.csv: No such file or directory"),
    (["--reportLatenciesCSV", "{tmp}"], "reportLatenciesCSV: {tmp}: Is a directory"),
    (["--linkerdAdmin", "127.0.0.1:0", "--linkerdAwait"],
     '--linkerdAdmin: "127.0.0.1:0" is not allowed; must be host:port, like 127.0.0.1:4191 (port 1 to 65535)'),
    (["--linkerdAdmin", "127.0.0.1:0"],
     '--linkerdAdmin: "127.0.0.1:0" is not allowed; must be host:port, like 127.0.0.1:4191 (port 1 to 65535)'),
    (["--linkerdAdmin", "300.0.0.1:4191", "--linkerdShutdown"],
     '--linkerdAdmin: "300.0.0.1:4191" is not allowed: 300.0.0.1 is not an IPv4 address (four numbers from 0 to 255, '
     "without leading zeros)"),
    (["--mode", "bench", "--concurrency", "10", "--totalRequests", "5"],
     "-c: 10 is not allowed; must be at most the number of requests (-n 5), as in ab"),
    (["--workers", "2", "--concurrency", "1"],
     "concurrency: 1 is not allowed; must be at least shards x workers (1 x 2), so that every process has its share"),
    (["--shards", "2", "--shard", "2"], "shard: 2 is not allowed; must be from 0 to 1 (shards: 2)"),
    (["--headerFromEnv", "X-Token=SOAK_TEST_NEVER_SET"],
     "headers.X-Token: environment variable SOAK_TEST_NEVER_SET is not set or empty"),
    (["--caBundle", "/dev/zero"], "caBundle: /dev/zero: is a character device, not a regular file; inputs are read "
                                  "whole before the run starts, so they must be files that end"),
    (["--clientKey", "{tmp}/key.pem"], "clientKey: needs clientCert, the certificate the key belongs to"),
    (["--stages", "2s:10", "--interval", "1s", "--iterations", "3"],
     "stages and iterations: the stages last 2s in all, iterations 3 of interval 1s make 3s; give one of them, or "
     "make them agree"),
    (["--mode", "bench", "--iterations", "0", "--stages", "1s:10"],
     "stages: not allowed with mode bench (a bench sends as fast as it can: no rate to ramp)"),
    (["--stopAtBrokenRule"], "stopAtBrokenRule: true needs intervalThresholds, the rules whose first break stops the run"),
    (["--thresholds", "errors <= 1"], '--thresholds: "errors <= 1" is not allowed; errors without % could be a count or '
                                      'a percentage; rules measure percentages of the sends: write "errors% <= 1"'),
    (["--thresholds", "p99{{url=/checkout}} < 200ms"], 'thresholds: "p99{{url=/checkout}} < 200ms" names no URL of the run: '
                                                     "/checkout is not the path, nor the whole, of any URL it sends to"),
    (["--intervalThresholds", "p99{{url=/ok}} < 200ms"], 'intervalThresholds: "p99{{url=/ok}} < 200ms" is not allowed: a rule '
                                                       "scoped to a URL is judged on the whole run; put it in thresholds"),
    (["--thresholds", "goal%{{url=/ok}} >= 99"], '--thresholds: "goal%{{url=/ok}} >= 99" is not allowed; goal% is the '
                                               "run's, not a URL's: sends are due and skipped for the whole run; scope "
                                               "a latency, errors%, failed%, bad%, a status (4xx%, 401%) or rate"),
    (["--thresholds", "4xx <= 1"], '--thresholds: "4xx <= 1" is not allowed; 4xx without % could be a count or a '
                                   'percentage; rules measure percentages of the responses: write "4xx% <= 1"'),
    (["--intervalThresholds", "4xx%{{url=/ok}} <= 1"], 'intervalThresholds: "4xx%{{url=/ok}} <= 1" is not allowed: a '
                                                     "rule scoped to a URL is judged on the whole run; put it in "
                                                     "thresholds"),
    (["--thresholds", "401%{{url=/checkout}} == 0"], 'thresholds: "401%{{url=/checkout}} == 0" names no URL of the run: '
                                                   "/checkout is not the path, nor the whole, of any URL it sends to"),
]

ACCEPTED = [
    [],
    ["--stages", "100ms:20,100ms:0"],  # 200ms, as iterations 1 of interval 200ms say
    ["--warmup", "200ms"],
    ["--metricAddr", "127.0.0.1:{port}"],
    ["--metricAddr", "localhost:{port}"],
    ["--reportLatenciesCSV", "{tmp}/latencies.csv"],
    ["--linkerdAdmin", "localhost:4191"],  # neither awaited nor shut down: not used, but still checked
    ["--thresholds", "errors% <= 50"],
    ["--thresholds", "p99{{url=/ok}} < 10s"],  # by its path (braces doubled: these are formatted)
    ["--thresholds", "4xx% <= 1, 401%{{url=/ok}} == 0", "--intervalThresholds", "5xx% == 0"],
]


def both(args: list[str], url: str) -> tuple[Run, Run]:
    """`soak validate ARGS URL` and a one-interval run with the same arguments."""
    return run_soak("validate", *args, url), run_soak(*RUN, *args, url)


@pytest.mark.parametrize(("args", "line"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_what_the_run_refuses_validate_refuses_with_the_same_line(fault_server: FaultServer, tmp_path: Path,
                                                                  args: list[str], line: str) -> None:
    args = [a.format(tmp=tmp_path) for a in args]
    checked, ran = both(args, fault_server.url("/ok"))
    for done in (checked, ran):
        assert (done.returncode, done.stdout) == (2, ""), (args, done.stderr[-2000:])
        assert done.stderr == f"soak: {line.format(tmp=tmp_path)}\n", args
    assert fault_server.seen() == 0  # nothing was sent
    assert list(tmp_path.iterdir()) == []  # and no file was left behind (a CSV made to test the path)


@pytest.mark.parametrize("args", ACCEPTED, ids=[" ".join(a) or "defaults" for a in ACCEPTED])
def test_what_validate_accepts_the_run_runs(fault_server: FaultServer, tmp_path: Path, args: list[str]) -> None:
    port = free_port()
    args = [a.format(tmp=tmp_path, port=port) for a in args]
    checked, ran = both(args, fault_server.url("/ok"))
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.summary["requests"] + ran.summary["skipped"] > 0
    if "--reportLatenciesCSV" in args:  # validate made no file; the run wrote it
        assert [p.name for p in tmp_path.iterdir()] == ["latencies.csv"]
