"""Configuration: the schema, one clear line per bad value, and defaults < file < flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.config.jsonfile import read_config_file
from runner.config.schema import defaults, json_path_in, schema, settings_names, validate
from runner.config.settings import Settings, merge, settings_from
from runner.core.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
HINT = "a duration like 500ms, 10s, 1m or 1m30s"


def write_config(tmp_path: Path, data: Any, name: str = "configuration.json") -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return str(path)


def config_error(tmp_path: Path, data: Any) -> tuple[str, str]:
    """(path, message) of the UsageError reading `data` as a config file raises."""
    path = write_config(tmp_path, data)
    with pytest.raises(UsageError) as caught:
        read_config_file(path)
    message = str(caught.value)
    assert "\n" not in message and "\r" not in message, "an error is one line"
    assert "Traceback" not in message
    return path, message


# --- bad configurations: each gives its one line ------------------------------------------------

BAD = [
    # wrong types
    ({"qps": "100"}, '$.qps: "100" is not allowed; must be a number'),
    ({"qps": True}, "$.qps: true is not allowed; must be a number"),
    ({"qps": None}, "$.qps: null is not allowed; must be a number"),
    ({"concurrency": 1.5}, "$.concurrency: 1.5 is not allowed; must be a whole number"),
    ({"concurrency": "5"}, '$.concurrency: "5" is not allowed; must be a whole number'),
    ({"iterations": "60"}, '$.iterations: "60" is not allowed; must be a whole number'),
    ({"interval": 60}, "$.interval: 60 is not allowed; must be a string"),
    ({"timeout": 10}, "$.timeout: 10 is not allowed; must be a string"),
    ({"noReuse": "yes"}, '$.noReuse: "yes" is not allowed; must be true or false'),
    ({"compress": 1}, "$.compress: 1 is not allowed; must be true or false"),
    ({"noLatencySummary": None}, "$.noLatencySummary: null is not allowed; must be true or false"),
    ({"reportLatenciesCSV": 1}, "$.reportLatenciesCSV: 1 is not allowed; must be a string"),
    ({"headers": []}, "$.headers: [] is not allowed; must be an object"),
    ({"headers": "X: y"}, '$.headers: "X: y" is not allowed; must be an object'),
    ({"hashValue": "0x1"}, '$.hashValue: "0x1" is not allowed; must be a whole number'),
    ({"$schema": 5}, "$['$schema']: 5 is not allowed; must be a string"),
    # ranges
    ({"qps": 0}, "$.qps: 0 is not allowed; must be at least 0.001"),
    ({"qps": -1}, "$.qps: -1 is not allowed; must be at least 0.001"),
    ({"qps": 1e-300}, "$.qps: 1e-300 is not allowed; must be at least 0.001"),  # was an OverflowError traceback
    ({"qps": 2000000}, "$.qps: 2000000 is not allowed; must be at most 1000000"),
    ({"concurrency": 0}, "$.concurrency: 0 is not allowed; must be at least 1"),
    ({"concurrency": 10001}, "$.concurrency: 10001 is not allowed; must be at most 10000"),
    ({"iterations": -1}, "$.iterations: -1 is not allowed; must be at least 0"),
    ({"totalRequests": -5}, "$.totalRequests: -5 is not allowed; must be at least 0"),
    ({"maxInFlight": 0}, "$.maxInFlight: 0 is not allowed; must be at least 1"),
    ({"hashValue": -1}, "$.hashValue: -1 is not allowed; must be at least 0"),
    ({"hashValue": 2**64}, "$.hashValue: 18446744073709551616 is not allowed; must be at most 18446744073709551615"),
    ({"hashSampleRate": 1.5}, "$.hashSampleRate: 1.5 is not allowed; must be at most 1"),
    ({"hashSampleRate": -0.1}, "$.hashSampleRate: -0.1 is not allowed; must be at least 0"),
    # enums
    ({"latencyUnit": "s"}, '$.latencyUnit: "s" is not allowed; must be one of "ms", "us", "ns"'),
    ({"latencyUnit": "MS"}, '$.latencyUnit: "MS" is not allowed; must be one of "ms", "us", "ns"'),
    ({"loadModel": "closd"}, '$.loadModel: "closd" is not allowed; must be one of "closed", "open"'),
    # durations
    ({"interval": "1 min"}, f'$.interval: "1 min" is not allowed; must be {HINT}, greater than 0'),
    ({"interval": "10"}, f'$.interval: "10" is not allowed; must be {HINT}, greater than 0'),
    ({"interval": "0s"}, f'$.interval: "0s" is not allowed; must be {HINT}, greater than 0'),
    ({"interval": "0"}, f'$.interval: "0" is not allowed; must be {HINT}, greater than 0'),
    ({"interval": "-1s"}, f'$.interval: "-1s" is not allowed; must be {HINT}, greater than 0'),
    ({"interval": ""}, f'$.interval: "" is not allowed; must be {HINT}, greater than 0'),
    ({"timeout": "10"}, f'$.timeout: "10" is not allowed; must be {HINT}, greater than 0'),
    ({"timeout": "1x"}, f'$.timeout: "1x" is not allowed; must be {HINT}, greater than 0'),
    ({"duration": "0"}, f'$.duration: "0" is not allowed; must be {HINT}, greater than 0'),
    ({"duration": "2 hours"}, f'$.duration: "2 hours" is not allowed; must be {HINT}, greater than 0'),
    ({"duration": 7200}, "$.duration: 7200 is not allowed; must be a string"),
    # a connection's lifetime: 0 is no limit; each bound said with the value
    ({"maxRequestsPerConnection": -1}, "$.maxRequestsPerConnection: -1 is not allowed; must be at least 0"),
    ({"maxRequestsPerConnection": 1000000001},
     "$.maxRequestsPerConnection: 1000000001 is not allowed; must be at most 1000000000"),
    ({"maxRequestsPerConnection": 2.5}, "$.maxRequestsPerConnection: 2.5 is not allowed; must be a whole number"),
    ({"maxRequestsPerConnection": "50"}, '$.maxRequestsPerConnection: "50" is not allowed; must be a whole number'),
    ({"maxConnectionAge": 60}, "$.maxConnectionAge: 60 is not allowed; must be a string"),
    *[({"maxConnectionAge": age}, f'$.maxConnectionAge: "{age}" is not allowed; must be a duration like 30s, 1m or '
                                  "1h, from 1ms to 8760h, or 0s for no limit")
      for age in ("1 min", "-1s", "", "500us", "8761h", "99999999999999999999h")],
    # the backend header: a header's name, or none
    *[({"backendHeader": name}, f'$.backendHeader: {json.dumps(name, ensure_ascii=False)} is not allowed; must be a header name '
                                "(letters, digits and !#$%&'*+.^_`|~-), at most 64 characters, or empty")
      for name in ("X Backend", "X-Backend:", "é")],
    ({"backendHeader": 1}, "$.backendHeader: 1 is not allowed; must be a string"),
    ({"backendHeader": "X" * 65}, f'$.backendHeader: "{"X" * 56}... is not allowed; must be at most 64 characters'),
    # iterations and duration together
    ({"iterations": 60, "duration": "1h"}, "$: give iterations or duration, not both"),
    # unknown keys, with the likely intended one
    ({"qsp": 100}, '$: unknown key "qsp" (did you mean "qps"?)'),
    ({"Qps": 100}, '$: unknown key "Qps" (did you mean "qps"?)'),
    ({"concurency": 5}, '$: unknown key "concurency" (did you mean "concurrency"?)'),
    ({"iteration": 5}, '$: unknown key "iteration" (did you mean "iterations"?)'),
    ({"latency_unit": "us"}, '$: unknown key "latency_unit" (did you mean "latencyUnit"?)'),
    ({"header": {"X": "y"}}, '$: unknown key "header" (did you mean "headers"?)'),
    ({"hashsamplerate": 0.5}, '$: unknown key "hashsamplerate" (did you mean "hashSampleRate"?)'),
    ({"NOREUSE": True}, '$: unknown key "NOREUSE" (did you mean "noReuse"?)'),
    ({"zzz": 1}, '$: unknown key "zzz"'),
    ({"url": "http://x/"}, '$: unknown key "url"'),
    # method and host
    ({"method": "get"}, '$.method: "get" is not allowed; must be an HTTP method in capitals, like GET or POST'),
    ({"method": ""}, '$.method: "" is not allowed; must be an HTTP method in capitals, like GET or POST'),
    ({"method": "GET /"}, '$.method: "GET /" is not allowed; must be an HTTP method in capitals, like GET or POST'),
    ({"host": "a b"},
     '$.host: "a b" is not allowed; must be an ASCII host name without spaces, like example.com or example.com:8080 '
     '(an international name in its punycode form, xn--...)'),
    # headers: names, values, fromEnv
    ({"headers": {"Bad Name": "x"}},
     "$.headers: \"Bad Name\" is not allowed; must be a header name (letters, digits and !#$%&'*+.^_`|~-)"),
    ({"headers": {"X:Y": "x"}},
     "$.headers: \"X:Y\" is not allowed; must be a header name (letters, digits and !#$%&'*+.^_`|~-)"),
    ({"headers": {"": "x"}},
     "$.headers: \"\" is not allowed; must be a header name (letters, digits and !#$%&'*+.^_`|~-)"),
    ({"headers": {"X": 5}},
     '$.headers.X: the value is not allowed; must be ASCII text (visible characters, spaces and tabs; '
     'no line breaks), or {"fromEnv": "VAR"} with VAR an environment variable name'),
    ({"headers": {"X": None}},
     '$.headers.X: the value is not allowed; must be ASCII text (visible characters, spaces and tabs; '
     'no line breaks), or {"fromEnv": "VAR"} with VAR an environment variable name'),
    ({"headers": {"X": {"fromenv": "TOKEN"}}}, '$.headers.X: unknown key "fromenv" (did you mean "fromEnv"?)'),
    ({"headers": {"X": {"from_env": "TOKEN"}}}, '$.headers.X: unknown key "from_env" (did you mean "fromEnv"?)'),
    ({"headers": {"X": {"FromEnv": "TOKEN"}}}, '$.headers.X: unknown key "FromEnv" (did you mean "fromEnv"?)'),
    ({"headers": {"X": {}}}, '$.headers.X: missing key "fromEnv"'),
    ({"headers": {"X": {"fromEnv": "1TOKEN"}}},
     '$.headers.X.fromEnv: "1TOKEN" is not allowed; must be an environment variable name '
     "(letters, digits and _, not starting with a digit)"),
    ({"headers": {"X": {"fromEnv": "MY-TOKEN"}}},
     '$.headers.X.fromEnv: "MY-TOKEN" is not allowed; must be an environment variable name '
     "(letters, digits and _, not starting with a digit)"),
    ({"headers": {"X": {"fromEnv": 5}}}, "$.headers.X.fromEnv: 5 is not allowed; must be a string"),
    # body forms
    ({"body": 5}, '$.body: 5 is not allowed; must be a string, or {"file": "path"}'),
    ({"body": ["a"]}, '$.body: ["a"] is not allowed; must be a string, or {"file": "path"}'),
    ({"body": None}, '$.body: null is not allowed; must be a string, or {"file": "path"}'),
    ({"body": {"file": 3}}, "$.body.file: 3 is not allowed; must be a string"),
    ({"body": {"file": ""}}, '$.body.file: "" is not allowed; must be non-empty'),
    ({"body": {}}, '$.body: missing key "file"'),
    ({"body": {"path": "x"}}, '$.body: unknown key "path"'),
    ({"body": {"files": "x"}}, '$.body: unknown key "files" (did you mean "file"?)'),
]


@pytest.mark.parametrize(("data", "expected"), BAD, ids=[json.dumps(d)[:50] for d, _ in BAD])
def test_bad_config_gives_one_clear_line(tmp_path: Path, data: dict[str, Any], expected: str) -> None:
    path, message = config_error(tmp_path, data)
    assert message == f"{path}: {expected}"


def test_long_bad_values_are_shortened(tmp_path: Path) -> None:
    _, message = config_error(tmp_path, {"interval": "x" * 500})
    assert '$.interval: "' + "x" * 56 + '... is not allowed' in message
    assert len(message) < 250


def test_error_names_the_file_it_came_from(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"qps": 0}, name="staging-soak.json")
    with pytest.raises(UsageError, match=r"^.*staging-soak\.json: \$\.qps: 0 is not allowed"):
        read_config_file(path)


def test_where_decides_how_the_source_is_named() -> None:
    """One schema serves the file ($.qps) and the command line (--qps)."""
    with pytest.raises(UsageError) as caught:
        validate({"qps": -3}, lambda error: f"--{error.path[0]}")
    assert str(caught.value) == "--qps: -3 is not allowed; must be at least 0.001"
    with pytest.raises(UsageError) as caught:
        validate({"qps": -3}, json_path_in("x.json"))
    assert str(caught.value) == "x.json: $.qps: -3 is not allowed; must be at least 0.001"


# --- secrets never appear in errors ------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["Bearer s3cr3t-t0ken\r\nX-Injected: 1", "Bearer s3cr3t-t0ken\nmore", "s3cr3t-t0ken\r"],
)
@pytest.mark.parametrize("name", ["Authorization", "X-Custom"])
def test_bad_header_value_is_never_printed(tmp_path: Path, name: str, value: str) -> None:
    path, message = config_error(tmp_path, {"headers": {name: value}})
    assert "s3cr3t" not in message
    shown = f"$.headers.{name}" if name.isidentifier() else f"$.headers['{name}']"
    assert message.startswith(f"{path}: {shown}: the value is not allowed; must be ASCII text")


# --- values Python's JSON and regex semantics would let through ------------------------------


@pytest.mark.parametrize(
    ("data", "expected_start"),
    [
        ({"method": "GET\n"}, '$.method: "GET\\n" is not allowed'),
        ({"host": "example.com\n"}, '$.host: "example.com\\n" is not allowed'),
        ({"headers": {"X-Trace\n": "1"}}, '$.headers: "X-Trace\\n" is not allowed'),
        ({"headers": {"X": {"fromEnv": "TOKEN\n"}}}, '$.headers.X.fromEnv: "TOKEN\\n" is not allowed'),
        ({"headers": {"Authorization": "Bearer s3cr3t\n"}}, "$.headers.Authorization: the value is not allowed"),
    ],
)
def test_a_trailing_line_break_is_not_allowed(tmp_path: Path, data: dict[str, Any], expected_start: str) -> None:
    """JSON Schema patterns are ECMA-262, where `$` is the end of the text; in Python's re it
    also matches before a final newline, which would send "GET\\n" or a header with a line break."""
    path, message = config_error(tmp_path, data)
    assert message.startswith(f"{path}: {expected_start}")
    assert "s3cr3t" not in message


@pytest.mark.parametrize("text", ['{"qps": NaN}', '{"qps": Infinity}', '{"qps": -Infinity}', '{"hashSampleRate": NaN}',
                                  '{"qps": 1e400}'])
def test_non_finite_numbers_are_rejected(tmp_path: Path, text: str) -> None:
    """Python's json reads NaN and Infinity; NaN passes every bound, then crashes the run."""
    path, message = config_error(tmp_path, text)
    key = json.loads(text.replace("NaN", "0").replace("-Infinity", "0").replace("Infinity", "0").replace("1e400", "0"))
    assert message.startswith(f"{path}: $.{next(iter(key))}: ")
    assert "is not allowed" in message


def test_nan_from_any_layer_is_rejected() -> None:
    with pytest.raises(UsageError, match=r"^--qps: NaN is not allowed; must be a number$"):
        validate({"qps": float("nan")}, lambda error: f"--{error.path[0]}")


# --- text no request, file name or log line can carry -------------------------------------------

ASCII_TEXT = "must be ASCII text (visible characters, spaces and tabs; no line breaks)"
ASCII_HOST = ("must be an ASCII host name without spaces, like example.com or example.com:8080 "
              "(an international name in its punycode form, xn--...)")
NOT_CHARS = r"\ud800 to \udfff (lone surrogates) are not characters"
FILE_PATH = f"must be a file path; {NOT_CHARS}"

UNSENDABLE = [
    ({"headers": {"X-A": "€"}}, f"$.headers['X-A']: the value is not allowed; {ASCII_TEXT}"),
    ({"headers": {"X-A": "é"}}, f"$.headers['X-A']: the value is not allowed; {ASCII_TEXT}"),
    ({"headers": {"X-A": "a\x00b"}}, f"$.headers['X-A']: the value is not allowed; {ASCII_TEXT}"),
    ({"headers": {"X-A": "a\x7f"}}, f"$.headers['X-A']: the value is not allowed; {ASCII_TEXT}"),
    ({"headers": {"X-A": "\ud800"}}, f"$.headers['X-A']: the value is not allowed; {ASCII_TEXT}"),
    ({"headers": {"X-€": "1"}},
     "$.headers: \"X-€\" is not allowed; must be a header name (letters, digits and !#$%&'*+.^_`|~-)"),
    ({"host": "例え.jp"}, f'$.host: "例え.jp" is not allowed; {ASCII_HOST}'),
    ({"host": "a\x00"}, f'$.host: "a\\u0000" is not allowed; {ASCII_HOST}'),
    ({"host": "\ud800"}, f'$.host: "\\ud800" is not allowed; {ASCII_HOST}'),
    ({"body": "\ud800"}, f'$.body: "\\ud800" is not allowed; must be text that can be sent as UTF-8; {NOT_CHARS}'),
    ({"body": {"file": "b\udfff.json"}}, f'$.body.file: "b\\udfff.json" is not allowed; {FILE_PATH}'),
    ({"reportLatenciesCSV": "\ud800.csv"}, f'$.reportLatenciesCSV: "\\ud800.csv" is not allowed; {FILE_PATH}'),
    ({"caBundle": "\ud800.pem"}, f'$.caBundle: "\\ud800.pem" is not allowed; {FILE_PATH}'),
    ({"clientCert": "\ud800.pem"}, f'$.clientCert: "\\ud800.pem" is not allowed; {FILE_PATH}'),
    ({"clientKey": "\ud800.key"}, f'$.clientKey: "\\ud800.key" is not allowed; {FILE_PATH}'),
]


@pytest.mark.parametrize(("data", "expected"), UNSENDABLE, ids=[json.dumps(d)[:50] for d, _ in UNSENDABLE])
def test_text_that_cannot_be_sent_or_opened_is_refused(tmp_path: Path, data: dict[str, Any], expected: str) -> None:
    """Each crashed the run with a traceback (UnicodeEncodeError) at the first send or open, and most
    of them `soak validate` too; JSON spells a lone surrogate as \\ud800, which no encoding can write."""
    path, message = config_error(tmp_path, json.dumps(data))  # ASCII JSON: \ud800 stays an escape in the file
    assert message == f"{path}: {expected}"
    message.encode("utf-8")  # printable as it is: a lone surrogate is shown escaped


def test_text_beyond_ascii_where_it_can_go_is_kept(tmp_path: Path) -> None:
    """A body is sent as UTF-8 and a file name is the system's: only what the wire cannot carry is refused."""
    data = {"body": "é€ 日本", "headers": {"X-A": "a\tb ~!\"#"}, "host": "xn--r8jz45g.jp:8080",
            "reportLatenciesCSV": "/tmp/é.csv"}
    assert read_config_file(write_config(tmp_path, data)) == data
    validate({"reportLatenciesCSV": "/tmp/\udcff.csv"}, lambda error: "--reportLatenciesCSV")  # byte 0xff in argv


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"headers": {"X": "a\r\nX-Injected: 1"}}, ["headers", "X"]),
        ({"headers": {"X": {"fromEnv": "1BAD"}}}, ["headers", "X", "fromEnv"]),
        ({"body": {"file": ""}}, ["body", "file"]),
        ({"body": "\ud800"}, ["body"]),
    ],
)
def test_where_reads_the_path_from_the_top_of_the_data(data: dict[str, Any], path: list[str]) -> None:
    """Inside an anyOf branch, error.path was the branch's own: empty for a header value (the
    command line said `flags:`) or only the inner key (`--fromEnv`, `--file` for --body @)."""
    seen = []
    with pytest.raises(UsageError):
        validate(data, lambda error: seen.append(list(error.path)) or "x")
    assert seen == [path]


# --- the pushgateway URL -----------------------------------------------------------------------

BAD_PUSHGATEWAYS = [
    ("http://127.0.0.1:99999", '"http://127.0.0.1:99999" is not a valid URL (Port out of range 0-65535)'),
    ("http://127.0.0.1:abc",
     '"http://127.0.0.1:abc" is not a valid URL (Port could not be cast to integer value as \'abc\')'),
    ("http://127.0.0.1:0", '"http://127.0.0.1:0" is not allowed: the port must be from 1 to 65535'),
    ("http://:9091", '"http://:9091" has no host'),
    ("http://[::1", '"http://[::1" is not a valid URL (Invalid IPv6 URL)'),
    ("http://[::1]:9091 ", '"http://[::1]:9091 " is not allowed; must be an http:// or https:// URL, '
                           "like http://pushgateway.monitoring:9091, or empty"),
    ("http://例え.jp:9091", '"http://例え.jp:9091" is not ASCII: write the host name in its punycode form (xn--r8jz45g.jp)'),
    ("http://user:s3cr3t@pushgateway:9091",
     '"http://user:<hidden>@pushgateway:9091" is not allowed: user names and passwords in the URL are not supported'),
    ("http://user@pushgateway:9091",
     '"http://<hidden>@pushgateway:9091" is not allowed: user names and passwords in the URL are not supported'),
]


@pytest.mark.parametrize(("url", "expected"), BAD_PUSHGATEWAYS)
def test_bad_pushgateway_urls_are_refused_up_front(tmp_path: Path, url: str, expected: str) -> None:
    """Each was accepted, then failed every push of the run (a line each, with the password)."""
    path, message = config_error(tmp_path, {"pushgateway": url})
    assert message == f"{path}: $.pushgateway: {expected}"


@pytest.mark.parametrize(
    "url",
    ["http://u:s3cr3t@h:9091", "https://u:s3cr3t@h", "http://u:s3cr3t@h:99999", "http://u:s3cr3t@h:9091/?x=1",
     "http://u:s3cr3t@h:9091/ x", "ftp://u:s3cr3t@h", "u:s3cr3t@h:9091", "http://u:p@s3cr3t@h:9091", "http://u:s3cr3t@[::1"],
)
def test_a_pushgateway_password_is_never_printed(tmp_path: Path, url: str) -> None:
    """Whatever else is wrong with the URL, the line naming it is printed and logged."""
    path, message = config_error(tmp_path, {"pushgateway": url})
    assert message.startswith(f"{path}: $.pushgateway: ")
    assert "s3cr3t" not in message


@pytest.mark.parametrize("url", ["", "http://pushgateway.monitoring:9091", "https://[::1]:9091/", "http://127.0.0.1:1/base",
                                 "http://h:65535"])
def test_good_pushgateway_urls(tmp_path: Path, url: str) -> None:
    assert read_config_file(write_config(tmp_path, {"pushgateway": url})) == {"pushgateway": url}


# --- the file itself ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"qps": 10,\n "concurrency": 2,\n}', "line 3, column 1: Expecting property name enclosed in double quotes"),
        ('{"qps": 10\n "x": 1}', "line 2, column 2: Expecting ',' delimiter"),
        ("", "line 1, column 1: Expecting value"),
        ('{"qps": 10} extra', "line 1, column 13: Extra data"),
        ("{'qps': 10}", "line 1, column 2: Expecting property name enclosed in double quotes"),
        ('{\n  "qps": 10, // total\n}', "line 2, column 14: Expecting property name enclosed in double quotes"),
    ],
)
def test_invalid_json_reports_line_and_column(tmp_path: Path, text: str, where: str) -> None:
    path, message = config_error(tmp_path, text)
    assert message == f"{path}: {where}"


def test_missing_file(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.json")
    with pytest.raises(UsageError) as caught:
        read_config_file(path)
    assert str(caught.value) == f"{path}: no such file"


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        read_config_file(str(tmp_path))
    assert str(caught.value).startswith(f"{tmp_path}: cannot read: ")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"method": "G\xc9T"}')
    with pytest.raises(UsageError) as caught:
        read_config_file(str(path))
    assert str(caught.value).startswith(f"{path}: cannot read: ")
    assert "utf-8" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "shown"),
    [("[]", "[]"), ('"qps"', '"qps"'), ("null", "null"), ("100", "100"), ('[{"qps": 1}]', '[{"qps": 1}]')],
)
def test_top_level_must_be_an_object(tmp_path: Path, text: str, shown: str) -> None:
    path, message = config_error(tmp_path, text)
    assert message == f"{path}: $: {shown} is not allowed; must be an object"


def test_valid_file_is_returned_without_the_schema_hint(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"$schema": "./runner/schema.json", "qps": 5, "headers": {"X": "1"}})
    assert read_config_file(path) == {"qps": 5, "headers": {"X": "1"}}


def test_empty_object_is_a_valid_config(tmp_path: Path) -> None:
    assert read_config_file(write_config(tmp_path, {})) == {}


def test_every_setting_at_once_is_valid(tmp_path: Path) -> None:
    data = {
        "qps": 12.5, "concurrency": 3, "interval": "10s", "duration": "1h", "totalRequests": 10, "method": "POST",
        "headers": {"Authorization": "Bearer x", "X-Token": {"fromEnv": "TOKEN"}}, "body": {"file": "body.json"},
        "host": "example.com:8080", "timeout": "1.5s", "noReuse": True, "compress": True, "latencyUnit": "us",
        "hashValue": 18446744073709551615, "hashSampleRate": 1, "noLatencySummary": True,
        "reportLatenciesCSV": "l.csv", "junit": "verdict.xml", "terminationMessagePath": "verdict.txt", "loadModel": "open", "maxInFlight": 50, "mode": "bench", "transport": "httpx", "engine": "python", "precisePacing": True,
        "caBundle": "ca.pem", "insecure": True, "clientCert": "client.pem", "clientKey": "client.key", "http2": True,
        "linkerdAwait": True, "linkerdAwaitTimeout": "30s", "linkerdAdmin": "[::1]:4191", "linkerdShutdown": True,
        "thresholds": ["p99 < 50ms", "errors% <= 0.1"], "intervalThresholds": ["p999 < 1s"], "abortOnThreshold": True,
        "metricAddr": ":9090", "pushgateway": "http://pushgateway.monitoring:9091/", "pushgatewayJob": "soak-eu",
        "shards": 3, "shard": 2, "workers": 2, "maxRequestsPerConnection": 50, "maxConnectionAge": "1m",
        "stages": [{"duration": "1h", "qps": 12.5}], "warmup": "30s", "stopAtBrokenRule": True,
        "backendHeader": "X-Soak-Backend", "remoteWrite": "https://mimir.example/api/v1/push",
        "remoteWriteHeaders": {"X-Scope-OrgID": "team-a"}, "remoteWriteBearerTokenFile": "/var/run/token",
        "otlp": "http://otel-collector.monitoring:4318", "otlpHeaders": {"api-key": "k"},
        "resultsStore": "s3://soak-records/eu", "resultsRun": "soak-28400460", "resultsMergeWait": "1m",
    }
    assert set(data) == set(settings_names()) - {"iterations"}
    assert read_config_file(write_config(tmp_path, data)) == data


@pytest.mark.parametrize(("data", "message"), [
    ({"insecure": "yes"}, '$.insecure: "yes" is not allowed; must be true or false'),
    ({"caBundle": 1}, "$.caBundle: 1 is not allowed; must be a string"),
    ({"http2": 1}, "$.http2: 1 is not allowed; must be true or false"),
    ({"linkerdAwaitTimeout": "0s"}, f'$.linkerdAwaitTimeout: "0s" is not allowed; must be {HINT}, greater than 0'),
    ({"linkerdAdmin": "localhost"},
     '$.linkerdAdmin: "localhost" is not allowed; must be host:port, like 127.0.0.1:4191 (port 1 to 65535)'),
    ({"linkerdAdmin": "127.0.0.1:4191\n"},
     '$.linkerdAdmin: "127.0.0.1:4191\\n" is not allowed; must be host:port, like 127.0.0.1:4191 (port 1 to 65535)'),
    ({"linkerdAdmin": "127.0.0.1:0"},
     '$.linkerdAdmin: "127.0.0.1:0" is not allowed; must be host:port, like 127.0.0.1:4191 (port 1 to 65535)'),
    ({"linkerdAdmin": "999.1.1.1:4191"}, '$.linkerdAdmin: "999.1.1.1:4191" is not allowed: 999.1.1.1 is not an IPv4 '
                                         "address (four numbers from 0 to 255, without leading zeros)"),
    ({"metricAddr": "999.1.1.1:80"}, '$.metricAddr: "999.1.1.1:80" is not allowed: 999.1.1.1 is not an IPv4 address '
                                     "(four numbers from 0 to 255, without leading zeros)"),
    ({"metricAddr": "[::1::]:80"}, '$.metricAddr: "[::1::]:80" is not allowed: ::1:: is not an IPv6 address'),
])
def test_tls_http2_and_linkerd_settings_are_checked(tmp_path: Path, data: dict[str, Any], message: str) -> None:
    path, found = config_error(tmp_path, data)
    assert found == f"{path}: {message}"


def test_http2_is_taken_with_either_transport_name() -> None:
    """Both names give the Python engine httpx, which speaks HTTP/2; the native engine refuses HTTP/2, so
    `auto` sends such a run on the Python engine and says so (issue 34: no client is switched silently)."""
    assert settings_from(merge({"http2": True})).client.http2 is True
    assert settings_from(merge({"http2": True, "transport": "httpx"})).client.http2 is True


def test_tls_and_linkerd_defaults() -> None:
    settings = settings_from(merge())
    assert (settings.client.ca_bundle, settings.client.insecure, settings.client.client_cert, settings.client.client_key) == ("", False, "", "")
    assert (settings.client.http2, settings.linkerd.wait, settings.linkerd.shutdown) == (False, False, False)
    assert settings.linkerd.admin == "127.0.0.1:4191" and settings.linkerd.wait_timeout_ns == 120 * 10**9


# --- precedence: defaults < file < flags -------------------------------------------------------


def test_merge_without_layers_is_the_defaults() -> None:
    merged = merge()
    assert merged == defaults()
    assert merged["qps"] == 100 and merged["concurrency"] == 5 and merged["interval"] == "1m"
    assert merged["iterations"] == 60 and "duration" not in merged


def test_later_layers_win() -> None:
    merged = merge({"qps": 10, "concurrency": 2, "method": "POST"}, {"qps": 20})
    assert merged["qps"] == 20  # flag over file
    assert merged["concurrency"] == 2  # file over default
    assert merged["method"] == "POST"
    assert merged["interval"] == "1m"  # default


def test_headers_add_up_across_layers() -> None:
    merged = merge({"headers": {"A": "1", "B": "2"}}, {"headers": {"B": "3", "C": {"fromEnv": "C_VAR"}}})
    assert merged["headers"] == {"A": "1", "B": "3", "C": {"fromEnv": "C_VAR"}}


def test_merge_does_not_mutate_layers_or_defaults() -> None:
    file_layer = {"headers": {"A": "1"}}
    flag_layer = {"headers": {"B": "2"}}
    merge(file_layer, flag_layer)
    assert file_layer == {"headers": {"A": "1"}} and flag_layer == {"headers": {"B": "2"}}
    assert defaults()["headers"] == {}
    assert schema()["properties"]["headers"]["default"] == {}
    assert merge()["headers"] == {}


def test_duration_in_a_higher_layer_replaces_iterations() -> None:
    merged = merge({"iterations": 10}, {"duration": "2h"})
    assert merged["duration"] == "2h"
    assert "iterations" not in merged
    settings = settings_from(merged)
    assert settings.pace.iterations == 0
    assert settings.pace.duration_ns == 7_200_000_000_000
    assert settings.pace.run_ns == 7_200_000_000_000


def test_duration_replaces_the_default_iterations() -> None:
    settings = settings_from(merge({"duration": "90s"}))
    assert settings.pace.iterations == 0 and settings.pace.duration_ns == 90_000_000_000


@pytest.mark.parametrize("where", ["file", "flags"])
def test_iterations_0_beside_a_duration_means_no_count(tmp_path: Path, where: str) -> None:
    """What the iterations help says: 0 runs until the duration. `"iterations": 0` with a duration
    (and `--iterations 0 --duration 59m`) was refused as giving both."""
    layer = {"iterations": 0, "duration": "59m"}
    if where == "file":
        path = tmp_path / "c.json"
        path.write_text(json.dumps(layer))
        layer = read_config_file(str(path))
    else:
        validate(layer, lambda error: "flags")
    settings = settings_from(merge(layer))
    assert settings.pace.iterations == 0 and settings.pace.run_ns == 59 * 60_000_000_000


def test_iterations_in_a_higher_layer_replaces_duration() -> None:
    merged = merge({"duration": "2h"}, {"iterations": 3})
    assert merged["iterations"] == 3
    assert "duration" not in merged
    settings = settings_from(merged)
    assert settings.pace.duration_ns is None
    assert settings.pace.run_ns == 3 * 60_000_000_000


def test_a_layer_without_stop_rules_keeps_the_lower_one() -> None:
    merged = merge({"duration": "2h"}, {"qps": 5})
    assert merged["duration"] == "2h" and "iterations" not in merged


def test_iterations_zero_runs_until_stopped() -> None:
    settings = settings_from(merge({"iterations": 0}))
    assert settings.pace.iterations == 0 and settings.pace.duration_ns is None
    assert settings.pace.run_ns is None


# --- settings_from -----------------------------------------------------------------------------


def test_settings_from_defaults() -> None:
    s = settings_from(merge())
    assert isinstance(s, Settings)
    assert s.pace.qps == 100.0 and isinstance(s.pace.qps, float)
    assert s.pace.concurrency == 5
    assert s.pace.interval_ns == 60_000_000_000
    assert s.pace.iterations == 60
    assert s.pace.duration_ns is None
    assert s.pace.run_ns == 3_600_000_000_000
    assert s.pace.total_requests == 0
    assert s.request.method == "GET"
    assert s.request.headers == {}
    assert s.request.body == ""
    assert s.request.host == ""
    assert s.client.timeout_ns == 10_000_000_000
    assert (s.client.no_reuse, s.client.compress, s.report.no_latency_summary) == (False, False, False)
    assert s.report.latency_unit == "ms"
    assert s.report.hash_value == 0 and s.report.hash_sample_rate == 0.0
    assert s.report.report_latencies_csv == ""
    assert s.pace.load_model == "closed"
    assert s.pace.max_in_flight == 1000
    assert s.pace.mode == "soak"
    assert (s.client.max_requests_per_connection, s.client.max_connection_age_ns) == (0, 0)  # kept for the run


@pytest.mark.parametrize(("layer", "expected"), [
    ({"maxRequestsPerConnection": 50, "maxConnectionAge": "1m30s"}, (50, 90_000_000_000)),
    ({"maxRequestsPerConnection": 1000000000, "maxConnectionAge": "8760h"}, (1000000000, 8760 * 3600 * 10**9)),
    ({"maxRequestsPerConnection": 1, "maxConnectionAge": "1ms"}, (1, 1_000_000)),
    ({"maxConnectionAge": "0"}, (0, 0)),  # Go's bare 0, as for every duration
])
def test_a_connections_lifetime_is_carried_in_whole_numbers(layer: dict[str, Any], expected: tuple[int, int]) -> None:
    client = settings_from(merge(layer)).client
    found = (client.max_requests_per_connection, client.max_connection_age_ns)
    assert found == expected and all(type(value) is int for value in found)


def test_settings_from_parses_durations_to_nanoseconds() -> None:
    s = settings_from(merge({"interval": "1m30s", "timeout": "1.5s", "duration": "2h0m0.5s"}))
    assert s.pace.interval_ns == 90_000_000_000
    assert s.client.timeout_ns == 1_500_000_000
    assert s.pace.duration_ns == 7_200_500_000_000
    assert all(type(v) is int for v in (s.pace.interval_ns, s.client.timeout_ns, s.pace.duration_ns))


def test_settings_from_carries_every_value() -> None:
    s = settings_from(merge({
        "qps": 2.5, "concurrency": 7, "interval": "500ms", "iterations": 4, "totalRequests": 9, "method": "PUT",
        "headers": {"X": "1"}, "body": {"file": "b"}, "host": "h:1", "timeout": "2s", "noReuse": True,
        "compress": True, "latencyUnit": "ns", "hashValue": 42, "hashSampleRate": 0.5, "noLatencySummary": True,
        "reportLatenciesCSV": "out.csv", "loadModel": "open", "maxInFlight": 7, "mode": "bench",
    }))
    assert (s.pace.qps, s.pace.concurrency, s.pace.interval_ns, s.pace.iterations, s.pace.total_requests, s.request.method) == (
        2.5, 7, 500_000_000, 4, 9, "PUT")
    assert s.pace.run_ns == 2_000_000_000
    assert (s.request.headers, s.request.body, s.request.host, s.client.timeout_ns) == ({"X": "1"}, {"file": "b"}, "h:1", 2_000_000_000)
    assert (s.client.no_reuse, s.client.compress, s.report.latency_unit, s.report.hash_value, s.report.hash_sample_rate) == (True, True, "ns", 42, 0.5)
    assert (s.report.no_latency_summary, s.report.report_latencies_csv, s.pace.load_model, s.pace.max_in_flight, s.pace.mode) == (
        True, "out.csv", "open", 7, "bench")


def test_settings_headers_are_a_copy() -> None:
    merged = merge({"headers": {"X": "1"}})
    s = settings_from(merged)
    merged["headers"]["Y"] = "2"
    assert s.request.headers == {"X": "1"}


def test_whole_numbers_written_as_floats_become_ints(tmp_path: Path) -> None:
    """JSON Schema counts 5.0 as an integer; the run must still get an int (range(5.0) fails)."""
    path = write_config(tmp_path, '{"concurrency": 5.0, "iterations": 2.0, "totalRequests": 10.0, "maxInFlight": 3.0}')
    s = settings_from(merge(read_config_file(path)))
    for value, expected in ((s.pace.concurrency, 5), (s.pace.iterations, 2), (s.pace.total_requests, 10), (s.pace.max_in_flight, 3)):
        assert value == expected and type(value) is int
    assert s.pace.run_ns == 2 * 60_000_000_000 and type(s.pace.run_ns) is int


# --- effective: what may be printed ------------------------------------------------------------


@pytest.mark.parametrize("name", ["Authorization", "authorization", "Proxy-Authorization", "Cookie", "X-Api-Key",
                                  "X-API-KEY"])
def test_effective_hides_credential_header_values(name: str) -> None:
    s = settings_from(merge({"headers": {name: "s3cr3t", "X-Trace": "visible"}}))
    assert s.effective["headers"] == {name: "<hidden>", "X-Trace": "visible"}
    assert "s3cr3t" not in json.dumps(s.effective)
    assert s.request.headers[name] == "s3cr3t"  # the request still gets it


def test_effective_shows_from_env_references_not_values() -> None:
    s = settings_from(merge({"headers": {"Authorization": {"fromEnv": "TOKEN"}}}))
    assert s.effective["headers"] == {"Authorization": {"fromEnv": "TOKEN"}}


def test_effective_lists_every_setting_in_schema_order() -> None:
    s = settings_from(merge({"qps": 7, "duration": "1h"}))
    names = [n for n in settings_names() if n not in ("iterations", "shard", "stages")]  # neither set nor defaulted
    assert list(s.effective) == names
    assert s.effective["qps"] == 7 and s.effective["duration"] == "1h"
    json.dumps(s.effective)  # printable as JSON


# --- the schema itself and the shipped configuration.json --------------------------------------


def test_every_property_has_a_description() -> None:
    props = schema()["properties"]
    for name, spec in props.items():
        assert isinstance(spec.get("description"), str) and len(spec["description"]) > 10, name


def test_every_setting_but_duration_has_a_default_that_validates() -> None:
    props = schema()["properties"]
    for name in settings_names():
        if name in NO_DEFAULT:
            assert "default" not in props[name]
            continue
        assert "default" in props[name], name
    validate(defaults(), json_path_in("defaults"))  # the defaults pass their own schema


# duration is an alternative to iterations; shard, when absent, comes from JOB_COMPLETION_INDEX.
NO_DEFAULT = {"duration", "shard", "stages"}


def test_settings_names_are_the_properties_without_schema_hint() -> None:
    names = settings_names()
    assert "$schema" not in names
    assert names == [n for n in schema()["properties"] if n != "$schema"]
    assert {"qps", "concurrency", "interval", "iterations", "duration", "headers", "body"} <= set(names)
    assert set(defaults()) == set(names) - NO_DEFAULT


def test_documented_defaults() -> None:
    d = defaults()
    assert (d["qps"], d["concurrency"], d["interval"], d["iterations"], d["method"]) == (100, 5, "1m", 60, "GET")
    assert (d["timeout"], d["latencyUnit"], d["loadModel"], d["maxInFlight"]) == ("10s", "ms", "closed", 1000)


def test_shipped_configuration_json_is_the_default_soak() -> None:
    path = str(REPO / "configuration.json")
    data = read_config_file(path)
    # The defaults spelled out, but for a run that ends before the next hourly one is due
    # (59 intervals), thresholds that fail the Job when the target is down, and connections
    # that end every 50 requests, to reach every pod behind the Service, whose responses are
    # counted by the header the pallet's nginx names its pod in (docs/kubernetes.md).
    assert data == {"qps": 100, "concurrency": 5, "interval": "1m", "iterations": 59, "method": "GET",
                    "maxRequestsPerConnection": 50, "backendHeader": "X-Soak-Backend",
                    "thresholds": ["errors% <= 1", "goal% >= 95", "4xx% <= 1"]}
    s = settings_from(merge(data))
    assert (s.pace.qps, s.pace.concurrency, s.pace.interval_ns, s.pace.iterations, s.request.method) == (100.0, 5, 60_000_000_000, 59, "GET")
    assert s.pace.run_ns == 3_540_000_000_000
    assert (s.client.max_requests_per_connection, s.client.max_connection_age_ns) == (50, 0)
    assert s.report.backend_header == "X-Soak-Backend"
    spelled_out = {key: value for key, value in data.items()
                   if key not in ("thresholds", "iterations", "maxRequestsPerConnection", "backendHeader")}
    assert settings_from(merge(spelled_out)) == settings_from(merge())  # the rest spells out the defaults, nothing else


# --- the plain check: a layer jsonschema need not be loaded for ---------------------------------

def _candidates(spec: dict[str, Any]) -> list[Any]:
    """Values near and across each plain setting's rule: its enum, its bounds, other types."""
    values: list[Any] = [None, True, False, 0, 1, -1, 0.5, 5.0, 2**70, -(2**70), float("nan"), float("inf"),
                         float("-inf"), "", "x", "1", [], {}, [1], {"a": 1}]
    values += list(spec.get("enum", [])) + [e.upper() for e in spec.get("enum", [])]
    if "x-durationRange" in spec:  # each bound, a step either side, 0 and what is not a Go duration
        values += [*spec["x-durationRange"], "0s", "0", "1ns", "999us", "1ms1ns", "24h", "24h0m0.000000001s",
                   "8760h", "8760h1ns", "9999999999999999999h", "-1s", "1.5h", "1h30m", " 1s", "1s ", "1", "5 s",
                   "1S", "1d", ".5s", "1e3s"]
    for bound in ("minimum", "maximum"):
        if bound in spec:
            b = spec[bound]
            values += [b, b - 1, b + 1, b - 0.001, b + 0.001, float(b), str(b)]
    return values


def test_the_plain_check_accepts_only_what_jsonschema_accepts() -> None:
    """validate() skips jsonschema for a layer _plainly_valid accepts: jsonschema must find nothing
    wrong with any such layer, or a bad value would pass unreported."""
    from runner.config.schema import _plain_settings, _plainly_valid, _validator

    plain = _plain_settings()
    assert {"engine", "concurrency", "totalRequests", "qps", "mode", "noReuse"} <= set(plain)  # ab's flags and --engine
    assert {"iterations", "duration", "interval", "timeout", "warmup", "maxConnectionAge"} <= set(plain)  # durations
    assert not {"headers", "body", "thresholds", "stages", "pushgateway", "reportLatenciesCSV"} & set(plain)
    accepted = 0
    for name, spec in plain.items():
        for value in _candidates(spec):
            errors = list(_validator().iter_errors({name: value}))
            if _plainly_valid({name: value}):
                accepted += 1
                assert not errors, (name, value, errors[0].message)
    assert accepted > 100  # the check does accept most values a run is given


def test_iterations_with_a_duration_is_jsonschemas_to_judge() -> None:
    """The schema's `not` refuses iterations above 0 beside a duration: a layer with both is never judged
    plainly, and one with either alone is judged as any other."""
    from runner.config.schema import _plainly_valid, _validator

    for iterations in (0, 1, 5):
        for duration in ("1m", "0s", "x"):
            assert not _plainly_valid({"iterations": iterations, "duration": duration})
    assert list(_validator().iter_errors({"iterations": 5, "duration": "1m"}))
    assert _plainly_valid({"iterations": 5}) and _plainly_valid({"duration": "1m", "interval": "10s"})


@pytest.mark.parametrize("layer", [
    {"engine": "native"}, {"totalRequests": 20000, "concurrency": 100}, {"qps": 0.5, "mode": "bench"}, {},
    {"mode": "bench", "duration": "10s", "totalRequests": 50000, "noReuse": False},  # ab -k -t 10
    {"interval": "70s", "timeout": "5s", "warmup": "0s", "maxConnectionAge": "0s"},
])
def test_a_plain_layer_is_valid_without_jsonschema(layer: dict[str, Any]) -> None:
    from runner.config.schema import _plainly_valid, _validator

    assert _plainly_valid(layer)
    assert not list(_validator().iter_errors(layer))


@pytest.mark.parametrize("layer", [
    {"engine": "fast"}, {"concurrency": 0}, {"concurrency": True}, {"concurrency": 5.0}, {"qps": float("nan")},
    {"iterations": 5, "duration": "1m"}, {"interval": "0s"}, {"interval": "1us"}, {"interval": "25h"},
    {"timeout": "5x"}, {"duration": "9999999999999999999h"}, {"interval": 5}, {"headers": {"X": "1"}},
    {"nosuch": 1}, {"engine": "native", "nosuch": 1}, [],
])
def test_anything_else_goes_to_jsonschema(layer: Any) -> None:
    """A value the plain check refuses, a setting it does not judge, an unknown key: jsonschema's to say."""
    from runner.config.schema import _plainly_valid

    assert not _plainly_valid(layer)


def test_a_bad_flag_still_gets_jsonschemas_one_line() -> None:
    with pytest.raises(UsageError, match=r'^--concurrency: 0 is not allowed; must be at least 1$'):
        validate({"engine": "native", "concurrency": 0}, lambda error: f"--{error.path[0]}")
