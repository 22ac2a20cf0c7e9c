"""Input no request can carry, refused by the real CLI in one line before anything is sent.

A URL, Host or header value beyond ASCII, or a lone surrogate ("\\ud800" in JSON), crashed a run
with a UnicodeEncodeError traceback at the first send (the fast transport, since retired, wrote Latin-1, httpx
ASCII headers), and often `soak validate` too. Both now refuse it with the same line, exit 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Nginx, run_soak

ASCII_TEXT = "must be ASCII text (visible characters, spaces and tabs; no line breaks)"
NOT_CHARS = r"\ud800 to \udfff (lone surrogates) are not characters"


def refusals(tmp_path: Path, url: str) -> list[tuple[list[str], str]]:
    """(arguments, the one line expected on stderr) for each kind of input that crashed a run."""
    urls = tmp_path / "urls.txt"
    urls.write_text(f"{url}\n\n{url}€\n", encoding="utf-8")
    configs = {}
    for name, text in [("header", '{"headers": {"X-A": "€"}}'), ("body", '{"body": "\\ud800"}'),
                       ("host", '{"host": "\\ud800"}'), ("csv", '{"reportLatenciesCSV": "\\ud800.csv"}')]:
        configs[name] = tmp_path / f"{name}.json"
        configs[name].write_text(text, encoding="utf-8")
    return [
        ([f"{url}€"], f"URL argument: '{url}€' is not ASCII: percent-encode the path and query ('€' is %E2%82%AC)"),
        ([f"{url}?q=€"], f"URL argument: '{url}?q=€' is not ASCII: percent-encode the path and query ('€' is %E2%82%AC)"),
        (["http://例え.invalid/"],
         "URL argument: 'http://例え.invalid/' is not ASCII: write the host name in its punycode form (xn--r8jz45g.invalid)"),
        (["--urls", str(urls)],
         f"{urls}:3: '{url}€' is not ASCII: percent-encode the path and query ('€' is %E2%82%AC)"),
        (["--host", "例え.jp", url], '--host: "例え.jp" is not allowed; must be an ASCII host name without spaces, '
                                    "like example.com or example.com:8080 (an international name in its punycode form, xn--...)"),
        (["-H", "X-A: é", url], f"--header: the value is not allowed; {ASCII_TEXT}"),
        (["--config", str(configs["header"]), url], f"{configs['header']}: $.headers['X-A']: the value is not allowed; {ASCII_TEXT}"),
        (["--body", "\udcff", url],  # byte 0xff in argv, not UTF-8: `--body @FILE` sends bytes
         f'--body: "\\udcff" is not allowed; must be text that can be sent as UTF-8; {NOT_CHARS}'),
        (["--config", str(configs["body"]), url],
         f'{configs["body"]}: $.body: "\\ud800" is not allowed; must be text that can be sent as UTF-8; {NOT_CHARS}'),
        (["--config", str(configs["host"]), url], f'{configs["host"]}: $.host: "\\ud800" is not allowed; must be an ASCII'),
        (["--config", str(configs["csv"]), url],
         f'{configs["csv"]}: $.reportLatenciesCSV: "\\ud800.csv" is not allowed; must be a file path; {NOT_CHARS}'),
    ]


def test_a_run_and_validate_refuse_it_alike_before_sending(nginx: Nginx, transport: str, tmp_path: Path) -> None:
    """One line naming the flag, file and line or JSON path; exit 2; nginx sees no request."""
    for args, expected in refusals(tmp_path, nginx.url):
        before = nginx.requests_logged()
        run = run_soak("--qps", "20", "--interval", "500ms", "--iterations", "1", *args, timeout=30)
        checked = run_soak("validate", *args, timeout=30)
        assert run.returncode == checked.returncode == 2, (args, run.stderr)
        assert run.stderr.startswith(f"soak: {expected}") and run.stderr.count("\n") == 1, (args, run.stderr)
        assert checked.stderr == run.stderr, args
        assert nginx.requests_logged() == before, args


def test_a_header_value_from_the_environment_is_refused_without_printing_it(nginx: Nginx, transport: str) -> None:
    before = nginx.requests_logged()
    args = ["--headerFromEnv", "Authorization=SOAK_TOKEN", nginx.url]
    env = {"SOAK_TOKEN": "Bearer s3cr3t-€"}
    run = run_soak("--iterations", "1", "--interval", "500ms", *args, env=env, timeout=30)
    checked = run_soak("validate", *args, env=env, timeout=30)
    assert run.returncode == checked.returncode == 2
    assert run.stderr == checked.stderr == ("soak: headers.Authorization: environment variable SOAK_TOKEN must hold "
                                            "ASCII text (visible characters, spaces and tabs)\n")
    assert nginx.requests_logged() == before


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-H", "X-A: a\r\nX-Injected: 1"], f"soak: --header: the value is not allowed; {ASCII_TEXT}"),
        (["--body", "@"], 'soak: --body: "" is not allowed; must be non-empty'),
        (["--headerFromEnv", "X=1BAD"], 'soak: --headerFromEnv: "1BAD" is not allowed'),
    ],
)
def test_flag_errors_name_the_flag_given(args: list[str], expected: str) -> None:
    """Errors inside a header value or body said `flags:`, `--fromEnv:` or `--file:`."""
    run = run_soak("validate", *args, "http://127.0.0.1:9/", timeout=30)
    assert run.returncode == 2
    assert run.stderr.startswith(expected) and run.stderr.count("\n") == 1, run.stderr
    assert "--fromEnv" not in run.stderr and "--file" not in run.stderr and "flags" not in run.stderr


def test_bench_names_ab_flags_inside_a_header_value() -> None:
    run = run_soak("bench", "-n", "1", "-T", "text/plain\r\nX-Injected: 1", "http://127.0.0.1:9/", timeout=30)
    assert run.returncode == 2
    assert run.stderr == f"soak: -T: the value is not allowed; {ASCII_TEXT}\n"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:99999", '"http://127.0.0.1:99999" is not a valid URL (Port out of range 0-65535)'),
        ("http://[::1", '"http://[::1" is not a valid URL (Invalid IPv6 URL)'),
        ("http://user:s3cr3t@127.0.0.1:9091",
         '"http://user:<hidden>@127.0.0.1:9091" is not allowed: user names and passwords in the URL are not supported'),
    ],
)
def test_a_bad_pushgateway_stops_run_and_validate_without_printing_a_password(url: str, expected: str) -> None:
    """They were accepted, then every push of the run failed, each with a line that held the password."""
    checked = run_soak("validate", "--pushgateway", url, "http://127.0.0.1:9/", timeout=30)
    run = run_soak("--iterations", "1", "--interval", "500ms", "--pushgateway", url, "http://127.0.0.1:9/", timeout=30)
    assert checked.returncode == run.returncode == 2
    assert checked.stderr == run.stderr == f"soak: --pushgateway: {expected}\n"
    assert "s3cr3t" not in run.stdout + run.stderr
