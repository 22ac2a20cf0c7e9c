"""The redaction rules, one table each: what of a URL, a header, a body or a server's text is shown."""

from __future__ import annotations

import base64

import pytest

from runner.core import redact
from runner.core.redact import HIDDEN, Secrets

H = HIDDEN

URLS = [
    # nothing to hide: returned as written
    ("http://host/", "http://host/"),
    ("https://host:8443/a/b?x=1&y=2#frag", "https://host:8443/a/b?x=1&y=2#frag"),
    ("http://127.0.0.1:1/", "http://127.0.0.1:1/"),
    ("http://[::1]:80/p", "http://[::1]:80/p"),
    # user info: the password hidden, the user name kept
    ("http://alice:S3cret@host/", f"http://alice:{H}@host/"),
    ("http://alice:S3cret@host", f"http://alice:{H}@host"),
    ("http://alice:S3cret@host:8080/x?q=1", f"http://alice:{H}@host:8080/x?q=1"),
    ("http://al%40ice:p%40ss%3Aword@host/", f"http://al%40ice:{H}@host/"),
    ("http://alice:a:b:c@host/", f"http://alice:{H}@host/"),  # everything after the first colon
    ("http://a@b:c@host/", f"http://a@b:{H}@host/"),  # the last @ ends the user info, as urlsplit reads it
    ("http://:S3cret@host/", f"http://:{H}@host/"),
    ("http://alice:@host/", "http://alice:@host/"),  # an empty password: nothing to hide
    # a user name alone is hidden: tokens are given that way (https://TOKEN@github.com/)
    ("https://ghp_abcdef123456@host/", f"https://{H}@host/"),
    ("http://@host/", "http://@host/"),
    # an @ in the path or the query is not user info
    ("http://host/a@b", "http://host/a@b"),
    ("http://host/?to=a@b", "http://host/?to=a@b"),
    ("http://host/path:with@colon", "http://host/path:with@colon"),
    # query parameters with a credential's name
    ("http://host/?token=abc", f"http://host/?token={H}"),
    ("http://host/?a=1&access_token=abc&b=2", f"http://host/?a=1&access_token={H}&b=2"),
    ("http://host/?API_KEY=abc", f"http://host/?API_KEY={H}"),
    ("http://host/?client_secret=x;page=2", f"http://host/?client_secret={H};page=2"),
    ("http://host/?X-Amz-Signature=abc&X-Amz-Credential=def", f"http://host/?X-Amz-Signature={H}&X-Amz-Credential={H}"),
    ("http://host/?sv=2020&sig=abc%2Bdef", f"http://host/?sv=2020&sig={H}"),  # Azure SAS
    ("http://host/?pass=x&user=bob", f"http://host/?pass={H}&user=bob"),
    ("http://host/?to%6Ben=abc", f"http://host/?to%6Ben={H}"),  # a name percent-encoded is still its name
    ("http://host/?token=", "http://host/?token="),  # no value: nothing to hide
    ("http://host/?token", "http://host/?token"),
    ("http://host/?token=a=b", f"http://host/?token={H}"),
    ("http://host/?page=token", "http://host/?page=token"),  # a value that mentions one is no credential
    ("http://host/#access_token=abc&state=1", f"http://host/#access_token={H}&state=1"),  # OAuth's implicit flow
    # both at once
    ("http://u:p@host/?token=t#id_token=i", f"http://u:{H}@host/?token={H}#id_token={H}"),
    # broken URLs are still redacted (error messages quote them)
    ("http://alice:S3cret@host:99999999/", f"http://alice:{H}@host:99999999/"),
    ("http://alice:S3cret@[::1/", f"http://alice:{H}@[::1/"),
    ("//alice:S3cret@host/", f"//alice:{H}@host/"),
    ("alice:S3cret@host", f"alice:{H}@host"),  # no scheme: still read as user info, to be safe
    ("alice:S3cret@host/a@b", f"alice:{H}@host/a@b"),
    ("mailto:bob@host", f"mailto:{H}@host"),  # not a URL this runner takes; hiding too much costs nothing
    ("", ""),
]


@pytest.mark.parametrize(("given", "shown"), URLS)
def test_url(given: str, shown: str) -> None:
    assert redact.url(given) == shown


@pytest.mark.parametrize(("given", "shown"), URLS)
def test_url_is_idempotent(given: str, shown: str) -> None:
    assert redact.url(shown) == shown


def test_url_secrets_are_written_and_decoded() -> None:
    assert redact.url_secrets("http://alice:p%40ss@host/") == ["p%40ss", "p@ss"]
    assert redact.url_secrets("https://ghp_tok@host/") == ["ghp_tok", "ghp_tok"]
    assert redact.url_secrets("http://h/?token=a+b%21&x=1") == ["a+b%21", "a b!"]
    assert redact.url_secrets("http://h/?x=1") == []
    assert redact.url_secrets("http://alice:@h/") == []
    assert redact.url_secrets("http://u:p@host/?token=t#id_token=i") == ["p", "p", "t", "t", "i", "i"]
    assert redact.url_secrets("http://host/?client_secret=x;page=2") == ["x", "x"]
    assert redact.url_secrets("http://h/a@b?to=a@b") == []
    assert redact.url_secrets("http://alice:S3cret@host:99999999/") == ["S3cret", "S3cret"]


NAMES = [
    # credentials, any case, anywhere in the name
    ("Authorization", True), ("authorization", True), ("Proxy-Authorization", True), ("WWW-Authenticate", True),
    ("Cookie", True), ("Set-Cookie", True), ("X-Api-Key", True), ("X-API-KEY", True), ("apikey", True),
    ("X-Auth-Token", True), ("X-Credential", True), ("X-Goog-Credentials", True), ("X-Hub-Signature-256", True),
    ("X-Amz-Signature", True), ("sig", True), ("Client-Secret", True), ("client_secret", True),
    ("X-Password", True), ("passwd", True), ("pass", True), ("X-Passphrase", True), ("pwd", True),
    ("X-Session-Id", True), ("JSESSIONID", True), ("X-JWT-Assertion", True), ("X-Bearer", True),
    ("X-Private-Key", True), ("X-CSRF-Token", True), ("X-XSRF-TOKEN", True), ("access_token", True),
    # everything else is shown
    ("X-Trace", False), ("Accept", False), ("Content-Type", False), ("User-Agent", False), ("Host", False),
    ("X-Request-Id", False), ("X-Tenant", False), ("page", False), ("user", False), ("Keep-Alive", False),
]


@pytest.mark.parametrize(("name", "secret"), NAMES)
def test_secret_names(name: str, secret: bool) -> None:
    assert redact.is_secret_name(name) is secret
    assert (redact.header_value(name, "v4lue") == H) is secret
    assert (redact.url(f"http://h/?{name}=v4lue") == f"http://h/?{name}={H}") is secret


@pytest.mark.parametrize("value", ["Bearer abc", "bearer abc", "Basic YWxpY2U6eA==", "Digest username=x",
                                   "Token t0k", "Negotiate YII"])
def test_a_value_that_is_a_credential_is_hidden_whatever_the_header(value: str) -> None:
    assert redact.header_value("X-Forwarded-Whatever", value) == H


@pytest.mark.parametrize("value", ["text/plain", "bearerless", "Basically fine", "sre"])
def test_other_values_of_other_headers_are_shown(value: str) -> None:
    assert redact.header_value("X-Team", value) == value


def test_headers_keep_from_env_references() -> None:
    spec = {"Authorization": "Bearer x", "X-Team": "sre", "X-Token": {"fromEnv": "TOKEN"}, "X-Sig": "abc"}
    assert redact.headers(spec) == {"Authorization": H, "X-Team": "sre", "X-Token": {"fromEnv": "TOKEN"},
                                    "X-Sig": H}


BODIES = [
    ("", ""),
    ('{"a": 1}', '{"a": 1}'),
    ("x" * 200, "x" * 200),
    ("x" * 201, "<201 bytes>"),
    ("é" * 101, "<202 bytes>"),  # the size in bytes, as sent
    ("client_secret=abc&grant_type=client_credentials", "<47 bytes>"),
    ('{"password": "hunter2"}', "<23 bytes>"),
    ("TOKEN=abc", "<9 bytes>"),
    ("session=1", "<9 bytes>"),
]


@pytest.mark.parametrize(("given", "shown"), BODIES)
def test_body(given: str, shown: str) -> None:
    assert redact.body(given) == shown


BODY_SECRETS = [
    ('{"a": 1}', []),
    ("x" * 300, []),  # long but nothing secret: shown as its size, not searched for
    ("client_secret=abc&grant_type=x", ["client_secret=abc&grant_type=x", "abc", "abc"]),
    ("user=bob&pass=p%40ss+w", ["user=bob&pass=p%40ss+w", "p%40ss+w", "p@ss w"]),
    ('{"user": "bob", "password": "hunter2", "n": {"apiKey": ["k1", 42, true]}}',
     ['{"user": "bob", "password": "hunter2", "n": {"apiKey": ["k1", 42, true]}}', "hunter2", "k1", "42"]),
    ("[" * 100_000 + "token", []),  # too deep to parse, too long to search for whole
]


@pytest.mark.parametrize(("given", "values"), BODY_SECRETS)
def test_body_secrets(given: str, values: list[str]) -> None:
    assert redact.body_secrets(given) == values


PRINTABLE = [
    ("plain text", "plain text"),
    ("", ""),
    ("\x1b[2J\x1b[Hgotcha", "\\x1b[2J\\x1b[Hgotcha"),
    ("a\nb\r\nc\td", "a\\nb\\r\\nc\\td"),
    ("\x00\x07\x7f", "\\x00\\x07\\x7f"),
    ("\x9b31m", "\\x9b31m"),  # C1 CSI: a terminal escape on its own
    ("abc\u202edcba", "abc\\u202edcba"),  # a bidi override (Trojan Source)
    ("\u2028", "\\u2028"),
    ("bad \udcff byte", "bad \\udcff byte"),  # a byte that did not decode, as surrogateescape keeps it
    ("é ü 日本 ✓", "é ü 日本 ✓"),  # printable beyond ASCII stays as it is
    ("\\x1b already escaped", "\\x1b already escaped"),
    ("\U000e0001", "\\U000e0001"),
]


@pytest.mark.parametrize(("given", "shown"), PRINTABLE)
def test_printable(given: str, shown: str) -> None:
    assert redact.printable(given) == shown
    assert redact.printable(shown) == shown  # escaping twice changes nothing


def test_every_non_printable_character_is_escaped() -> None:
    """Over the whole of Unicode's first plane: what printable() gives back is printable."""
    text = "".join(chr(c) for c in range(0x10000))
    assert redact.printable(text).isprintable()


def test_basic_credentials_are_of_the_decoded_user_info() -> None:
    def decoded(userinfo: str) -> bytes:
        value = redact.basic_credentials(userinfo)
        assert value.startswith("Basic ")
        return base64.b64decode(value[len("Basic "):])

    assert decoded("alice:S3cret") == b"alice:S3cret"
    assert decoded("al%40ice:p%3Ass%2Fw") == b"al@ice:p:ss/w"
    assert decoded("alice") == b"alice:"  # no password: an empty one, as curl and httpx send it
    assert decoded("alice:") == b"alice:"
    assert decoded(":pw") == b":pw"
    assert decoded("a:b:c") == b"a:b:c"
    assert decoded("%C3%A9:%E2%9C%93") == "é:✓".encode()  # UTF-8, as RFC 7617 says


SECRET_TEXTS = [
    ("invalid token S3cretT0ken", "invalid token <hidden>"),
    ("S3cretT0ken", "<hidden>"),
    ("no secret here", "no secret here"),
    ("S3cretT0kenS3cretT0ken", "<hidden><hidden>"),
    ("prefix-S3cret-longer-suffix", "prefix-<hidden>-suffix"),  # the longer secret hidden whole
    ("S3cret", "<hidden>"),
    ("abc 123", "abc 123"),  # shorter than MIN_SECRET_CHARS: not searched for
    ("a.b*c", "<hidden>"),  # taken literally, not as a pattern
    ("a-b-c", "a-b-c"),
    ("\x1bS3cret", "\\x1b<hidden>"),
]


@pytest.mark.parametrize(("given", "shown"), SECRET_TEXTS)
def test_secrets_are_hidden_by_value(given: str, shown: str) -> None:
    secrets = Secrets(["S3cretT0ken", "S3cret", "S3cret-longer", "abc", "", "a.b*c"])
    assert secrets.shown(given) == shown
    assert secrets.shown(given) == shown  # from the cache, the same


def test_no_secrets_still_escapes() -> None:
    secrets = Secrets()
    assert secrets.hidden("a\x1bb") == "a\x1bb"
    assert secrets.shown("a\x1bb") == "a\\x1bb"


def test_the_cache_stays_bounded() -> None:
    secrets = Secrets(["S3cret"])
    for k in range(10_000):
        assert secrets.shown(f"S3cret {k}") == f"{H} {k}"
    assert len(secrets._cache) <= 4096


# --- free text: lines that quote the user's words (usage errors, tracebacks) -----------------------

IN_TEXT = [
    # argparse quotes the words it could not use, as they were given
    ("unrecognized arguments: -n 5 -c 1 http://alice:S3cretPW@127.0.0.1:1/ (see soak --help)",
     f"unrecognized arguments: -n 5 -c 1 http://alice:{H}@127.0.0.1:1/ (see soak --help)"),
    # the schema quotes a refused value in JSON's quotes, argparse in repr's
    ('--qps: "http://alice:S3cretPW@h/" is not allowed; must be a number',
     f'--qps: "http://alice:{H}@h/" is not allowed; must be a number'),
    ("invalid int value: 'https://tok3n@h/?access_token=abcd&page=2'",
     f"invalid int value: 'https://{H}@h/?access_token={H}&page=2'"),
    ("GET <http://u:p@h/>", f"GET <http://u:{H}@h/>"),
    ("user:pw@host:9091 without a scheme", f"user:{H}@host:9091 without a scheme"),
    # nothing to hide: as written, whatever it holds
    ("# threshold run goal% >= 99: 100% ok", "# threshold run goal% >= 99: 100% ok"),
    ("2026-11-30T18:49:36Z    0    100/0/0 100 100% 1s   0 [  0   2   4    4 ]    4      0 +",
     "2026-11-30T18:49:36Z    0    100/0/0 100 100% 1s   0 [  0   2   4    4 ]    4      0 +"),
    ("    @functools.cache", "    @functools.cache"),
    ("soak: @urls.txt: no such file", "soak: @urls.txt: no such file"),
    ("[--body TEXT|@FILE] [--host TEXT]", "[--body TEXT|@FILE] [--host TEXT]"),  # the help's usage line
    ("mail alice@example.com", "mail alice@example.com"),
    ("(http://a:pw@h/)", f"(http://a:{H}@h/)"),
    ("--pushgateway=http://u:pw@pg:9091", f"--pushgateway=http://u:{H}@pg:9091"),
    ("http://h/?page=2&size=10", "http://h/?page=2&size=10"),
    (f"http://alice:{H}@h/", f"http://alice:{H}@h/"),  # shown twice, the same
    ("", ""),
]


@pytest.mark.parametrize(("given", "shown"), IN_TEXT)
def test_urls_in_a_line_are_shown_as_urls_are(given: str, shown: str) -> None:
    assert redact.in_text(given) == shown
    assert redact.in_text(shown) == shown


ARGV = [
    (["--transport", "httpx", "bench", "http://alice:S3cretPW@127.0.0.1:1/"], ["S3cretPW"]),
    (["--pushgateway=http://u:pushPW42@pg:9091"], ["pushPW42"]),
    (["https://tok3nvalue@h/?access_token=zzzz1234"], ["tok3nvalue", "zzzz1234"]),
    (["-H", "Authorization: Bearer abcdef123"], ["Bearer abcdef123", "abcdef123"]),
    (["-H", "Authorization Bearer abcdef123"], ["abcdef123"]),  # no colon: still a credential after its scheme
    (["--header=X-Api-Key: k3yvalue"], ["k3yvalue"]),
    (["--hedaer", "X-Auth-Token: t0kenvalue"], ["t0kenvalue"]),  # a mistyped flag's value too
    (["--body", "client_secret=b0dyvalue&x=1"], ["client_secret=b0dyvalue&x=1", "b0dyvalue"]),
    (["--data=password=hunter22"], ["password=hunter22", "hunter22"]),
    # nothing secret: no value to hide
    (["--qps", "100", "--thresholds", "p99 < 50ms", "-H", "X-Team: sre", "http://h/?page=2"], []),
    (["--body", "@/etc/soak/secret-body.json", "--clientKey", "/etc/tls/key.pem"], []),
]


@pytest.mark.parametrize(("argv", "values"), ARGV)
def test_the_secret_values_of_a_command_line(argv: list[str], values: list[str]) -> None:
    found = redact.argv_secrets(argv)
    assert set(values) <= set(found)
    assert found or not values
    assert values or not found
