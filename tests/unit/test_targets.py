"""Targets: URL lists (plain file, ConfigMap YAML, @file, arguments), headers and body."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from runner.config.schema import schema
from runner.config.settings import merge, settings_from
from runner.config.urls import URLS_KEY, check_url, load_url_file, parse_url_lines, urls_from_arguments
from runner.core.errors import UsageError
from runner.load.request import HEADER_VALUE, Request, build_requests, load_body, resolve_headers

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def usage_error(call, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError) as caught:
        call(*args)
    message = str(caught.value)
    assert "\n" not in message
    return message


# --- plain URL files ---------------------------------------------------------------------------


def test_plain_file_ignores_blank_lines_and_comments(tmp_path: Path) -> None:
    path = write(tmp_path, "urls.txt", "# targets\n\nhttp://a.example/\n   \n  # indented comment\n"
                                       "  https://b.example:8443/x?y=1  \nhttp://c.example/#frag\n")
    assert load_url_file(path) == ["http://a.example/", "https://b.example:8443/x?y=1", "http://c.example/#frag"]


def test_plain_file_keeps_order_and_duplicates(tmp_path: Path) -> None:
    path = write(tmp_path, "urls.txt", "http://b/\nhttp://a/\nhttp://b/\n")
    assert load_url_file(path) == ["http://b/", "http://a/", "http://b/"]


def test_plain_file_with_crlf_line_ends(tmp_path: Path) -> None:
    path = write(tmp_path, "urls.txt", "http://a/\r\nhttp://b/\r\n")
    assert load_url_file(path) == ["http://a/", "http://b/"]


def test_plain_file_without_final_newline(tmp_path: Path) -> None:
    assert load_url_file(write(tmp_path, "urls.txt", "http://a/")) == ["http://a/"]


@pytest.mark.parametrize(
    ("text", "line", "bad", "problem"),
    [
        ("http://a/\nftp://b/\n", 2, "ftp://b/", "is not an http:// or https:// URL"),
        ("# c\n\nhttp://a/\nhttp:///x\n", 4, "http:///x", "has no host"),
        ("http://a b/\n", 1, "http://a b/", "contains a space"),
        ("\n\n\n\nhttp://a/\tb\n", 5, "http://a/\tb", "contains a tab"),
        ("http://a/\nhttp://a:99999/\n", 2, "http://a:99999/", "is not a valid URL (Port out of range 0-65535)"),
        ("nginx.svc.cluster.local\n", 1, "nginx.svc.cluster.local", "is not an http:// or https:// URL"),
        ("http://a/\n---\n", 2, "---", "is not an http:// or https:// URL"),
    ],
)
def test_plain_file_errors_name_file_and_line(tmp_path: Path, text: str, line: int, bad: str, problem: str) -> None:
    path = write(tmp_path, "urls.txt", text)
    assert usage_error(load_url_file, path) == f"{path}:{line}: {bad!r} {problem}"


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "  # a\n\n# b\n"])
def test_file_without_urls(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "urls.txt", text)
    assert usage_error(load_url_file, path) == f"{path}: no URLs (one per line; blank lines and # comments are ignored)"


def test_missing_url_file(tmp_path: Path) -> None:
    path = str(tmp_path / "missing.txt")
    assert usage_error(load_url_file, path) == f"{path}: no such file"


def test_url_file_that_is_a_directory(tmp_path: Path) -> None:
    assert usage_error(load_url_file, str(tmp_path)).startswith(f"{tmp_path}: cannot read: ")


def test_parse_url_lines_offsets_line_numbers() -> None:
    message = usage_error(parse_url_lines, "http://a/\n\nftp://x/\n", "cm.yaml", 10)
    assert message == "cm.yaml:12: 'ftp://x/' is not an http:// or https:// URL"


def test_parse_url_lines_without_line_numbers() -> None:
    message = usage_error(parse_url_lines, "http://a/\nftp://x/", "cm.yaml", None)
    assert message == "cm.yaml: 'ftp://x/' is not an http:// or https:// URL"


# --- the ConfigMap YAML ------------------------------------------------------------------------


def test_the_shipped_configmap_loads() -> None:
    assert load_url_file(str(REPO / "urlsconfigmap.yaml")) == ["http://nginx.soak-target.svc.cluster.local"]


CONFIGMAP = """\
# a comment
apiVersion: v1
kind: ConfigMap
metadata:
  name: soak-urls
data:
  urls.txt: |
    http://a.example/
    # a comment inside the list

    http://b.example/
{extra}"""


def test_configmap_with_several_urls(tmp_path: Path) -> None:
    path = write(tmp_path, "cm.yaml", CONFIGMAP.format(extra=""))
    assert load_url_file(path) == ["http://a.example/", "http://b.example/"]


def test_bad_url_in_configmap_block_reports_the_file_line(tmp_path: Path) -> None:
    text = CONFIGMAP.format(extra="    ftp://c.example/\n")
    path = write(tmp_path, "cm.yaml", text)
    line = text.splitlines().index("    ftp://c.example/") + 1
    assert line == 12
    assert usage_error(load_url_file, path) == f"{path}:12: 'ftp://c.example/' is not an http:// or https:// URL"


def test_bad_url_on_the_first_line_of_the_block(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\ndata:\n  urls.txt: |\n    http://bad host/\n"
    path = write(tmp_path, "cm.yaml", text)
    assert usage_error(load_url_file, path) == f"{path}:5: 'http://bad host/' contains a space"


def test_bad_url_in_a_strip_chomped_block(tmp_path: Path) -> None:
    text = "kind: ConfigMap\napiVersion: v1\ndata:\n  urls.txt: |-\n    http://a/\n    ftp://b/\n"
    path = write(tmp_path, "cm.yaml", text)
    assert usage_error(load_url_file, path) == f"{path}:6: 'ftp://b/' is not an http:// or https:// URL"


def test_configmap_with_several_keys_uses_urls_txt(tmp_path: Path) -> None:
    text = ("apiVersion: v1\nkind: ConfigMap\ndata:\n  README: not a url\n"
            f"  {URLS_KEY}: |\n    http://a/\n    http://b/\n  other.txt: |\n    ftp://ignored/\n")
    assert load_url_file(write(tmp_path, "cm.yaml", text)) == ["http://a/", "http://b/"]


def test_configmap_with_several_keys_but_no_urls_txt(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\ndata:\n  b.txt: http://y/\n  a.txt: http://x/\n"
    path = write(tmp_path, "cm.yaml", text)
    assert usage_error(load_url_file, path) == (
        f"{path}: the ConfigMap has no key urls.txt, which is the file the soak pod reads (it has the keys a.txt, "
        "b.txt); put the URLs under urls.txt")


def test_configmap_with_one_other_key_is_refused_as_the_pod_would_not_find_it(tmp_path: Path) -> None:
    """It was read as the list: validate passed a ConfigMap the CronJob mounts as /etc/soak/urls/targets,
    and every run then failed to open /etc/soak/urls/urls.txt."""
    text = "apiVersion: v1\nkind: ConfigMap\ndata:\n  targets: |\n    http://x/\n    http://y/\n"
    path = write(tmp_path, "cm.yaml", text)
    assert usage_error(load_url_file, path) == (
        f"{path}: the ConfigMap has no key urls.txt, which is the file the soak pod reads (it has the key targets); "
        "put the URLs under urls.txt")


def test_configmap_with_a_quoted_string(tmp_path: Path) -> None:
    text = 'apiVersion: v1\nkind: ConfigMap\ndata:\n  urls.txt: "http://a/\\nhttp://b/\\n"\n'
    assert load_url_file(write(tmp_path, "cm.yaml", text)) == ["http://a/", "http://b/"]


def test_bad_url_in_a_quoted_string_names_the_file_without_a_line(tmp_path: Path) -> None:
    text = 'apiVersion: v1\nkind: ConfigMap\ndata:\n  urls.txt: "http://a/\\nftp://b/"\n'
    path = write(tmp_path, "cm.yaml", text)
    assert usage_error(load_url_file, path) == f"{path}: 'ftp://b/' is not an http:// or https:// URL"


def test_configmap_whose_urls_are_a_list(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\ndata:\n  urls.txt:\n    - http://a/\n"
    path = write(tmp_path, "cm.yaml", text)
    assert usage_error(load_url_file, path) == f"{path}: data.urls.txt must be text, one URL per line"


@pytest.mark.parametrize("data", ["", "data: {}\n", "data:\n"])
def test_configmap_without_data(tmp_path: Path, data: str) -> None:
    path = write(tmp_path, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\n" + data)
    assert usage_error(load_url_file, path) == f"{path}: the ConfigMap has no data"


def test_configmap_with_empty_url_list(tmp_path: Path) -> None:
    path = write(tmp_path, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\ndata:\n  urls.txt: |\n    # none yet\n")
    assert usage_error(load_url_file, path).startswith(f"{path}: no URLs")


@pytest.mark.parametrize(
    "text",
    ["apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n", "foo: bar\n", "urls:\n  - http://a/\n",
     "http://a/: x\n", "# urls\nhttp://b/:\n"],  # `http://b/:` is a YAML key, not a plain list's URL
)
def test_yaml_mapping_that_is_not_a_configmap(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "x.yaml", text)
    assert usage_error(load_url_file, path) == f"{path}: a YAML mapping but not a ConfigMap (expected kind: ConfigMap)"


def test_text_that_is_not_yaml_is_a_plain_list(tmp_path: Path) -> None:
    # A tab-indented second line makes this invalid YAML; it is still a plain list.
    path = write(tmp_path, "urls.txt", "http://a/\n\t http://b/\n")
    assert load_url_file(path) == ["http://a/", "http://b/"]


INVALID_MANIFESTS = [
    # the data: key indented by one space, as a paste can leave it
    ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n data:\n  urls.txt: |\n    http://a/\n",
     "5: invalid YAML: expected <block end>, but found '<block mapping start>' (column 2)"),
    ("apiVersion: v1\nkind: ConfigMap\ndata:\n\turls.txt: http://a/\n",
     "4: invalid YAML: found character '\\t' that cannot start any token (column 1)"),
    ("kind: ConfigMap\ndata: {urls.txt: http://a/\n", "3: invalid YAML: expected ',' or '}', but got '<stream end>' (column 1)"),
]


@pytest.mark.parametrize(("text", "problem"), INVALID_MANIFESTS)
def test_a_manifest_that_is_not_valid_yaml_is_said_so_with_its_line(tmp_path: Path, text: str, problem: str) -> None:
    """It was read as a plain list: `badcm.yaml:1: 'apiVersion: v1' contains a space`."""
    path = write(tmp_path, "cm.yaml", text)
    assert usage_error(load_url_file, path) == (f"{path}:{problem}; a URL list is a ConfigMap manifest or plain "
                                                "lines, one URL each")


def test_a_plain_list_that_is_not_yaml_still_names_its_bad_url(tmp_path: Path) -> None:
    """Invalid YAML with no `key:` line at the margin is no manifest: its lines are URLs, checked as such."""
    path = write(tmp_path, "urls.txt", "http://a/\n\t http://b c/\n")
    assert usage_error(load_url_file, path) == f"{path}:2: 'http://b c/' contains a space"


# --- @file arguments and URL arguments ---------------------------------------------------------


def test_urls_from_arguments(tmp_path: Path) -> None:
    listed = write(tmp_path, "list.txt", "http://b/\nhttp://c/\n")
    configmap = write(tmp_path, "cm.yaml", "kind: ConfigMap\ndata:\n  urls.txt: |\n    http://d/\n")
    assert urls_from_arguments(["http://a/", f"@{listed}", f"@{configmap}"]) == [
        "http://a/", "http://b/", "http://c/", "http://d/"]


def test_bad_url_argument() -> None:
    assert usage_error(urls_from_arguments, ["http://a/", "localhost:8080"]) == (
        "URL argument: 'localhost:8080' is not an http:// or https:// URL")


def test_at_file_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    assert usage_error(urls_from_arguments, [f"@{missing}"]) == f"{missing}: no such file"


def test_bad_url_in_at_file_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "list.txt", "http://a/\n\nhttp://a:port/\n")
    assert usage_error(urls_from_arguments, [f"@{path}"]) == (
        f"{path}:3: 'http://a:port/' is not a valid URL (Port could not be cast to integer value as 'port')")


# --- check_url ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["http://a/", "https://a.example:443/x", "http://127.0.0.1:8080/ok", "http://[::1]:8080/", "HTTP://A/",
     "http://nginx.nginx.svc.cluster.local", "https://user:pw@host/p?q=1", "http://a:1/", "http://a:65535/"],
)
def test_good_urls(url: str) -> None:
    assert check_url(url, "here") == url


@pytest.mark.parametrize(("url", "shown"), [
    ("ftp://alice:S3cret@a/", "'ftp://alice:<hidden>@a/' is not an http:// or https:// URL"),
    ("http://alice:S3cret@a:99999/?token=T0ken", "'http://alice:<hidden>@a:99999/?token=<hidden>' is not a valid URL "
                                               "(Port out of range 0-65535)"),
])
def test_a_refused_url_is_quoted_without_its_secrets(url: str, shown: str) -> None:
    assert usage_error(check_url, url, "urls.txt:3") == f"urls.txt:3: {shown}"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://a/", "is not an http:// or https:// URL"),
        ("file:///etc/passwd", "is not an http:// or https:// URL"),
        ("ws://a/", "is not an http:// or https:// URL"),
        ("a.example/path", "is not an http:// or https:// URL"),
        ("//a.example/", "is not an http:// or https:// URL"),
        ("", "is not an http:// or https:// URL"),
        ("http://", "has no host"),
        ("http:///path", "has no host"),
        ("https://:8080/", "has no host"),
        ("http://a b/", "contains a space"),
        ("http://a/b c", "contains a space"),
        (" http://a/", "contains a space"),
        # a pasted line end was "contains a space": it is said as what it is
        ("http://a/\r\n", "contains a line break (CR, \\r)"),
        ("http://a/\nhttp://b/", "contains a line break (LF, \\n)"),
        ("http://a/\tb", "contains a tab"),
        ("http://a/\x0cb", "contains a control character ('\\x0c')"),
        ("http://a/\u00a0b", "contains a space that is not ASCII (U+00A0)"),
        ("http://a/\u3000", "contains a space that is not ASCII (U+3000)"),
        ("http://a:99999/", "is not a valid URL (Port out of range 0-65535)"),
        ("http://a:-1/", "is not a valid URL"),
        ("http://a:80x/", "is not a valid URL (Port could not be cast to integer value as '80x')"),
        ("http://[::1/", "is not a valid URL (Invalid IPv6 URL)"),
        ("http://a/\x00", "contains a control character ('\\x00')"),
        ("http://a/\x7f", "contains a control character ('\\x7f')"),
    ],
)
def test_bad_urls(url: str, problem: str) -> None:
    message = usage_error(check_url, url, "urls.txt:7")
    assert message.startswith(f"urls.txt:7: {url!r} {problem}")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:8080/€", "is not ASCII: percent-encode the path and query ('€' is %E2%82%AC)"),
        ("http://a/?q=é", "is not ASCII: percent-encode the path and query ('é' is %C3%A9)"),
        ("http://a/#é", "is not ASCII: percent-encode the path and query ('é' is %C3%A9)"),
        ("http://例え.invalid/", "is not ASCII: write the host name in its punycode form (xn--r8jz45g.invalid)"),
        ("https://bücher.example:8443/€", "is not ASCII: write the host name in its punycode form (xn--bcher-kva.example)"),
        ("http://a/\udcff", "is not ASCII: percent-encode the path and query ('\\udcff' is %FF)"),  # byte 0xff in argv
        ("http://a/\ud800", "is not ASCII: percent-encode the path and query"),  # "\\ud800" in JSON: no character
    ],
)
def test_urls_beyond_ascii_are_refused_with_their_ascii_form(url: str, problem: str) -> None:
    """The fast transport crashed on the first send (latin-1) and httpx encoded quietly: refused up front."""
    assert usage_error(check_url, url, "urls.txt:3") == f"urls.txt:3: {url!r} {problem}"


def test_url_beyond_ascii_in_a_file_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "urls.txt", "http://a/\n\nhttp://a/€\n")
    assert usage_error(load_url_file, path) == (
        f"{path}:3: 'http://a/€' is not ASCII: percent-encode the path and query ('€' is %E2%82%AC)")


def test_url_beyond_ascii_as_an_argument_names_the_argument() -> None:
    assert usage_error(urls_from_arguments, ["http://例え.jp/"]) == (
        "URL argument: 'http://例え.jp/' is not ASCII: write the host name in its punycode form (xn--r8jz45g.jp)")


# --- headers -----------------------------------------------------------------------------------


def test_literal_headers_pass_through_in_order() -> None:
    assert resolve_headers({"B": "2", "A": "1"}, {}) == [("B", "2"), ("A", "1")]


def test_header_from_env_set() -> None:
    environ = {"SOAK_TOKEN": "Bearer abc"}
    assert resolve_headers({"Authorization": {"fromEnv": "SOAK_TOKEN"}, "X": "1"}, environ) == [
        ("Authorization", "Bearer abc"), ("X", "1")]


@pytest.mark.parametrize("environ", [{}, {"SOAK_TOKEN": ""}, {"OTHER": "s3cr3t"}])
def test_header_from_env_unset_or_empty(environ: dict[str, str]) -> None:
    message = usage_error(resolve_headers, {"Authorization": {"fromEnv": "SOAK_TOKEN"}}, environ)
    assert message == "headers.Authorization: environment variable SOAK_TOKEN is not set or empty"
    assert "s3cr3t" not in message


def test_header_env_value_never_appears_in_errors() -> None:
    environ = {"GOOD": "s3cr3t-good"}
    message = usage_error(resolve_headers, {"A": {"fromEnv": "GOOD"}, "B": {"fromEnv": "MISSING"}}, environ)
    assert "s3cr3t" not in message
    assert "MISSING" in message


@pytest.mark.parametrize("value", ["Bearer s3cr3t\n", "Bearer s3cr3t\r\n", "Bearer s3cr3t\nX-Injected: 1"])
def test_header_env_value_with_a_line_break_never_reaches_the_wire(value: str) -> None:
    spec = {"Authorization": {"fromEnv": "SOAK_TOKEN"}}
    try:
        resolved = resolve_headers(spec, {"SOAK_TOKEN": value})
    except UsageError as e:  # rejected up front: the variable is named, its value is not
        assert "SOAK_TOKEN" in str(e) and "s3cr3t" not in str(e)
        return
    assert not any(ch in resolved[0][1] for ch in "\r\n")


@pytest.mark.parametrize("value", ["Bearer s3cr3t-é", "s3cr3t\udcff", "s3cr3t\x00x", "s3cr3t\x7f"])
def test_header_env_value_beyond_visible_ascii_is_refused_without_printing_it(value: str) -> None:
    """Such a value crashed httpx (ascii) and, beyond Latin-1, the fast transport, with a traceback at the first send."""
    message = usage_error(resolve_headers, {"Authorization": {"fromEnv": "SOAK_TOKEN"}}, {"SOAK_TOKEN": value})
    assert message == ("headers.Authorization: environment variable SOAK_TOKEN must hold ASCII text "
                       "(visible characters, spaces and tabs)")


def test_env_and_literal_header_values_follow_one_rule() -> None:
    """A literal value is checked by schema.json's pattern, a value from the environment by HEADER_VALUE."""
    literal = schema()["properties"]["headers"]["additionalProperties"]["anyOf"][0]["pattern"]
    assert literal.startswith("^") and literal.endswith("$")
    pattern = re.compile(literal[1:-1])
    for code in [*range(0x300), 0x20AC, 0xD800, 0xDCFF, 0xFFFD]:
        assert bool(HEADER_VALUE.fullmatch(chr(code))) == bool(pattern.fullmatch(chr(code))), hex(code)


def test_header_env_value_with_inner_spaces_and_tabs_is_kept() -> None:
    assert resolve_headers({"X": {"fromEnv": "V"}}, {"V": " a b\tc \n"}) == [("X", "a b\tc")]


# --- body --------------------------------------------------------------------------------------


def test_body_literal() -> None:
    assert load_body("") == b""
    assert load_body('{"a": 1}') == b'{"a": 1}'
    assert load_body("é") == "é".encode()


def test_body_from_file(tmp_path: Path) -> None:
    path = tmp_path / "body.bin"
    path.write_bytes(b"\x00\xffbinary\r\n")
    assert load_body({"file": str(path)}) == b"\x00\xffbinary\r\n"


def test_body_file_missing(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    assert usage_error(load_body, {"file": str(path)}) == f"body.file: {path}: no such file"


def test_body_file_is_a_directory(tmp_path: Path) -> None:
    assert usage_error(load_body, {"file": str(tmp_path)}) == f"body.file: {tmp_path}: cannot read: Is a directory"


# --- build_requests ----------------------------------------------------------------------------


def test_build_requests_one_per_url(tmp_path: Path) -> None:
    body = tmp_path / "b.json"
    body.write_bytes(b"{}")
    settings = settings_from(merge({
        "method": "POST",
        "headers": {"X-Trace": "1", "Authorization": {"fromEnv": "TOKEN"}},
        "host": "api.example",
        "body": {"file": str(body)},
    }))
    requests = build_requests(settings, ["http://a/", "http://b/"], {"TOKEN": "Bearer t"})
    expected_headers = (("X-Trace", "1"), ("Authorization", "Bearer t"), ("Host", "api.example"))
    assert requests == [
        Request("POST", "http://a/", expected_headers, b"{}"),
        Request("POST", "http://b/", expected_headers, b"{}"),
    ]


# A URL's user info is resolved once, into the Authorization header both transports send.


@pytest.mark.parametrize(("url", "bare", "credentials"), [
    ("http://alice:S3cret@h:8080/x?y=1", "http://h:8080/x?y=1", b"alice:S3cret"),
    ("https://al%40ice:p%3Ass@h/", "https://h/", b"al@ice:p:ss"),  # percent-decoded, as curl and Go send it
    ("http://alice@h/", "http://h/", b"alice:"),  # a user name alone: an empty password
    ("http://:t0ken@h/", "http://h/", b":t0ken"),
    ("http://a@b:c@h/p@q", "http://h/p@q", b"a@b:c"),  # the last @ of the authority ends the user info
])
def test_user_info_becomes_an_authorization_header(url: str, bare: str, credentials: bytes) -> None:
    settings = settings_from(merge({"headers": {"X-Trace": "1"}}))
    [request] = build_requests(settings, [url], {})
    assert request.url == bare
    assert request.headers == (("X-Trace", "1"), ("Authorization", "Basic " + base64.b64encode(credentials).decode()))
    assert request.headers[-1][1] in request.hidden


def test_each_url_gets_its_own_credentials() -> None:
    requests = build_requests(settings_from(merge()), ["http://a:1@h/", "http://h/", "http://b:2@h/"], {})
    assert [r.url for r in requests] == ["http://h/"] * 3
    assert [dict(r.headers).get("Authorization") for r in requests] == [
        "Basic " + base64.b64encode(b"a:1").decode(), None, "Basic " + base64.b64encode(b"b:2").decode()]


@pytest.mark.parametrize("name", ["Authorization", "authorization"])
def test_user_info_and_an_authorization_header_are_refused(name: str) -> None:
    settings = settings_from(merge({"headers": {name: "Bearer t"}}))
    message = usage_error(build_requests, settings, ["http://ok/", "http://alice:S3cret@h/"], {})
    assert message == ("http://alice:<hidden>@h/: a user name and password in the URL and an Authorization header "
                       "both give credentials; give them one way")


def test_hidden_values_are_every_secret_a_request_carries() -> None:
    settings = settings_from(merge({"headers": {"X-Env": {"fromEnv": "V"}, "X-Api-Key": "k3y-literal",
                                                "X-Trace": "shown", "X-Fwd": "Bearer b3arer"}}))
    [request] = build_requests(settings, ["http://alice:p%40ss@h/?token=t0k%21&page=2"], {"V": "from-env"})
    basic = "Basic " + base64.b64encode(b"alice:p@ss").decode()
    assert set(request.hidden) == {"from-env", "k3y-literal", "Bearer b3arer", "p%40ss", "p@ss", "t0k%21", "t0k!",
                                   basic, basic.split()[1]}


def test_build_requests_defaults() -> None:
    requests = build_requests(settings_from(merge()), ["http://a/"], {})
    assert requests == [Request("GET", "http://a/", (), b"")]


def test_build_requests_fails_early_on_missing_env() -> None:
    settings = settings_from(merge({"headers": {"Authorization": {"fromEnv": "TOKEN"}}}))
    with pytest.raises(UsageError, match="environment variable TOKEN is not set or empty"):
        build_requests(settings, ["http://a/"], {})
