"""Shared fixtures: a real nginx on a free loopback port, and running the real CLI.

nginx is what users put behind the soak, so integration tests use it, started from a
temporary config for the session (`.ci/run` installs it with apt). The CLI always runs as
a subprocess, exactly as a user or the pod runs it.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from runner.core.columns import LINE, Line, matched
from runner.core.errors import EXIT_NO_RESPONSE, EXIT_OK
from runner.load.native.engine import module as native_module
from tests.support import reaper
from tests.support.faultserver import FaultServer
from tests.support.programs import program


def pytest_configure(config: pytest.Config) -> None:
    # Every daemon a test starts is written down and stopped, however the run ends (tests/support/reaper.py).
    config.pluginmanager.register(reaper, "soak-reaper")

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden"  # real slow_cooker output, copied from shared/reference
NGINX_PAGE = b"x" * 611 + b"\n"  # 612 bytes, the size of nginx's default page in the seed


# Markers come from where a test is and what it needs, never from a decorator someone must
# remember: `-m unit`, `-m "integration and not nginx"`, ... select truly.
_NGINX_FIXTURES = {"nginx", "tls_nginx"}


# The longest tests (minutes each: valgrind over 100,000 requests, the image built and run, pip
# installs in fresh environments, the fuzzer, an hour of shards), started first: under xdist each
# then takes a process while the rest share the others, instead of one starting last and
# keeping the whole run waiting for it.
LONGEST_FIRST = ("test_native_leaks.py", "test_container.py", "test_native_build.py", "test_image.py",
                 "test_scaleout.py", "test_native_fuzz.py", "test_results_of_a_run.py", "test_input_bounds.py")


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads xdist_group
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: LONGEST_FIRST.index(item.path.name) if item.path.name in LONGEST_FIRST
               else len(LONGEST_FIRST))  # stable: the rest keep their order
    for item in items:
        tier = item.path.relative_to(REPO / "tests").parts[0]
        if tier in ("unit", "integration"):
            item.add_marker(tier)
        if _NGINX_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker("nginx")
        if _uses_a_module_fixture(item):  # under xdist (--dist loadgroup), the module's tests go to one worker
            item.add_marker(pytest.mark.xdist_group(str(item.path.relative_to(REPO))))


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a module-scoped fixture: a Docker engine, a fuzz harness, a run of
    many pods, made once for the module's tests, where one worker has them all."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    return any(definition.scope == "module" for chain in definitions for definition in chain)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


@dataclass
class Nginx:
    url: str
    access_log: Path

    def log_lines(self) -> list[str]:
        """nginx's access log so far, one line per request (format `soak` above)."""
        if not self.access_log.exists():
            return []
        return self.access_log.read_text().splitlines()

    def requests_logged(self) -> int:
        """Requests nginx has logged so far: the server's own count, to check ours against."""
        return len(self.log_lines())

    def wait_quiet(self, quiet_s: float = 0.3, timeout_s: float = 5.0) -> None:
        """Until nothing has been logged for `quiet_s` (at most `timeout_s`): requests an earlier test
        of this process left in flight (a run killed or cut off) are logged by then, not in the next
        test's count. Costs nothing where the log has been quiet that long already."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                idle = time.time() - self.access_log.stat().st_mtime
            except FileNotFoundError:
                return
            if idle >= quiet_s:
                return
            time.sleep(quiet_s - idle)


# Both test nginxes (this one and tests/support/tlsservers.py's) start from the same frame: one
# worker, in the foreground, every file of theirs in a temporary directory.
NGINX_FRAME = """
daemon off;
master_process on;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
{user}
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path {dir}/tmp;
    proxy_temp_path {dir}/tmp;
    fastcgi_temp_path {dir}/tmp;
    uwsgi_temp_path {dir}/tmp;
    scgi_temp_path {dir}/tmp;
    keepalive_requests 1000000;
{http}
}}
"""

_NGINX_HTTP = """
    # One line per request: connection serial and what arrived, so tests can check the
    # server's view (connections reused or not, which request said Connection: close,
    # headers, bodies) against the runner's.
    log_format soak '$connection $connection_requests $request_method $uri $status '
                    '"$host" "$http_authorization" "$http_accept_encoding" "$http_connection" '
                    '$request_length $body_bytes_sent';
    access_log {dir}/access.log soak;
    gzip on;
    gzip_min_length 100;
    gzip_types text/plain;
    server {{
        listen 127.0.0.1:{port};
        root {dir}/www;
        location / {{ }}
        location = /teapot {{ return 418; }}
        location = /echo {{ return 200 "ok\n"; }}
        location = /fail {{ return 503; }}
    }}
"""


@contextmanager
def running_nginx(directory: Path, http: str, ports: list[int]) -> Iterator[subprocess.Popen[bytes]]:
    """nginx with `http` inside its http block, until the block ends; ready on every one of `ports`.

    Yields its master process, for a test that stops it early (a server that dies mid-run).
    """
    (directory / "tmp").mkdir(exist_ok=True)
    user = "user root;" if os.geteuid() == 0 else ""
    conf = directory / "nginx.conf"
    conf.write_text(NGINX_FRAME.format(dir=directory, user=user, http=http))
    process = reaper.spawn([_nginx_binary(), "-c", str(conf), "-p", str(directory)], "nginx")
    try:
        for port in ports:
            wait_for_port(port)
        yield process
    finally:
        reaper.stop(process)


def _nginx_binary() -> str:
    return program("nginx", "apt-get install -y nginx (as .ci/run does)", "/usr/sbin/nginx")


@pytest.fixture(scope="session")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    """nginx with one worker serving a 612-byte page on a free loopback port."""
    directory = tmp_path_factory.mktemp("nginx")
    (directory / "www").mkdir()
    (directory / "www" / "index.html").write_bytes(NGINX_PAGE)
    port = free_port()
    with running_nginx(directory, _NGINX_HTTP.format(dir=directory, port=port), [port]):
        yield Nginx(f"http://127.0.0.1:{port}/", directory / "access.log")


@pytest.fixture(autouse=True)
def _nginx_quiet(request: pytest.FixtureRequest) -> None:
    """A test that uses this process's nginx starts once its log is quiet (Nginx.wait_quiet): a
    test counts what nginx logged during it, and the nginx is shared by every test of the process."""
    if "nginx" in request.fixturenames:
        request.getfixturevalue("nginx").wait_quiet()


@dataclass
class Run:
    """A finished CLI run: exit code, stdout and stderr, and what stdout holds.

    The line a run that starts says which engine sends it with (`soak: engine: ...`) is taken
    out of stderr into `engine_said`, once it has been checked to be exactly the one the
    transport under test gives (split_engine_line), so every other assertion on stderr reads
    what it always did.
    """

    returncode: int
    stdout: str
    stderr: str
    engine_said: str = ""

    def __post_init__(self) -> None:
        skip_if_native_refused(self.returncode, self.stderr)
        if not self.engine_said:
            self.engine_said, self.stderr = split_engine_line(self.stderr)

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    @property
    def interval_lines(self) -> list[str]:
        return [line for line in self.lines if line[:1].isdigit()]

    @property
    def summary(self) -> dict:
        """The JSON summary: everything from the first line that is just `{`."""
        lines = self.lines
        return json.loads("\n".join(lines[lines.index("{"):]))


# The two HTTP/1.1 clients kept alike, the native engine's own and httpx on the Python engine (the
# readable reference), must pass the same integration tests where the transport is what is tested
# (faults, the protocol, TLS, connection lifetimes, what each engine counts): a test that uses the
# `transport` fixture runs once per parameter, and every CLI run in it uses that one. "native" is
# the default transport, `fast`, on the native engine (`--engine native`); "httpx" the Python engine
# on httpx (`--transport httpx`, which the native engine refuses: the engine line says so). Issue 34
# retired the third, the Python fast transport. Where httpx counts a run differently from the
# native engine, tests/support/httpx_differs.py writes it down (one table; the differential test
# and the tests that meet a difference read it), not a loosened assertion. Where the transport is
# not what is tested, a test or module narrows the parameters with `pytest.mark.transports(...)`:
# DEFAULT alone runs it as a user's run goes, with no transport or engine flag (the native engine
# unless it refuses the run, then the Python engine on httpx), once.
TRANSPORTS = ("native", "httpx")
DEFAULT = "auto"
TRANSPORT_FLAGS = {"native": ("--transport", "fast", "--engine", "native"),
                   "httpx": ("--transport", "httpx")}
TRANSPORT_CONFIG = {"native": {"transport": "fast", "engine": "native"},  # the same, as configuration
                    "httpx": {"transport": "httpx"}, DEFAULT: {}}
_REFUSED = "the native engine cannot send this run: "
ENGINE_LINES = {"native": "soak: engine: native\n",
                "httpx": f"soak: engine: python ({_REFUSED}the httpx transport)\n"}
_PYTHON_ASKED = "soak: engine: python\n"  # `--engine python` with the default transport: httpx, unrefused
_NATIVE_REFUSAL = re.compile(r"soak: engine: native cannot send this run: (.*); use engine: auto or python\n")
_transport: list[str] = []


def engine_line(why: str | None = None) -> str:
    """The line a run's stderr begins with once it starts (runner.commands.execute.engine_line):
    which engine sends it, for the `transport` under test; without one, what `auto` takes, the
    native engine unless `why` (or its not being built) says why not."""
    if _transport:
        return ENGINE_LINES[_transport[-1]]
    if why is None and native_module() is None:
        why = "the native engine is not built here"
    return "soak: engine: native\n" if why is None else f"soak: engine: python ({_REFUSED}{why})\n"


_ENGINE_SAID = re.compile(r"soak: engine: (native|python)( \(.+\))?\n")  # not the refusal, `engine: native cannot ...`
_AUTO_FALLBACK = re.compile(r"soak: engine: python \(the native engine cannot send this run: [^\n]+\)\n")


def split_engine_line(stderr: str) -> tuple[str, str]:
    """stderr's engine line (runner.commands.execute.engine_line), checked, and the rest of stderr.

    Under the `transport` fixture the line must be exactly engine_line(); a run without one runs
    on whatever engine its own flags name (`auto` unless they say), so there the line is one of
    the three a run can print: native, python, or python with the reason `auto` gives."""
    lines = stderr.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if _ENGINE_SAID.fullmatch(line):
            expected = engine_line()
            assert line == expected or (not _transport and (line in (*ENGINE_LINES.values(), _PYTHON_ASKED)
                                                            or _AUTO_FALLBACK.fullmatch(line))), (line, expected)
            return line, "".join(lines[:index] + lines[index + 1:])
    return "", stderr


def skip_if_native_refused(returncode: int | None, stderr: str) -> None:
    """A run on the native engine that it refused (exit 2, its one line): the test needs what the
    native engine does not do, so it is skipped on it, with the refusal as the reason."""
    if _transport and _transport[-1] == "native" and returncode == 2:
        refused = _NATIVE_REFUSAL.fullmatch(stderr)
        if refused is not None:
            pytest.skip(f"the native engine refuses this run: {refused.group(1)}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The `transport` parameters: TRANSPORTS, or those the closest `transports` marker names."""
    if "transport" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("transports")
        chosen = marker.args if marker is not None else TRANSPORTS
        assert chosen and set(chosen) <= {*TRANSPORTS, DEFAULT}, chosen
        metafunc.parametrize("transport", chosen, indirect=True)


@pytest.fixture
def transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """The transport (and engine) every CLI run of the test uses; DEFAULT: the run's own flags alone."""
    if request.param == DEFAULT:
        yield request.param
        return
    _transport.append(request.param)
    try:
        yield request.param
    finally:
        _transport.pop()


def soak_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "runner", *_with_transport(list(args))]


def _with_transport(args: list[str]) -> list[str]:
    """The arguments with the transport's flags (TRANSPORT_FLAGS) added where the command sends requests."""
    if not _transport:
        return args
    flag = list(TRANSPORT_FLAGS[_transport[-1]])
    if args and args[0] in ("bench", "demo", "run"):
        return [args[0], *flag, *args[1:]]
    if not args or args[0] in ("validate", "merge", "compare", "plot", "report"):
        return args
    return [*flag, *args]  # the default command, run


def run_soak(*args: str, timeout: float = 120, env: dict[str, str] | None = None, cwd: Path = REPO) -> Run:
    """Run the CLI to completion (bounded by `timeout`) and capture its output."""
    full_env = {**os.environ, "TZ": "UTC", **(env or {})}
    done = subprocess.run(soak_command(*args), capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd)
    return Run(done.returncode, done.stdout, done.stderr)


# --- Fault server and interval-line parsing ---------------------------------------------


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    """A misbehaving HTTP server on a free loopback port, in this process (see faultserver.py).

    One per test, so its per-path request counts belong to that test alone.
    """
    server = FaultServer().start()
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class IntervalFields(Line):
    """The columns of one slow_cooker interval line, as read back (runner.core.columns)."""

    def line(self) -> Line:
        """The columns as runner.core.columns.interval_line takes them, to print the line again."""
        return Line(**{f.name: getattr(self, f.name) for f in fields(Line)})


def parse_interval(line: str) -> IntervalFields:
    """An interval line read back, strictly: exactly as runner.core.columns lays it out."""
    m = LINE.match(line)
    assert m, f"not an interval line: {line!r}"
    return IntervalFields.of(matched(m))


def assert_counts_add_up(stdout: str) -> dict:
    """Check the run's own accounting and return its summary.

    Every interval line parses; the summary is printed exactly once, last; the interval
    lines' good+bad+failed, with the drain's (what came back after the last interval), sum
    to the summary's `requests`, which is its good+bad+failed.
    """
    lines = stdout.splitlines()
    assert lines.count("{") == 1, f"expected exactly one JSON summary:\n{stdout}"
    start = lines.index("{")
    summary = json.loads("\n".join(lines[start:]))  # fails if anything but the summary follows it
    intervals = [parse_interval(line) for line in lines[:start] if not line.startswith("#")]
    assert intervals, f"no interval lines:\n{stdout}"
    assert [i.iteration for i in intervals] == list(range(len(intervals)))
    assert summary["intervals"] == len(intervals)
    drain = summary.get("drain") or {"good": 0, "bad": 0, "failed": 0, "requests": 0}  # after the last interval
    assert sum(i.good for i in intervals) + drain["good"] == summary["good"]
    assert sum(i.bad for i in intervals) + drain["bad"] == summary["bad"]
    assert sum(i.failed for i in intervals) + drain["failed"] == summary["failed"]
    assert sum(i.requests for i in intervals) + drain["requests"] == summary["requests"]
    assert summary["requests"] == summary["good"] + summary["bad"] + summary["failed"]
    assert sum(summary["errors"].values()) == summary["failed"]
    assert sum(summary["statusCodes"].values()) == summary["good"] + summary["bad"]
    assert_due_sends_accounted(summary)
    return summary


NO_RESPONSE_LINE = re.compile(r"soak: no response at all: \d+ requests? sent, none answered \(.+\)( \(exit code \d+\))?")


def unanswered(summary: dict) -> bool:
    """Whether requests were sent and not one response came back: such a run exits 8, whatever else."""
    return summary["requests"] > 0 and summary["good"] + summary["bad"] == 0


def exit_for(summary: dict, otherwise: int = EXIT_OK) -> int:
    """The exit code of a run with this summary: 8 if not one response came back, else `otherwise`."""
    return EXIT_NO_RESPONSE if unanswered(summary) else otherwise


def failure_lines(stderr: str) -> list[str]:
    """stderr's lines but the one that ends a run in which no response came back, which must be last."""
    lines = stderr.splitlines()
    if lines and NO_RESPONSE_LINE.fullmatch(lines[-1]):
        lines.pop()
    assert not any(NO_RESPONSE_LINE.fullmatch(line) for line in lines), stderr
    return lines


def assert_due_sends_accounted(summary: dict) -> None:
    """Every send the schedule made due was either sent or skipped: requests + skipped = due.

    True however slow the machine: a client that falls behind skips (and counts) what it
    missed. The due sends are the goal, the sum of the intervals' `t`, fractional where a
    run stopped between two sends: each process that stops on its own (a worker, a shard) may
    have sent the one send due in the fraction it ran past its last whole send's slot, hence
    a tolerance of one per process. Not for a bench, which has no
    schedule, nor when a worker died or a merge lacks a shard, or part of one (a shard a signal
    stopped before the others): their share stays in the goal, unsent and unskipped.
    """
    stats = summary.get("intervalStats") or []
    shards = summary.get("shards") or {}
    if not stats or stats[0].get("t") is None or summary.get("failedWorkers") or shards.get("missing") \
            or shards.get("incomplete") or any(stop["notSentSeconds"] for stop in shards.get("stopped", ())):
        return
    due = sum(s["t"] for s in stats)
    config = summary.get("config") or {}
    # A merged run's config is the run's, whose shards setting each shard had alone: its shards say how many.
    processes = max(1, config.get("workers") or 1) * max(1, shards.get("count") or config.get("shards") or 1)
    assert abs(summary["requests"] + summary["skipped"] - due) <= processes, (
        f"requests {summary['requests']} + skipped {summary['skipped']} != due {due} ({processes} processes)")


# --- TLS: the session's own certificates, and nginx serving HTTPS, mTLS and HTTP/2 ------------


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory):  # -> tests.support.certs.Pki
    """A CA, a server certificate for 127.0.0.1 and localhost, a client certificate (tests/support/certs.py)."""
    from tests.support.certs import make_pki

    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def tls_nginx(pki, tmp_path_factory: pytest.TempPathFactory):  # -> Iterator[tests.support.tlsservers.TlsNginx]
    """nginx on four free loopback ports: HTTPS (+HTTP/2), mTLS, cleartext HTTP/2, HTTPS HTTP/1.1 only."""
    from tests.support.tlsservers import tls_nginx as start

    ports: list[int] = []
    while len(ports) < 4:
        port = free_port()
        if port not in ports:
            ports.append(port)
    with start(pki, tmp_path_factory.mktemp("tls-nginx"), ports) as server:
        yield server
