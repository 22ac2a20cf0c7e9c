"""The request sent to each URL: built once per URL, before the run, and reused for every send.

Headers and body are resolved here, once: values taken from the environment, a body read
from its file, and a URL's user name and password turned into its Authorization header, so
that both transports send exactly the same bytes and nothing about a request is worked out
per send.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any
from urllib.parse import urlsplit

from runner.config.files import BODY_LIMIT, read_bounded
from runner.config.settings import Settings
from runner.core import redact
from runner.core.errors import UsageError
from runner.core.lazymethods import dataclass

# What a header value may hold (RFC 7230 field-vchar without obs-text, spaces, tabs); the same
# set as schema.json's pattern for a literal value, applied here to values read from the environment.
HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")


@dataclass(frozen=True)
class Request:
    """One fully resolved request: what goes on the wire for one URL, every time."""

    method: str
    url: str  # without user info: its credentials are in an Authorization header
    headers: tuple[tuple[str, str], ...]
    body: bytes
    # The secret values it carries, which must never be printed (see redact.Secrets): not
    # part of what the request is, and never in its repr.
    hidden: tuple[str, ...] = field(default=(), compare=False, repr=False)


def origin(url: str) -> tuple[str, str, int]:
    """Where a URL's requests go: (scheme, host, port), the port filled in from the scheme.

    A keep-alive connection serves one origin only; a client whose URLs name several keeps
    a connection to each.
    """
    parts = urlsplit(url)
    https = parts.scheme == "https"
    return parts.scheme, parts.hostname or "", parts.port or (443 if https else 80)


def build_requests(settings: Settings, urls: Sequence[str], environ: Mapping[str, str] = os.environ) -> list[Request]:
    """The prepared request for each URL, with headers and body resolved now, once."""
    headers = resolve_headers(settings.request.headers, environ)
    if settings.request.host:
        headers.append(("Host", settings.request.host))
    body = load_body(settings.request.body)
    hidden = header_secrets(settings.request.headers, headers)
    if isinstance(settings.request.body, str):
        hidden += tuple(redact.body_secrets(settings.request.body))
    return [_request(settings.request.method, url, tuple(headers), body, hidden) for url in urls]


def _request(method: str, url: str, headers: tuple[tuple[str, str], ...], body: bytes,
             hidden: tuple[str, ...]) -> Request:
    """One URL's request; a user name and password in the URL become its Authorization header.

    Resolved here, once, so that both engines send exactly the same request: httpx would send
    such credentials as Basic auth and the native engine (the fast transport before it) would
    silently drop them, and a run would then measure 401s (which count as good) without anyone
    noticing.
    """
    if "@" not in url and "?" not in url and "#" not in url:
        return Request(method, url, headers, body, hidden)  # most URLs: nothing to resolve
    hidden += tuple(redact.url_secrets(url))
    netloc = urlsplit(url).netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if not at:
        return Request(method, url, headers, body, hidden)
    if any(name.lower() == "authorization" for name, _ in headers):
        raise UsageError(f"{redact.url(url)}: a user name and password in the URL and an Authorization header "
                         "both give credentials; give them one way")
    credentials = redact.basic_credentials(userinfo)
    hidden += (credentials, credentials.split(" ", 1)[1])
    bare = url.replace(f"//{netloc}", f"//{hostport}", 1)
    return Request(method, bare, (*headers, ("Authorization", credentials)), body, hidden)


def header_secrets(spec: dict[str, Any], resolved: list[tuple[str, str]]) -> tuple[str, ...]:
    """The header values that must never be printed: every one from the environment (the
    reason to take a value from there is that it is secret), and the literal ones redaction hides."""
    return tuple(value for (name, value), given in zip(resolved, spec.values(), strict=False)
                 if isinstance(given, dict) or redact.header_value(name, value) == redact.HIDDEN)


def resolve_headers(spec: dict[str, Any], environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """Header values, taking `{"fromEnv": VAR}` ones from the environment.

    Surrounding whitespace is dropped, as HTTP does: a Secret made with
    `kubectl create secret --from-file` usually ends in a newline. A line break inside
    the value, or a character beyond visible ASCII, is refused up front, naming the variable
    and never the value, because the HTTP client would otherwise fail every request (with
    the value in its error text) or crash. Literal values the schema has checked already.
    """
    resolved = []
    for name, value in spec.items():
        if isinstance(value, dict):
            var = value["fromEnv"]
            value = environ.get(var, "").strip()
            if not value:
                raise UsageError(f"headers.{name}: environment variable {var} is not set or empty")
            if "\r" in value or "\n" in value:
                raise UsageError(f"headers.{name}: environment variable {var} holds a line break inside its value")
            if not HEADER_VALUE.fullmatch(value):
                raise UsageError(f"headers.{name}: environment variable {var} must hold ASCII text "
                                 "(visible characters, spaces and tabs)")
        resolved.append((name, value))
    return resolved


def load_body(spec: str | dict[str, str]) -> bytes:
    """The request body's bytes: a literal string, or a file's contents."""
    if isinstance(spec, str):
        return spec.encode("utf-8")
    try:
        return read_bounded(spec["file"], BODY_LIMIT, "a body file")
    except UsageError as e:
        raise UsageError(f"body.file: {e}") from None
