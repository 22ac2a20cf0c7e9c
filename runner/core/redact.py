"""What of a run may be shown: URLs, headers, bodies and servers' texts, as printed or exported.

A soak's output lives on in `kubectl logs`, in saved summaries, on a Pushgateway and in
Prometheus: anything printed there is as good as published. Every place that prints or
exports a URL, a header, a body or a text that came from a server goes through here, so
there is one rule for what is hidden, and it is tested in one place (tests/unit/test_redact.py).

Hidden, as `<hidden>`:
- a URL's password (`http://alice:<hidden>@host/`), or its user name when it has no password
  (tokens are often given that way: `https://<hidden>@host/`);
- the values of query parameters and headers whose names contain a word of SECRET_WORDS,
  matched case-insensitively anywhere in the name (`X-Hub-Signature-256`, `?access_token=`),
  and a literal header value that starts with an auth scheme (`Bearer ...`);
- a literal body that contains one of those words, or is long: shown as its size;
- by value: every secret value the run sends (see Secrets), wherever it turns up in a text.

Texts from servers are also made printable: a control character is written as an escape
(`\\x1b`), so a server cannot move a terminal's cursor or clear its screen through our logs.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, unquote_plus, unquote_to_bytes

HIDDEN = "<hidden>"

# A header or query parameter whose name contains one of these (any case) carries a credential:
# Authorization, Proxy-Authorization, Cookie, X-Api-Key, X-Auth-Token, X-Credential,
# X-Hub-Signature-256, X-Amz-Signature and Azure's sig, client_secret, access_token, id_token,
# X-CSRF-Token, a session id, a password (pass covers passwd, password and passphrase), a JWT,
# a private key. Some harmless names match too (X-Design: sig); hiding those costs nothing.
SECRET_WORDS = ("auth", "bearer", "cookie", "credential", "csrf", "jwt", "key", "pass", "private", "pwd",
                "secret", "session", "sig", "token", "xsrf")

# A literal header value that is itself a credential, whatever the header is called.
_AUTH_SCHEME = re.compile(r"(?i)(basic|bearer|digest|negotiate|token)\s")

SHOWN_BODY_BYTES = 200  # a longer literal body is shown as its size: the summary is read in logs

# Secret values shorter than this are not searched for in texts: "1" or "yes" would hide
# every digit or word, and a value that short protects nothing.
MIN_SECRET_CHARS = 4

_AUTHORITY = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:)?//")
_PARAM_SEPARATORS = re.compile(r"([&;])")
_WHOLE_BODY_CHARS = 4096  # a body up to this size is itself a secret value to search texts for
_CACHED_TEXTS = 4096  # Secrets.shown() remembers this many texts: failures repeat the same few


def is_secret_name(name: str) -> bool:
    """Whether a header or query parameter of this name carries a credential."""
    lower = name.lower()
    return any(word in lower for word in SECRET_WORDS)


def url(text: str) -> str:
    """The URL as it may be shown: its password (or lone user name) and secret query values hidden.

    Works on the text as written (nothing is re-encoded, so the rest reads as the user wrote
    it) and never fails, even on a URL too broken to parse: an error message may quote one.
    """
    if "@" not in text and "?" not in text and "#" not in text:
        return text  # most URLs: nothing to hide, and no work for a list of 100,000
    rest, hash_mark, fragment = text.partition("#")
    rest, question_mark, query = rest.partition("?")
    start = _authority_start(rest)
    end = rest.find("/", start)
    end = len(rest) if end == -1 else end
    userinfo, at, hostport = rest[start:end].rpartition("@")
    if at:
        rest = rest[:start] + _userinfo(userinfo) + at + hostport + rest[end:]
    return rest + question_mark + _params(query) + hash_mark + _params(fragment)


def _authority_start(text: str) -> int:
    """Where the user info would start: after `scheme://`, or at the start of a URL written
    without one (`user:pass@host:9091`, a typo an error message still quotes)."""
    authority = _AUTHORITY.match(text)
    return authority.end() if authority is not None else 0


def _userinfo(userinfo: str) -> str:
    user, colon, password = userinfo.partition(":")
    if colon:
        return f"{user}:{HIDDEN}" if password else userinfo
    return HIDDEN if user else userinfo


def _params(text: str) -> str:
    """`a=1&token=x` as `a=1&token=<hidden>`; separators and encoding kept as written."""
    if "=" not in text:
        return text
    pieces = _PARAM_SEPARATORS.split(text)
    for k in range(0, len(pieces), 2):  # the even places hold parameters, the odd ones separators
        secret = _secret_param(pieces[k])
        if secret is not None:
            pieces[k] = f"{secret[0]}={HIDDEN}"
    return "".join(pieces)


def _secret_param(piece: str) -> tuple[str, str] | None:
    """(name, value) of a `name=value` query or form parameter whose value is a credential, else None."""
    name, equals, value = piece.partition("=")
    return (name, value) if equals and value and is_secret_name(unquote_plus(name)) else None


def _param_secrets(text: str) -> list[str]:
    """The secret values of a query or form string, as written and decoded."""
    found: list[str] = []
    for piece in _PARAM_SEPARATORS.split(text)[::2]:
        secret = _secret_param(piece)
        if secret is not None:
            found += [secret[1], unquote_plus(secret[1])]
    return found


# A word of a free-text line that url() looks at: quotes and angle brackets around a URL are not
# part of it (`"http://a:b@h/"`, `'...'` in repr, `<hidden>`).
_WORD = re.compile(r"[^\s\"'`<>]+")


def in_text(text: str) -> str:
    """A line as it may be shown: every URL in it with its password and secret query values hidden.

    For what quotes the user's words back (a usage error's `unrecognized arguments: ...`, a value
    the schema refuses, a traceback): one pass over every line written, so nothing quotes a URL
    unredacted wherever it came from. A secret needs an `@` or an `=`, so a line without either
    costs a scan for two characters.
    """
    if "@" not in text and "=" not in text:
        return text
    return _WORD.sub(_word_shown, text)


def _word_shown(found: re.Match[str]) -> str:
    """A word as it may be shown: from its URL's scheme on, as url() shows it (`(http://a:b@h/)`), or
    whole when it is written `user:password@host` without one; any other word (`TEXT|@FILE`, an
    e-mail address, `goal%>=99`) as it is."""
    word = found.group()
    scheme = _SCHEME.search(word) if "://" in word else None  # no backtracking through a long base64 word
    if scheme is not None:
        return word[:scheme.start()] + url(word[scheme.start():])
    return url(word) if _BARE_USERINFO.match(word) else word


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_BARE_USERINFO = re.compile(r"[^:@/]+:[^@/]*@")


# The credential after an auth scheme, anywhere in a text: `Bearer abc`, `token: Basic YWxh`.
_SCHEME_CREDENTIAL = re.compile(r"(?i)\b(?:basic|bearer|digest|negotiate|token)\s+(\S+)")
_BODY_FLAGS = ("--body", "--data")


def argv_secrets(words: Iterable[str]) -> list[str]:
    """The secret values in a command line: what a line quoting it (a usage error) must not show.

    A command line that cannot be parsed cannot say which word is what, so each word is looked
    at for what it may hold: a URL's password or secret query values, a `Name: value` header
    whose name is a credential's, the credential after an auth scheme (`Bearer abc`, also in a
    mistyped flag's value), and a body that mentions a credential (after --body or --data).
    """
    found: list[str] = []
    body_next = False
    for word in words:
        flag, equals, value = word.partition("=") if word.startswith("--") else ("", "", word)
        given = value if equals else word
        if (body_next or flag in _BODY_FLAGS) and not given.startswith("@"):  # @FILE names a file: no secret
            found += body_secrets(given)
        body_next = word in _BODY_FLAGS
        found += url_secrets(given) if "@" in given or "?" in given or "#" in given else []
        found += _header_secrets(given)
    return found


def _header_secrets(text: str) -> list[str]:
    """A credential in a `Name: value` header's text, or after an auth scheme anywhere in it."""
    name, colon, value = text.partition(":")
    found = [value.strip()] if colon and value.strip() and is_secret_name(name) else []
    return found + [m.group(1) for m in _SCHEME_CREDENTIAL.finditer(text)]


def header_value(name: str, value: str) -> str:
    """A literal header value as it may be shown."""
    return HIDDEN if is_secret_name(name) or _AUTH_SCHEME.match(value) else value


def headers(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The headers setting as it may be shown: secret literal values hidden; a `{"fromEnv": VAR}`
    is shown as it is, since it names a variable and holds no value."""
    return {name: header_value(name, value) if isinstance(value, str) else value for name, value in spec.items()}


def body(text: str) -> str:
    """A literal body as it may be shown: as its size if it is long or mentions a credential
    (`client_secret=...`, `{"password": ...}`), else as it is."""
    size = len(text.encode("utf-8", "surrogatepass"))
    lower = text.lower()
    if size > SHOWN_BODY_BYTES or any(word in lower for word in SECRET_WORDS):
        return f"<{size} bytes>"
    return text


def printable(text: str) -> str:
    """`text` with every control or invisible formatting character written as an escape.

    For anything a server controls (error texts, the Server header, a Pushgateway's or a
    proxy's answer): ESC, a line break or a bidi override would otherwise reach the terminal or
    split a log line. The escapes are printable, so escaping twice changes nothing.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in "\t\n\r":
        return {"\t": "\\t", "\n": "\\n", "\r": "\\r"}[ch]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def basic_credentials(userinfo: str) -> str:
    """The Authorization value for a URL's `user:password` as written (percent-encoded): Basic,
    of the decoded bytes, as curl, browsers and Go send it. No password is an empty one."""
    user, _, password = userinfo.partition(":")
    raw = unquote_to_bytes(user) + b":" + unquote_to_bytes(password)
    return "Basic " + base64.b64encode(raw).decode("ascii")


def url_secrets(text: str) -> list[str]:
    """The values in a URL that url() hides, as written and decoded: what must never be shown."""
    found: list[str] = []
    netloc = re.split(r"[/?#]", text[_authority_start(text):], maxsplit=1)[0]
    userinfo, at, _ = netloc.rpartition("@")
    user, colon, password = userinfo.partition(":")
    secret = password if colon else user
    if at and secret:
        found += [secret, unquote(secret)]
    rest, _, fragment = text.partition("#")
    return found + _param_secrets(rest.partition("?")[2]) + _param_secrets(fragment)


def body_secrets(text: str) -> list[str]:
    """The values in a literal body that mentions a credential: what must never be shown.

    The body itself (unless it is large), and the values of form fields (`client_secret=...`)
    and of JSON members (`{"password": ...}`) with a credential's name: a server that echoes
    the request, or one field of it, must not print it for us.
    """
    lower = text.lower()
    if not any(word in lower for word in SECRET_WORDS):
        return []
    found = [text] if len(text) <= _WHOLE_BODY_CHARS else []
    found += _param_secrets(text)
    try:
        found += _json_secrets(json.loads(text))
    except (ValueError, RecursionError):
        pass
    return found


def _json_secrets(value: Any, secret: bool = False) -> list[str]:
    """The strings under members with a credential's name, at any depth."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _json_secrets(v, secret or is_secret_name(str(k)))]
    if isinstance(value, list):
        return [s for v in value for s in _json_secrets(v, secret)]
    return [str(value)] if secret and isinstance(value, str | int | float) and not isinstance(value, bool) else []


class Secrets:
    """Values a run sends that must never be printed, and the one way texts are made showable.

    A server may echo a request back in its error ("invalid token abc123"), and a client
    library may quote a URL in an exception: whatever holds one of these values is shown with
    `<hidden>` in its place, before it is counted, so it is never printed, exported or merged.
    """

    def __init__(self, values: Iterable[str] = ()) -> None:
        found = sorted({v for v in values if len(v) >= MIN_SECRET_CHARS}, key=lambda v: (-len(v), v))
        # Longest first: a secret that contains another is hidden whole, not around the shorter one.
        self._pattern = re.compile("|".join(map(re.escape, found))) if found else None
        self._cache: dict[str, str] = {}

    def hidden(self, text: str) -> str:
        """`text` with every secret value in it as `<hidden>`."""
        return text if self._pattern is None else self._pattern.sub(HIDDEN, text)

    def shown(self, text: str) -> str:
        """A server's or a library's text as it may be printed: secret values hidden, control
        characters escaped. Remembered, because the same few failure texts come over and over."""
        done = self._cache.get(text)
        if done is None:
            done = printable(self.hidden(text))
            if len(self._cache) >= _CACHED_TEXTS:
                self._cache.clear()
            self._cache[text] = done
        return done
