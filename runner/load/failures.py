"""How a failed send is named: an error kind and a short text, from the exception raised.

Both engines' clients (the native engine's and httpx) meet the same operating-system failures
(a name that does not resolve, a refused or reset connection, a TLS failure); they are named
here once, so a run reads the same whichever engine made it. Texts are short and bounded,
because errors are counted per distinct text and printed once per interval.
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Iterator

from runner.load.result import ErrorKind

MESSAGE_CHARS = 160
_SSL_SOURCE_LINE = re.compile(r" \(_ssl\.c:\d+\)")  # "(_ssl.c:2580)": differs by Python version, says nothing

# The phases of a send, in order. A timeout is always kind `timeout`; its text names the phase
# that ran out of time, because "no response headers" for a DNS lookup that never answered
# sends whoever reads it to the wrong place.
DNS_PHASE = "dns"
CONNECT_PHASE = "connect"
TLS_PHASE = "tls"
HEADERS_PHASE = "headers"  # the request written (or being written), the response head awaited
BODY_PHASE = "body"
_TIMEOUT_TEXTS = {
    DNS_PHASE: "DNS lookup of {target} not answered within {within}",
    CONNECT_PHASE: "connect to {target} not made within {within}",
    TLS_PHASE: "TLS handshake with {target} not finished within {within}",
    HEADERS_PHASE: "no response headers within {within}",
    BODY_PHASE: "no complete body within {within}",
}

# A failed certificate check: these words, then what the check said (tls_message). For a name
# the certificate does not cover, what it says is CPython's own (its _ssl.c), not OpenSSL's.
VERIFY_FAILED = "certificate verify failed: "
_MISMATCH = "{what} mismatch, certificate is not valid for '{host}'."

# Failures of a response that both engines name alike.
SWITCHED_PROTOCOLS = "protocol: the server switched protocols (status 101)"
GZIP_TEXT = "protocol: Content-Encoding gzip, but the body is not gzip"


def timeout_text(phase: str, within: str, target: str = "") -> str:
    """A timeout's text: which phase ran out of time, on what, and the timeout.

    `target` is the host name being looked up (DNS), or the address being connected to
    or shaken hands with (connect, TLS); the later phases need none.
    """
    return "timeout: " + _TIMEOUT_TEXTS[phase].format(target=target, within=within)


def head_too_large(limit: int) -> str:
    """The text of a response head over the limit both engines hold heads to."""
    return f"protocol: response head larger than {_kib(limit)}"


def framing_too_large(limit: int) -> str:
    """The text of a chunk-size line (or trailer) over the same limit: bytes with no body in them."""
    return f"protocol: chunk-size line or trailers larger than {_kib(limit)}"


def _kib(size: int) -> str:
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} bytes"


def causes(exc: BaseException) -> list[BaseException]:
    """The exception, what caused it, and the members of any exception group on the way."""
    return list(_walk(exc))


def _walk(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack.extend(c for c in (current.__cause__, current.__context__) if c is not None)
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)


def message(chain: list[BaseException]) -> str:
    """The most specific non-empty message, shortened: an OS error's strerror, else the first str()."""
    text = next((e.strerror for e in chain if isinstance(e, OSError) and e.strerror), None)
    text = text or next((str(e) for e in chain if str(e)), type(chain[0]).__name__)
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


def os_failure(chain: list[BaseException]) -> tuple[ErrorKind, str] | None:
    """The kind and text of a failure the OS or TLS reported anywhere in the chain, if one did."""
    if _has(chain, socket.gaierror):
        return ErrorKind.DNS, f"dns: {message(chain)}"
    if _has(chain, ConnectionRefusedError):
        return ErrorKind.REFUSED, "connection refused"
    if any(_is_tls_failure(e) for e in chain):
        return ErrorKind.TLS, tls_text(tls_message(chain))
    if _has(chain, ConnectionResetError):
        return ErrorKind.RESET, "connection reset by peer"
    return None


def tls_text(message: str) -> str:
    """A TLS failure's text: its kind, then what went wrong."""
    return f"tls: {message}"


def tls_reason(name: str) -> str:
    """OpenSSL's reason for a failure in a few words: its mnemonic, as Python's ssl names it, in lower case."""
    return name.lower().replace("_", " ")


def tls_texts() -> list[tuple[int, int, str]]:
    """Every OpenSSL (library, reason) code Python's ssl module has a name for, and the text of a
    failure for which it is the reason: the native engine's table (runner/load/native/tls.h), so
    that both engines name a TLS failure alike. Made for https runs only (1,700 codes)."""
    from _ssl import err_codes_to_names  # the table behind SSLError.reason (CPython's own, private)

    prefix = tls_text("")
    return [(lib, reason, prefix + tls_reason(name)) for (lib, reason), name in err_codes_to_names.items()]


def verify_mismatch(host: str, numeric: bool) -> str:
    """What a failed certificate check says of a certificate that does not cover `host` (an IP
    address if `numeric`), in CPython's words (SSLCertVerificationError.verify_message)."""
    return _MISMATCH.format(what="IP address" if numeric else "Hostname", host=host)


def tls_message(chain: list[BaseException]) -> str:
    """A TLS failure in a few words: what the certificate check said, or OpenSSL's reason.

    OpenSSL's own text ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: ...
    (_ssl.c:1006)") carries a source line that would make one failure look like several.
    """
    for e in chain:
        if isinstance(e, ssl.SSLCertVerificationError) and getattr(e, "verify_message", None):
            return f"{VERIFY_FAILED}{e.verify_message}"
    for e in chain:
        reason = getattr(e, "reason", None) if isinstance(e, ssl.SSLError) else None
        if reason:
            return tls_reason(reason)
    return _SSL_SOURCE_LINE.sub("", message(chain))


def _is_tls_failure(e: BaseException) -> bool:
    """An SSLError that says what went wrong in TLS (an alert, a failed check, a bad record).

    SSLWantReadError and its kin carry no reason: they are how a TLS stream reports that
    the connection under it went away, and the chain then says how (a reset, a close).
    """
    return isinstance(e, ssl.SSLError) and bool(getattr(e, "reason", None))


def _has(chain: list[BaseException], kind: type[BaseException]) -> bool:
    return any(isinstance(e, kind) for e in chain)
