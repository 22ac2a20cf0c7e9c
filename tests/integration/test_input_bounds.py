"""Input files and values beyond their bounds, refused by the real CLI in one line, exit 2, before sending.

Each case was a traceback or a hang: a number Python will not convert, nesting that
exhausts the recursion limit, a FIFO that blocks the open, /dev/zero read until memory runs
out. `validate` and a run refuse each alike, naming the file (and line) and what is wrong.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pytest

from runner.config.files import BODY_LIMIT, CONFIG_LIMIT, TLS_FILE_LIMIT, URL_LIST_LIMIT
from tests.conftest import GOLDEN, REPO, Run, soak_command
from tests.support.certs import Pki

URL = "http://127.0.0.1:9/"  # never reached: every case is refused before anything is sent
NOT_REGULAR = "not a regular file; inputs are read whole before the run starts, so they must be files that end"
MEMORY_CAP = 1024 * 1024 * 1024  # the runner needs ~100 MB; reading /dev/zero whole fails at once instead of swapping


def capped_soak(*args: str, timeout: float = 30, stdin: bytes | None = None, pass_fds: tuple[int, ...] = ()) -> Run:
    """The CLI with its address space capped, so a runner that reads without a bound fails fast, not the machine."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    done = subprocess.run(soak_command(*args), capture_output=True, timeout=timeout, cwd=REPO, input=stdin,
                          env={**os.environ, "TZ": "UTC"}, preexec_fn=cap, pass_fds=pass_fds)
    return Run(done.returncode, done.stdout.decode(), done.stderr.decode())


def assert_refused_alike(args: list[str], expected: str) -> None:
    """validate and a run: exit 2, the same single line on stderr, starting with `soak: {expected}`."""
    checked = capped_soak("validate", *args)
    stop = [] if "--duration" in args else ["--iterations", "1"]
    run = capped_soak("--qps", "10", "--interval", "500ms", *stop, *args)
    for done in (checked, run):
        assert done.returncode == 2, (args, done.stderr[-2000:])
        assert done.stderr.startswith(f"soak: {expected}"), (args, done.stderr[-2000:])
        assert done.stderr.count("\n") == 1 and done.stdout == "", (args, done.stderr[-2000:])
    assert checked.stderr == run.stderr


def test_a_number_python_will_not_convert(tmp_path: Path) -> None:
    """5001 digits: `ValueError: Exceeds the limit (4300 digits)`, from json.loads."""
    config = tmp_path / "configuration.json"
    config.write_text('{"qps": 10,\n "hashValue": ' + "1" * 5001 + "}")
    assert_refused_alike(["--config", str(config), URL],
                         f"{config}: line 2, column 15: a number of 5001 digits is not allowed; numbers have at most 100")


def test_json_nested_100000_deep(tmp_path: Path) -> None:
    """`RecursionError` from json.loads."""
    config = tmp_path / "configuration.json"
    config.write_text('{"headers": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert_refused_alike(["--config", str(config), URL],
                         f"{config}: line 1, column 44: nested more than 32 levels deep (a configuration needs 3)")


def test_a_url_list_nested_100000_deep(tmp_path: Path) -> None:
    """`RecursionError` from PyYAML, reading the list to see whether it is a ConfigMap; as a file and as @FILE."""
    urls = tmp_path / "urls.txt"
    urls.write_text("[" * 100_000 + "\n")
    expected = f"{urls}:1: YAML nested more than 32 levels deep (a URL ConfigMap needs 3)"
    assert_refused_alike(["--urls", str(urls)], expected)
    assert_refused_alike([f"@{urls}"], expected)


def test_a_configmap_with_a_complex_key(tmp_path: Path) -> None:
    """`data: {? [a, b] : url}`: `TypeError: unhashable type: 'list'`."""
    manifest = tmp_path / "urls.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: urls}\ndata: {? [a, b] : url}\n")
    assert_refused_alike(["--urls", str(manifest)], f"{manifest}:4: a ConfigMap's data keys are names, like urls.txt")


def test_a_configmap_that_is_not_valid_yaml(tmp_path: Path) -> None:
    """`data:` indented by one space: read as a plain list, it was `badcm.yaml:1: 'apiVersion: v1' contains a space`."""
    manifest = tmp_path / "badcm.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: soak-urls\n data:\n  urls.txt: |\n"
                        "    http://127.0.0.1:9/\n")
    expected = (f"{manifest}:5: invalid YAML: expected <block end>, but found '<block mapping start>' (column 2); "
                "a URL list is a ConfigMap manifest or plain lines, one URL each")
    assert_refused_alike(["--urls", str(manifest)], expected)
    assert_refused_alike([f"@{manifest}"], expected)


@pytest.mark.parametrize("flag", ["--config", "--urls", "--body"])
def test_a_fifo_is_refused_not_waited_on(tmp_path: Path, flag: str) -> None:
    """A FIFO with no writer: open() blocked for ever (the run never started, and ignored its deadline)."""
    fifo = tmp_path / "input"
    os.mkfifo(fifo)
    value = f"@{fifo}" if flag == "--body" else str(fifo)
    prefix = "body.file: " if flag == "--body" else ""
    assert_refused_alike([flag, value, *([] if flag == "--urls" else [URL])],
                         f"{prefix}{fifo}: is a FIFO (named pipe), {NOT_REGULAR}")


@pytest.mark.parametrize("flag", ["--config", "--urls", "--body"])
def test_dev_zero_is_refused_not_read_for_ever(flag: str) -> None:
    """/dev/zero never ends: the runner read it until memory ran out (MemoryError here, under the cap)."""
    value = "@/dev/zero" if flag == "--body" else "/dev/zero"
    prefix = "body.file: " if flag == "--body" else ""
    assert_refused_alike([flag, value, *([] if flag == "--urls" else [URL])],
                         f"{prefix}/dev/zero: is a character device, {NOT_REGULAR}")


@pytest.mark.parametrize(("flag", "limit", "what"), [("--config", CONFIG_LIMIT, "a configuration file"),
                                                     ("--urls", URL_LIST_LIMIT, "a URL list"),
                                                     ("--body", BODY_LIMIT, "a body file")])
def test_each_input_file_has_a_size_bound(tmp_path: Path, flag: str, limit: int, what: str) -> None:
    """One byte over the bound is refused (a sparse file: nothing is written to disk); at the bound it is read."""
    big = tmp_path / "big"
    with big.open("wb") as f:
        f.truncate(limit + 1)
    value = f"@{big}" if flag == "--body" else str(big)
    prefix = "body.file: " if flag == "--body" else ""
    size = f"{limit // (1024 * 1024)} MiB"
    assert_refused_alike([flag, value, *([] if flag == "--urls" else [URL])],
                         f"{prefix}{big}: larger than {size}, the most {what} may hold")

    fitting = tmp_path / "fitting"
    content = {"--config": b'{"qps": 10}', "--urls": URL.encode() + b"\n", "--body": b"x"}[flag]
    fitting.write_bytes(content + b" " * (limit - len(content)))  # JSON and URL lists allow trailing spaces
    value = f"@{fitting}" if flag == "--body" else str(fitting)
    checked = capped_soak("validate", flag, value, *([] if flag == "--urls" else [URL]))
    assert checked.returncode == 0, checked.stderr


TLS_SETTINGS = ["caBundle", "clientCert", "clientKey"]


def tls_arguments(pki: Pki, setting: str, path: str) -> list[str]:
    """`--SETTING path` for an HTTPS URL; a clientKey needs its clientCert beside it."""
    cert = ["--clientCert", str(pki.client_cert)] if setting == "clientKey" else []
    return [*cert, f"--{setting}", path, "https://127.0.0.1:9/"]


@pytest.mark.parametrize("setting", TLS_SETTINGS)
def test_a_tls_file_that_never_ends_is_refused(pki: Pki, tmp_path: Path, setting: str) -> None:
    """--caBundle /dev/zero was a MemoryError traceback after reading 1.33 GB; a FIFO hung the start."""
    assert_refused_alike(tls_arguments(pki, setting, "/dev/zero"),
                         f"{setting}: /dev/zero: is a character device, {NOT_REGULAR}")
    fifo = tmp_path / "tls.pem"
    os.mkfifo(fifo)
    assert_refused_alike(tls_arguments(pki, setting, str(fifo)), f"{setting}: {fifo}: is a FIFO (named pipe), {NOT_REGULAR}")


@pytest.mark.parametrize("setting", TLS_SETTINGS)
def test_a_tls_file_has_a_size_bound(pki: Pki, tmp_path: Path, setting: str) -> None:
    """One byte over the bound is refused (a sparse file); the bound is far above a real bundle (certifi's: 0.3 MiB)."""
    big = tmp_path / "big.pem"
    with big.open("wb") as f:
        f.truncate(TLS_FILE_LIMIT + 1)
    assert_refused_alike(tls_arguments(pki, setting, str(big)),
                         f"{setting}: {big}: larger than 4 MiB, the most a TLS file may hold")
    real = {"caBundle": pki.ca, "clientCert": pki.client_combined, "clientKey": pki.client_key}[setting]
    fitting = tmp_path / "fitting.pem"
    fitting.write_bytes(real.read_bytes() + b"\n" * (TLS_FILE_LIMIT - real.stat().st_size))
    checked = capped_soak("validate", *tls_arguments(pki, setting, str(fitting)))
    assert checked.returncode == 0, checked.stderr


LOG = str(GOLDEN / "100qps-ms.log")  # slow_cooker's own log: compare and plot read it, merge finds no shard in it
NOT_A_LOG_FILE = "not a regular file; logs are read to their end, so they must be files that end (or - for stdin)"
READERS = [["merge", LOG, "{bad}"], ["compare", "{bad}", LOG], ["plot", "{bad}", "-o", "{tmp}/x.png"]]


@pytest.mark.parametrize("reader", READERS, ids=[r[0] for r in READERS])
def test_a_log_that_never_ends_is_refused(tmp_path: Path, reader: list[str]) -> None:
    """`soak merge s0.log /dev/zero` hung, `soak compare /dev/zero s0.log` was a MemoryError traceback, and a
    FIFO with no writer held each of them for ever."""
    fifo = tmp_path / "shard.log"
    os.mkfifo(fifo)
    for bad, kind in [("/dev/zero", "a character device"), (str(fifo), "a FIFO (named pipe)")]:
        done = capped_soak(*(a.format(bad=bad, tmp=tmp_path) for a in reader))
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr == f"soak: {bad}: is {kind}, {NOT_A_LOG_FILE}\n"
        assert done.stdout == "" and not (tmp_path / "x.png").exists()


def test_stdin_and_a_shells_pipe_are_still_logs_to_read(tmp_path: Path) -> None:
    """`-`, /dev/stdin and `<(kubectl logs ...)` (a pipe with no name, /dev/fd/N) are read as the file is."""
    log = Path(LOG).read_bytes()
    expected = capped_soak("compare", LOG, LOG)
    assert expected.returncode == 0, expected.stderr
    for name in ("-", "/dev/stdin"):
        done = capped_soak("compare", name, LOG, stdin=log)
        assert done.returncode == 0, done.stderr
        assert figures(done) == figures(expected)
    read, write = os.pipe()
    try:
        os.write(write, log)  # fits in the pipe's buffer: the writer is done before the reader starts
        os.close(write)
        done = capped_soak("compare", f"/dev/fd/{read}", LOG, pass_fds=(read,))
    finally:
        os.close(read)
    assert done.returncode == 0, done.stderr
    assert figures(done) == figures(expected)


def figures(compared: Run) -> list[list[str]]:
    """`soak compare`'s table without its first line, which names the files (and so sets the columns' widths)."""
    return [line.split() for line in compared.lines[1:]]


def test_a_key_given_twice_names_both_places(tmp_path: Path) -> None:
    """`{"qps": 10, "qps": 20}` was valid, and ran at 20 req/s: a merge mistake nobody saw."""
    config = tmp_path / "configuration.json"
    config.write_text('{\n  "qps": 10,\n  "interval": "1s",\n  "qps": 20\n}\n')
    assert_refused_alike(["--config", str(config), URL],
                         f'{config}: line 4, column 3: key "qps" given twice (first at line 2, column 3); '
                         "only one of the two values would be used")


def test_a_key_given_twice_counts_escapes_and_nesting(tmp_path: Path) -> None:
    """The same key spelled with an escape is the same key; the same key in two objects is not a repeat."""
    config = tmp_path / "configuration.json"
    config.write_text(json.dumps({"headers": {"X-A": "1"}, "body": {"file": "b"}})[:-1] + ', "bod\\u0079": ""}')
    assert_refused_alike(["--config", str(config), URL], f'{config}: line 1, column 50: key "body" given twice (first at line 1, column 27)')
    fine = tmp_path / "fine.json"
    fine.write_text('{"headers": {"qps": "1"}, "qps": 10}')
    assert capped_soak("validate", "--config", str(fine), URL).returncode == 0


RANGES = [
    # interval 1us: a run that printed 27,024 lines in 5 s and ignored SIGTERM
    ("interval", "1us", '"1us" is not allowed; must be from 1ms to 24h'),
    ("interval", "999us", '"999us" is not allowed; must be from 1ms to 24h'),
    ("interval", "9999999999999999999h", '"9999999999999999999h" is not allowed; must be from 1ms to 24h'),
    ("interval", "1" * 5000 + "h", '"' + "1" * 56 + '... is not allowed; must be from 1ms to 24h'),
    ("interval", "24h0m0.001s", '"24h0m0.001s" is not allowed; must be from 1ms to 24h'),
    ("timeout", "25h", '"25h" is not allowed; must be from 1ms to 24h'),
    ("timeout", "1ns", '"1ns" is not allowed; must be from 1ms to 24h'),
    ("duration", "8761h", '"8761h" is not allowed; must be from 1ms to 8760h'),
    ("duration", "2562048h", '"2562048h" is not allowed; must be from 1ms to 8760h'),
    ("linkerdAwaitTimeout", "9999999999999999999h", '"9999999999999999999h" is not allowed; must be from 1ms to 24h'),
    ("iterations", 10_000_001, "10000001 is not allowed; must be at most 10000000"),
    ("totalRequests", 10**12 + 1, "1000000000001 is not allowed; must be at most 1000000000000"),
    ("maxInFlight", 10**6 + 1, "1000001 is not allowed; must be at most 1000000"),
    ("shard", 1000, "1000 is not allowed; must be at most 999"),
    # a 10 MB method was accepted and printed in every line; methods are short tokens
    ("method", "A" * 100_000, '"' + "A" * 56 + "... is not allowed; must be at most 32 characters"),
]


@pytest.mark.parametrize(("name", "value", "message"), RANGES, ids=[f"{n}={str(v)[:24]}" for n, v, _ in RANGES])
def test_settings_out_of_range_name_the_field_value_and_range(tmp_path: Path, name: str, value: object,
                                                              message: str) -> None:
    config = tmp_path / "configuration.json"
    config.write_text(json.dumps({name: value}))
    assert_refused_alike(["--config", str(config), URL], f"{config}: $.{name}: {message}")
    assert_refused_alike([f"--{name}", str(value), URL], f"--{name}: {message}")


ASCII_NUMBER = 'is not allowed; write a number in ASCII digits, without "_" or spaces, like 1000'
NOT_A_DURATION = "is not allowed; must be a duration like 500ms, 10s, 1m or 1m30s, greater than 0"
WRITTEN_FORMS = [
    # int(), float() and \d read other scripts' digits and underscores; JSON, Go and ab do not
    (["--interval", "\uff11s"], f'--interval: "\uff11s" {NOT_A_DURATION}'),
    (["--timeout", "\u0661\u0660s"], f'--timeout: "\u0661\u0660s" {NOT_A_DURATION}'),
    (["--qps", "\u0661\u0660"], f'--qps: "\u0661\u0660" {ASCII_NUMBER} or 0.5'),
    (["--qps", "1_000"], f'--qps: "1_000" {ASCII_NUMBER} or 0.5'),
    (["--concurrency", "\u0663"], f'--concurrency: "\u0663" {ASCII_NUMBER}'),
    (["--iterations", " 5"], f'--iterations: " 5" {ASCII_NUMBER}'),
    (["--thresholds", "p99 < \u0661ms"], '--thresholds: "p99 < \u0661ms" is not allowed; must be a metric, a comparison '
                                           'and a number, like "p99 < 50ms", "goal% >= 99" or "errors% <= 0.1"'),
    # rules that can never hold, or never break, were accepted but for goal% >= 101
    (["--thresholds", "skipped% > 100"], '--thresholds: "skipped% > 100" is not allowed; skipped% is a percentage, '
                                         "from 0 to 100, so this rule can never hold"),
    (["--intervalThresholds", "max < 0ns"], '--intervalThresholds: "max < 0ns" is not allowed; max is a latency, never '
                                            "below 0, so this rule can never hold"),
    (["--thresholds", "goal% <= 100"], '--thresholds: "goal% <= 100" is not allowed; goal% is a percentage, from 0 to '
                                       "100, so this rule always holds and checks nothing"),
    # `errors <= 1` silently meant errors% <= 1
    (["--thresholds", "errors <= 1"], '--thresholds: "errors <= 1" is not allowed; errors without % could be a count '
                                      'or a percentage; rules measure percentages of the sends: write "errors% <= 1"'),
]


@pytest.mark.parametrize(("args", "message"), WRITTEN_FORMS, ids=[" ".join(a) for a, _ in WRITTEN_FORMS])
def test_numbers_durations_and_rules_as_written(args: list[str], message: str) -> None:
    assert_refused_alike([*args, URL], message)


def test_the_same_in_a_configuration_file(tmp_path: Path) -> None:
    config = tmp_path / "configuration.json"
    for data, message in [({"interval": "\uff11s"}, f'$.interval: "\uff11s" {NOT_A_DURATION}'),
                          ({"thresholds": ["p99 < 1s", "errors <= 1"]},
                           '$.thresholds[1]: "errors <= 1" is not allowed; errors without % could be a count or a '
                           'percentage; rules measure percentages of the sends: write "errors% <= 1"')]:
        config.write_text(json.dumps(data, ensure_ascii=False))
        assert_refused_alike(["--config", str(config), URL], f"{config}: {message}")


@pytest.mark.parametrize(("url", "problem"), [("http://127.0.0.1:9/\r\n", "contains a line break (CR, \\r)"),
                                              ("http://127.0.0.1:9/\nx", "contains a line break (LF, \\n)"),
                                              ("http://127.0.0.1:9/\tx", "contains a tab")])
def test_a_line_break_in_a_url_is_called_so(url: str, problem: str) -> None:
    """A CR/LF (a pasted line end, a CronJob's args written with a `|` block) was "contains a space"."""
    assert_refused_alike([url], f"URL argument: {url!r} {problem}")


@pytest.mark.parametrize(("args", "message"), [
    (["-n", "\u0661\u0660"], '-n: "\u0661\u0660" is not allowed; must be a whole number greater than 0'),
    (["-t", "1_0"], '-t: "1_0" is not allowed; must be a number of seconds greater than 0'),
    (["-c", "\uff12"], '-c: "\uff12" is not allowed; must be a whole number'),
])
def test_abs_flags_take_ascii_digits_too(args: list[str], message: str) -> None:
    done = capped_soak("bench", *args, URL)
    assert (done.returncode, done.stderr, done.stdout) == (2, f"soak: {message}\n", "")


def test_a_completion_index_in_other_digits_is_one_line() -> None:
    """`JOB_COMPLETION_INDEX=²` passed str.isdigit() and was a ValueError traceback from int()."""
    done = subprocess.run(soak_command("validate", "--shards", "2", URL), capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={**os.environ, "JOB_COMPLETION_INDEX": "\u00b2"})
    assert (done.returncode, done.stderr) == (2, "soak: JOB_COMPLETION_INDEX: '\u00b2' is not allowed; must be a "
                                                 "whole number\n")


@pytest.mark.parametrize(("name", "value"), [("interval", "1ms"), ("interval", "24h"), ("timeout", "24h"),
                                             ("duration", "8760h"), ("linkerdAwaitTimeout", "1ms"),
                                             ("method", "M" * 32), ("iterations", "10000000")])
def test_the_bounds_themselves_are_allowed(name: str, value: str) -> None:
    checked = capped_soak("validate", f"--{name}", value, URL)
    assert checked.returncode == 0, checked.stderr


LONG_LABEL = "a" * 64
BAD_URLS = [
    ("http://127.0.0.1:0/", "is not allowed: the port must be from 1 to 65535"),
    ("https://example.com:00/x", "is not allowed: the port must be from 1 to 65535"),
    # the fast client crashed on these with `UnicodeError: encoding with 'idna' codec failed`
    (f"http://{LONG_LABEL}.invalid/", "has a host name label of 64 characters (aaaaaaaaaaaaaaaaa...); "
                                      "DNS allows at most 63"),
    ("http://a..b/", "has an empty label in its host name (a dot first, or two in a row)"),
    ("http://.a/", "has an empty label in its host name (a dot first, or two in a row)"),
    ("http://" + ".".join(["a" * 63] * 4) + "/", "has a host name of 255 characters; DNS allows at most 253"),
]


@pytest.mark.parametrize(("url", "problem"), BAD_URLS, ids=[u[:30] for u, _ in BAD_URLS])
def test_urls_no_client_can_send_to(tmp_path: Path, url: str, problem: str) -> None:
    """Refused as an argument and on its line in a list, by validate and a run alike (and so never sent)."""
    shown = repr(url) if len(repr(url)) <= 200 else repr(url)[:197] + "..."
    assert_refused_alike([url], f"URL argument: {shown} {problem}")
    urls = tmp_path / "urls.txt"
    urls.write_text(f"# targets\nhttp://127.0.0.1:9/\n{url}\n")
    assert_refused_alike(["--urls", str(urls)], f"{urls}:3: {shown} {problem}")


@pytest.mark.parametrize("url", ["http://a.b./", "http://" + ".".join(["a" * 63] * 3 + ["a" * 61]) + "/",
                                 f"http://{'a' * 63}.invalid:65535/", "http://[::1]:8080/"])
def test_urls_at_the_bounds_are_allowed(url: str) -> None:
    checked = capped_soak("validate", url)
    assert checked.returncode == 0, checked.stderr


def test_validate_checks_the_csv_path_without_touching_the_file(tmp_path: Path) -> None:
    """validate said valid for a CSV path every run refused; checking it must not create or empty the file."""
    existing = tmp_path / "latencies.csv"
    existing.write_text("0, 1, 5\n")
    assert capped_soak("validate", "--reportLatenciesCSV", str(existing), URL).returncode == 0
    assert existing.read_text() == "0, 1, 5\n"
    new = tmp_path / "new.csv"
    assert capped_soak("validate", "--reportLatenciesCSV", str(new), URL).returncode == 0
    assert not new.exists()
    for path, reason in [("/nonexistent/x.csv", "No such file or directory"), (str(tmp_path), "Is a directory"),
                         (f"{existing}/x.csv", "Not a directory")]:
        assert_refused_alike(["--reportLatenciesCSV", path, URL], f"reportLatenciesCSV: {path}: {reason}")
