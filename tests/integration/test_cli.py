"""The command line as users meet it: demo, validate, help, and one-line errors."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from runner.config.abflags import BENCH_HIDES
from runner.config.flags import COMMON_SETTINGS, SETTING_GROUPS
from runner.config.schema import settings_names
from runner.run.memory import CGROUP_ROOT_ENV
from tests.conftest import REPO, Nginx, assert_counts_add_up, run_soak


def test_demo_runs_a_short_soak_against_the_built_in_target() -> None:
    run = run_soak("demo", timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.lines[0].startswith("# sending 100 GET req/s with concurrency=5 to http://127.0.0.1:")
    lines = run.interval_lines
    assert len(lines) == 5 and all(" 1s " in line for line in lines), lines
    # Every send of 5 s at 100 req/s made or skipped, and every one made answered: true however
    # busy the machine (a busy one skips some, so 100% on every line is not).
    summary = assert_counts_add_up(run.stdout)
    assert summary["requests"] + summary["skipped"] == 500
    assert summary["good"] == summary["requests"] > 0


def test_demo_takes_setting_flags() -> None:
    run = run_soak("demo", "--iterations", "2", "--interval", "500ms", "--latencyUnit", "us", "--noLatencySummary")
    assert run.returncode == 0, run.stderr
    assert len(run.interval_lines) == 2
    assert "{" not in run.lines


def test_validate_describes_the_shipped_pallet_without_sending(tmp_path: Path) -> None:
    # as on a machine with no memory limit (an empty cgroup tree): a limit adds a line (test_validate_memory.py)
    run = run_soak("validate", "--config", "configuration.json", "--urls", "urlsconfigmap.yaml",
                   env={CGROUP_ROOT_ENV: str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert run.lines == [
        "configuration.json: valid",
        "urlsconfigmap.yaml: 1 URL",
        "would send 100 GET req/s (closed model: 5 clients at 20 req/s each, one request in flight per client)",
        "  to http://nginx.soak-target.svc.cluster.local",
        "for 59 intervals of 1m0s (59m0s), 354000 requests in all",
        "timeout 10s, keep-alive (one connection per client at a time), compression off, latency in ms",
        "a connection ends after its 50th request: that request says Connection: close and the next send dials anew "
        "(behind a load balancer or a Service: a new pick of backend; a host name is looked up again, its addresses "
        "dialled in turn); at least 7080 connections over the run",
        'counts responses by the backend named in their X-Soak-Backend header (the first 20 by count by name, the '
        'rest as "other"; without the header: "(none)"); a # iter line says when an interval reached fewer '
        "backends than the one before",
        "body: none",
        "output: interval lines on stdout, a JSON summary on stdout, failures on stderr",
        "threshold (run): errors% <= 1",
        "threshold (run): goal% >= 95",
        "threshold (run): 4xx% <= 1",
        "exit code 3 if any threshold is broken",
    ]


def test_validate_in_a_pod_of_a_split_run_says_what_that_pod_does() -> None:
    """The pallet's scale-out pods run with --shards=3 and Kubernetes' index: validate there says this
    pod's share and wait, beside the whole run (it said only "100 GET req/s, 5 clients")."""
    run = run_soak("validate", "--config", "configuration.json", "--urls", "urlsconfigmap.yaml", "--shards=3",
                   env={"JOB_COMPLETION_INDEX": "2"})
    assert run.returncode == 0, run.stderr
    assert run.lines[2].startswith("the whole run would send 100 GET req/s (closed model: 5 clients")
    # The shipped run: 59 intervals of 1m at 100 req/s.
    assert ("this process: shard 2 of 3 (JOB_COMPLETION_INDEX=2), sends 33.333 of the 100 GET req/s with 1 of the 5 "
            "clients, 118000 of the 354000 requests") in run.lines
    assert "waits for the next interval boundary (a multiple of 1m0s on the wall clock) to start, as every shard " \
           "does: up to 1m0s after it is started" in run.lines


@pytest.mark.parametrize("flags", [["--shards", "2", "--shard", "2"], ["--workers", "4", "--concurrency", "2"],
                                   ["--mode", "bench", "--workers", "3", "--concurrency", "2"], ["--body", "@/nonexistent/body"],
                                   ["--reportLatenciesCSV", "/nonexistent/x.csv"]])
def test_validate_refuses_what_a_run_refuses(flags: list[str]) -> None:
    """validate said "valid" for settings every run then refused (a pod exiting 2 each hour)."""
    url = "http://127.0.0.1:9/"  # never reached: both refuse before sending
    checked = run_soak("validate", *flags, url)
    run = run_soak(*flags, "--iterations", "1", "--interval", "1s", url)
    assert checked.returncode == run.returncode == 2
    assert checked.stderr == run.stderr and len(run.stderr.splitlines()) == 1, run.stderr


def test_validate_shows_flag_overrides_and_hides_secrets(tmp_path: Path) -> None:
    config = tmp_path / "configuration.json"
    config.write_text('{"qps": 10, "headers": {"Authorization": {"fromEnv": "TOKEN"}, "X-Team": "sre"}}')
    run = run_soak("validate", "--config", str(config), "--qps", "250.5", "--duration", "90s", "http://127.0.0.1:9/",
                   env={"TOKEN": "hunter2"})
    assert run.returncode == 0, run.stderr
    assert "would send 250.5 GET req/s" in run.stdout
    assert "for 1m30s, one line every 1m0s, 22545 requests in all" in run.stdout
    assert "header Authorization: <from environment variable TOKEN, set here>" in run.stdout
    assert "header X-Team: sre" in run.stdout
    assert "hunter2" not in run.stdout


BAD_INPUTS = [
    (["--qps", "0", "http://127.0.0.1:9/"], "soak: --qps: 0 is not allowed; must be at least 0.001"),
    (["--config", "", "http://127.0.0.1:9/"], "soak: --config: the file name is empty"),  # once ran the defaults
    (["--qps", "fast", "http://127.0.0.1:9/"], 'soak: --qps: "fast" is not allowed; must be a number'),
    (["--interval", "10", "http://127.0.0.1:9/"], 'soak: --interval: "10" is not allowed; must be a duration like 500ms, 10s, 1m or 1m30s, greater than 0'),
    (["--latencyUnit", "s", "http://127.0.0.1:9/"], 'soak: --latencyUnit: "s" is not allowed; must be one of "ms", "us", "ns"'),
    (["--qsp", "5", "http://127.0.0.1:9/"], "soak: unrecognized arguments: --qsp (did you mean --qps?) (see soak --help)"),
    # No abbreviations: in a manifest, `--conf` must fail, not quietly mean --config.
    (["--conf", "configuration.json", "http://127.0.0.1:9/"],
     "soak: unrecognized arguments: --conf (did you mean --config?) (see soak --help)"),
    (["ftp://127.0.0.1/"], "soak: URL argument: 'ftp://127.0.0.1/' is not an http:// or https:// URL"),
    ([], "soak: no URL: give one or more as arguments, @FILE for a list, or --urls FILE"),
    (["--config", "no-such.json", "http://127.0.0.1:9/"], "soak: no-such.json: no such file"),
    (["--urls", "urlsconfigmap.yaml", "http://127.0.0.1:9/"], "soak: give URLs either as arguments or with --urls, not both"),
    (["-H", "NoColon", "http://127.0.0.1:9/"], 'soak: --header: "NoColon" is not allowed; must be "Name: value"'),
    (["--headerFromEnv", "Authorization=SOAK_UNSET_VAR", "http://127.0.0.1:9/"],
     "soak: headers.Authorization: environment variable SOAK_UNSET_VAR is not set or empty"),
    (["--body", "@/no/such/body", "http://127.0.0.1:9/"], "soak: body.file: /no/such/body: no such file"),
    (["--reportLatenciesCSV", "/no/such/dir/x.csv", "http://127.0.0.1:9/"],
     "soak: reportLatenciesCSV: /no/such/dir/x.csv: No such file or directory"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    run = run_soak(*args, timeout=30)
    assert run.returncode == 2
    assert run.stderr == message + "\n"
    assert run.stdout == ""


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ('{"qps": 100, "concurency": 5}', '$: unknown key "concurency" (did you mean "concurrency"?)'),
        ('{"qps": 100,\n "interval": 60}', '$.interval: 60 is not allowed; must be a string'),
        ('{"qps": 100,\n}', "line 2, column 1: Expecting property name enclosed in double quotes"),
        ('{"iterations": 5, "duration": "1m"}', "$: give iterations or duration, not both"),
        ('{"headers": {"Authorization": "Bearer x\\ny"}}', "$.headers.Authorization: the value is not allowed"),
    ],
)
def test_bad_config_file_names_file_path_and_value(tmp_path: Path, config: str, message: str) -> None:
    path = tmp_path / "configuration.json"
    path.write_text(config)
    run = run_soak("validate", "--config", str(path), "http://127.0.0.1:9/")
    assert run.returncode == 2
    assert run.stderr.startswith(f"soak: {path}: {message}")
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


def test_a_bad_output_path_stops_the_run_before_any_request(nginx: Nginx) -> None:
    before = nginx.requests_logged()
    run = run_soak("--iterations", "1", "--interval", "1s", "--reportLatenciesCSV", "/no/such/dir/x.csv", nginx.url)
    assert run.returncode == 2
    assert nginx.requests_logged() == before


def test_help_lists_every_setting_as_a_flag() -> None:
    run = run_soak("--help")
    assert run.returncode == 0
    for name in settings_names():
        flag = {"headers": "--header", "body": "--body", "remoteWriteHeaders": "--remoteWriteHeader",
                "otlpHeaders": "--otlpHeader"}.get(name, f"--{name}")
        assert flag in run.stdout, flag


def option_sections(help_text: str) -> dict[str, list[str]]:
    """`--help`'s sections, by title, each with the flags its lines start with, in order."""
    sections: dict[str, list[str]] = {}
    title = ""
    for line in help_text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            title = line[:-1]
            sections[title] = []
        elif title and line.startswith("  -"):
            sections[title].append(line.split()[0].rstrip(","))
    return sections


def test_help_lists_the_common_settings_first_then_the_rest_by_what_they_are_about() -> None:
    """Issue 32: `soak --help` was 284 lines, its usage 28 of them, every setting in one list in the
    schema's order. Now its usage is one line, the few settings most runs set come first, and the
    rest follow in groups, each flag once."""
    run = run_soak("--help")
    assert run.returncode == 0
    assert run.lines[0] == "usage: soak [run] [--config FILE] [--urls FILE] [--SETTING VALUE ...] [URL | @FILE ...]"
    sections = option_sections(run.stdout)
    titles = list(sections)
    assert titles[:3] == ["positional arguments", "options", "common settings (each overrides the config file)"]
    assert titles[3:-1] == [title for title, _ in SETTING_GROUPS]
    flags = {"headers": ["-H", "--headerFromEnv"], "remoteWriteHeaders": ["--remoteWriteHeader"],
             "otlpHeaders": ["--otlpHeader"]}
    assert sections[titles[2]] == [f for name in COMMON_SETTINGS for f in flags.get(name, [f"--{name}"])]
    assert sections[titles[2]][0] == "--qps"
    offered = [f for fs in sections.values() for f in fs]
    assert sorted(offered) == sorted(set(offered)), "each flag once"
    for name in settings_names():
        assert flags.get(name, [f"--{name}"])[0] in offered, name


def test_bench_help_offers_only_what_a_bench_honours() -> None:
    """Issue 32: `soak bench --help` repeated every setting, most of which a bench ignores (qps,
    loadModel) or refuses (stages, warmup, shards), and the --<setting> twins of ab's flags. It offers
    ab's flags (-H among them) and the settings a bench has a use for, with a bench's defaults; those
    it hides are still taken (tests/integration/test_bench.py's --loadModel)."""
    run = run_soak("bench", "--help")
    assert run.returncode == 0
    assert run.lines[0].startswith("usage: soak bench [-n requests] [-c concurrency] [-t timelimit] [-k] [-H ")
    sections = option_sections(run.stdout)
    assert sections["ab's options"] == ["-n", "-c", "-t", "-k", "-p", "-T", "-s", "-m", "-H", "--headerFromEnv"]
    offered = {f for fs in sections.values() for f in fs}
    assert not offered & {f"--{name}" for name in BENCH_HIDES}
    assert {"--interval", "--thresholds", "--workers", "--engine", "--backendHeader"} <= offered
    interval_help = run.stdout.split("--interval DURATION", 1)[1].split("--iterations", 1)[0]
    assert "Default: 1s." in " ".join(interval_help.split())  # a bench's, not a soak's 1m
    assert len(run.lines) < len(run_soak("--help").lines)


def test_console_script_is_installed() -> None:
    """`pip install .` puts `soak` on PATH (README and .ci/run install it)."""
    soak = shutil.which("soak")
    assert soak is not None, "soak is not on PATH: pip install ."
    done = subprocess.run([soak, "--version"], capture_output=True, text=True, cwd=REPO, timeout=30)
    assert done.stdout.strip().startswith("soak ")


def test_peak_memory_is_the_runners_own_not_its_parents() -> None:
    """getrusage's ru_maxrss survives exec on Linux; the summary must not report the parent's size."""
    ballast = bytearray(300 * 1024 * 1024)  # this test process is now larger than any runner
    ballast[::4096] = b"x" * len(ballast[::4096])  # touched, so resident
    run = run_soak("demo", "--iterations", "1", "--interval", "200ms")
    assert run.returncode == 0, run.stderr
    assert run.summary["process"]["maxRssBytes"] < 150 * 1024 * 1024
    del ballast


def test_help_lists_the_other_commands() -> None:
    """`soak --help` is the first thing a user reads; it must say that validate, merge... exist."""
    done = run_soak("--help")
    assert done.returncode == 0
    listed = [line.split()[1] for line in done.stdout.split("other commands (each has --help):\n")[1].splitlines()]
    assert listed == ["demo", "validate", "bench", "merge", "compare", "plot", "report", "history"]
