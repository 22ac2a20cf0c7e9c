"""A run loads only what the run at hand needs (issue 22: a short run's cost is mostly its start).

Each case runs the real CLI (runner.cli.main, what `python -m runner` runs) in a fresh
interpreter against loopback nginx, then writes out the modules it loaded. A plain run over
HTTP with settings given as plain flags must load none of OPTIONAL: each is what only some runs
use, and importing it (or what it stands for: certifi's CA bundle made into a TLS context) cost
more instructions than the run itself. Each module's control is a run with the setting that needs
it, which must load it: the check sees a module when it is there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, Nginx, free_port

# What each module is for: the flags (before the URL) of a run that needs it.
OPTIONAL: dict[str, tuple[str, ...]] = {
    "prometheus_client": ("bench", "-n", "1", "--metricAddr", "127.0.0.1:{port}"),  # metrics
    "httpx": ("bench", "-n", "1", "--transport", "httpx"),  # the httpx transport
    "yaml": ("bench", "-n", "1", "--urls", "{configmap}"),  # a URL list that is a ConfigMap
    "jsonschema": ("bench", "-n", "1", "-H", "X-Soak: 1"),  # a setting the plain check leaves to the validator
    "multiprocessing": ("bench", "-n", "2", "-c", "2", "--workers", "2"),  # local workers
    "certifi": ("validate", "{https}"),  # an https URL: the TLS context, made from certifi's CA bundle
    "cramjam": ("bench", "-n", "1", "--remoteWrite", "http://127.0.0.1:{port}/api/v1/write"),  # remote write's snappy
    "google.protobuf": ("bench", "-n", "1", "--otlp", "http://127.0.0.1:{port}"),  # OTLP's messages
    "http.client": ("bench", "-n", "1", "--linkerdAwait", "--linkerdAwaitTimeout", "1s",
                    "--linkerdAdmin", "127.0.0.1:{port}"),  # the Linkerd proxy's admin server
    "runner.store": ("bench", "-n", "1", "--resultsStore", "file://{store}"),  # run records kept
    "obstore": ("bench", "-n", "1", "--resultsStore", "s3://soak-records/x"),  # ... in S3 (AWS_ENDPOINT_URL: below)
    # Issue 34: soak's own parts that only some settings use.
    "runner.report.verdict": ("bench", "-n", "1", "--thresholds", "p99 < 10s"),  # thresholds judged
    "runner.metrics": ("bench", "-n", "1", "--metricAddr", "127.0.0.1:{port}"),  # metrics counted
    "xml.etree": ("bench", "-n", "1", "--junit", "{out}/junit.xml"),  # the JUnit file
    "runner.report.csvreport": ("bench", "-n", "1", "--reportLatenciesCSV", "{out}/latencies.csv"),
    "runner.config.jsonfile": ("bench", "-n", "1", "--config", "{config}"),  # a configuration.json
    "runner.config.rules": ("bench", "-n", "1", "--thresholds", "p99 < 10s"),  # the rules' parser
    "runner.run.warmup": ("run", "--qps", "20", "--concurrency", "1", "--totalRequests", "2", "--interval", "1s",
                          "--warmup", "100ms"),  # a warm-up (on an engine of its own)
    "runner.load.alarm": ("run", "--qps", "20", "--concurrency", "1", "--totalRequests", "2", "--interval", "1s",
                          "--engine", "python"),  # the Python engine's pacing, on the kernel's timer
    "encodings.idna": ("bench", "-n", "1", "{named}"),  # a host name (an IP address is looked up as bytes)
    "runner.stats.record": ("run", "--qps", "20", "--concurrency", "2", "--totalRequests", "2", "--interval", "1s",
                            "--shards", "2", "--shard", "0"),  # a shard's records, for merging
}

PLAIN = {
    "bench, native engine": ("bench", "-n", "1", "--engine", "native"),
    "bench, Python engine": ("bench", "-n", "1", "-c", "1", "--engine", "python"),
    "soak": ("run", "--qps", "20", "--concurrency", "1", "--totalRequests", "2", "--interval", "1s", "--timeout", "5s"),
    "bench -t, keep-alive": ("bench", "-k", "-c", "2", "-t", "0.2", "--interval", "70s", "--engine", "native"),
}

LOADED = """
import json, sys
from runner.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as done:  # --help
    code = done.code
with open(sys.argv[1], "w") as out:
    json.dump(sorted(sys.modules), out)
sys.exit(code)
"""


def loaded(tmp_path: Path, *args: str) -> tuple[int, set[str], str]:
    """(exit code, the modules loaded, stderr) of one CLI run with `args`."""
    out = tmp_path / "modules.json"
    # An s3:// store is a port on loopback where nothing listens: the run is refused at once.
    env = {**os.environ, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}", "AWS_ACCESS_KEY_ID": "x",
           "AWS_SECRET_ACCESS_KEY": "x"}
    done = subprocess.run([sys.executable, "-c", LOADED, str(out), *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env=env)
    assert out.exists(), done.stderr
    return done.returncode, set(json.loads(out.read_text())), done.stderr


@pytest.mark.parametrize("case", list(PLAIN))
def test_a_plain_run_loads_no_optional_module(case: str, nginx: Nginx, tmp_path: Path) -> None:
    code, modules, stderr = loaded(tmp_path, *PLAIN[case], nginx.url)
    if code == 2 and "native engine" in stderr:
        pytest.skip(f"the native engine is not built here: {stderr.strip()}")
    assert code == 0, stderr
    assert "runner.run.soak" in modules  # it ran
    python = "soak: engine: python" in stderr  # its client is httpx (test_only_the_python_engine_loads_its_client)
    client = (*PYTHON_CLIENT, *HTTPX_BRINGS) if python else ()
    assert sorted(m for m in (*OPTIONAL, *NO_RUN_NEEDS) if _held(modules, m) and m not in client) == []


# What no run of soak needs (issue 34): argparse imported shutil for the terminal's width, with bz2 and
# lzma (1.6 ms of a one-request bench); the CLI gives the width itself (runner.cli._columns).
NO_RUN_NEEDS = ("shutil", "bz2", "lzma")


# The Python engine's client, httpx, and what it loads (issue 34): a run the native engine sends needs none.
# httpx imports http.client itself, and httpcore the certifi module (not its CA bundle: a run with no https
# URL reads none, runner.load.httpx_transport.HttpxTransport).
PYTHON_CLIENT = ("runner.load.httpx_transport", "httpx", "httpcore", "h11", "anyio", "http.client", "certifi",
                 "runner.load.engine")
# And what the certifi module brings (importlib.resources: tempfile, so shutil, with bz2 and lzma), which
# NO_RUN_NEEDS keeps out of every run the native engine sends; the Python engine's, on httpx, load them.
HTTPX_BRINGS = ("shutil", "bz2", "lzma")


@pytest.mark.parametrize("case", list(PLAIN))
def test_only_the_python_engine_loads_its_client(case: str, nginx: Nginx, tmp_path: Path) -> None:
    """Every run built the Python engine's client (then the fast transport, retired in issue 34; the
    native engine imported two functions of it): about 19 ms of imports in a one-request bench, for a
    client the native engine never sends with; and the native engine imported the Python engine's
    module for its Load (22 KB compiled where bytecode is not). httpx, its client now, costs more."""
    code, modules, stderr = loaded(tmp_path, *PLAIN[case], nginx.url)
    if code == 2 and "native engine" in stderr:
        pytest.skip(f"the native engine is not built here: {stderr.strip()}")
    assert code == 0, stderr
    python = "soak: engine: python" in stderr
    assert python == ("--engine" in PLAIN[case] and "python" in PLAIN[case]), stderr
    assert {m: _held(modules, m) for m in PYTHON_CLIENT} == dict.fromkeys(PYTHON_CLIENT, python)


# What no --help needs (issue 34): a command's parser is its flags, made from the schema; `soak --help`
# lists the other commands by their DESCRIPTION. A package stands for every module in it.
NOT_FOR_HELP = ("asyncio", "jsonschema", "runner.load", "runner.stats", "runner.run", "runner.report.verdict",
                "runner.readback", "runner.store", "runner.commands.execute", "runner.config.settings", "hdrh",
                "ssl", "matplotlib")


@pytest.mark.parametrize("command", [None, "run", "bench", "validate", "demo", "merge", "history", "compare",
                                     "plot", "report"])
def test_help_loads_no_engine_and_no_optional_module(command: str | None, tmp_path: Path) -> None:
    """`soak --help` loaded the engines, the run's driver and every report (its commands imported them
    to be listed), for nothing: a command's parser needs its flags only; its run's parts load in main()."""
    code, modules, stderr = loaded(tmp_path, *([command] if command else []), "--help")
    assert code == 0, stderr
    assert f"runner.commands.{command or 'run'}" in modules  # its parser was made
    if command in (None, "run"):
        assert "runner.commands.report" in modules  # the other commands were listed
    assert sorted(m for m in (*OPTIONAL, *NOT_FOR_HELP, *NO_RUN_NEEDS) if _held(modules, m)) == []


def _held(modules: set[str], name: str) -> bool:
    """Whether `name`, or a module of the package it names, was loaded."""
    return name in modules or any(m.startswith(name + ".") for m in modules)


@pytest.mark.parametrize("module", list(OPTIONAL))
def test_a_run_that_needs_it_loads_it(module: str, nginx: Nginx, tmp_path: Path) -> None:
    configmap = tmp_path / "urls.yaml"
    configmap.write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: urls\ndata:\n  urls.txt: |\n"
                         f"    {nginx.url}\n")
    config = tmp_path / "configuration.json"
    config.write_text('{"iterations": 1}')
    args = [a.format(port=free_port(), configmap=configmap, https=nginx.url.replace("http:", "https:"),
                     named=nginx.url.replace("127.0.0.1", "localhost"), store=tmp_path / "records", out=tmp_path,
                     config=config) for a in OPTIONAL[module]]
    if "{https}" not in OPTIONAL[module] and "{named}" not in OPTIONAL[module] and "--urls" not in args:
        args.append(nginx.url)
    _, modules, stderr = loaded(tmp_path, *args)
    assert _held(modules, module), stderr


# The dataclass methods a run made, written out after it (runner.core.lazymethods: at first use, not at import).
MADE = """
import json, sys
from runner.cli import main
from runner.core.lazymethods import _Later
code = main(sys.argv[2:])
made = sorted(f"{cls.__module__}.{cls.__qualname__}.{name}" for module in list(sys.modules.values())
              if module.__name__.startswith("runner.") for cls in vars(module).values()
              if isinstance(cls, type) and cls.__module__ == module.__name__ and "__dataclass_fields__" in vars(cls)
              for name in ("__repr__", "__eq__", "__hash__") if vars(cls).get(name) is not None
              and not isinstance(vars(cls)[name], _Later))
with open(sys.argv[1], "w") as out:
    json.dump(made, out)
sys.exit(code)
"""


def test_a_native_bench_makes_no_dataclass_method_but_init(nginx: Nginx, tmp_path: Path) -> None:
    """Issue 34: a dataclass compiled five or six methods as it was made, about 0.5 ms each class and
    47 classes on a bench's start path, for a run that calls their __init__ only. Its repr, equality
    and hash are made at first use (runner.core.lazymethods), and a plain native bench uses none: a
    change that compares or hashes a settings object on the start path shows here."""
    out = tmp_path / "made.json"
    done = subprocess.run([sys.executable, "-c", MADE, str(out), "bench", "-n", "1", "--engine", "native",
                           nginx.url], capture_output=True, text=True, timeout=120, cwd=REPO)
    if done.returncode == 2 and "native engine" in done.stderr:
        pytest.skip(f"the native engine is not built here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == []


COLLECTIONS = """
import gc, json, sys
import runner.cli as cli
import runner.run.soak as soak
seen = {"collections": 0, "during_run": 0, "enabled_in_run": None, "at_start": None}
def counted(phase, info):
    if phase == "start":
        seen["collections"] += 1
gc.callbacks.append(counted)
started = cli._started
def watched_start():
    seen["at_start"] = seen["collections"]
    started()
cli._started = watched_start
run = soak.Soak.run
async def watched(self, *args, **kwargs):
    seen["enabled_in_run"] = gc.isenabled()
    before = seen["collections"]
    try:
        return await run(self, *args, **kwargs)
    finally:
        seen["during_run"] = seen["collections"] - before
soak.Soak.run = watched
code = cli.main(sys.argv[2:])
seen["frozen_at_end"] = gc.get_freeze_count()
seen["enabled_at_end"] = gc.isenabled()
with open(sys.argv[1], "w") as out:
    json.dump(seen, out)
sys.exit(code)
"""


@pytest.mark.parametrize("engine", ["native", "python"])
def test_the_collector_skips_start_up_and_exit_and_runs_during_the_run(engine: str, nginx: Nginx,
                                                                        tmp_path: Path) -> None:
    """Start-up's objects all live as long as the process, so the cyclic collector is off while
    they are made and frozen at the end (Python's exit would pass over them once more); the run
    itself must be collected as always, or a soak of an hour would keep every cycle it made."""
    out = tmp_path / "gc.json"
    done = subprocess.run([sys.executable, "-c", COLLECTIONS, str(out), "bench", "-n", "3000", "-c", "2",
                           "--engine", engine, nginx.url], capture_output=True, text=True, timeout=120, cwd=REPO)
    if done.returncode == 2 and "native engine" in done.stderr:
        pytest.skip(f"the native engine is not built here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    seen = json.loads(out.read_text())
    assert seen["enabled_in_run"] is True
    if engine == "python":  # its 3,000 requests allocate past the young generation's threshold (C's none)
        assert seen["during_run"] > 0
    assert seen["at_start"] == 0  # none while the command's modules were imported and its flags parsed
    assert seen["frozen_at_end"] > 0


@pytest.mark.parametrize(("engine", "loads_uvloop"), [("native", False), ("python", True)])
def test_uvloop_carries_the_python_engine_only(engine: str, loads_uvloop: bool, nginx: Nginx,
                                              tmp_path: Path) -> None:
    """The Python engine's loop carries every request, the native engine's only closes intervals:
    uvloop is loaded where it pays (launch.run_async)."""
    code, modules, stderr = loaded(tmp_path, "bench", "-n", "1", "--engine", engine, nginx.url)
    if code == 2 and "native engine" in stderr:
        pytest.skip(f"the native engine is not built here: {stderr.strip()}")
    assert code == 0, stderr
    assert ("uvloop" in modules) is loads_uvloop
