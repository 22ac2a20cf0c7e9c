"""How a failed send is named: an error kind and a short text, from the exception raised.

Both transports meet the same operating-system failures (a name that does not resolve, a
refused or reset connection, a TLS failure); they are named here once, so a run reads the
same whichever transport made it. Texts are short and bounded, because errors are counted
per distinct text and printed once per interval.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator

from runner import result as kinds

MESSAGE_CHARS = 160


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


def os_failure(chain: list[BaseException]) -> tuple[str, str] | None:
    """The kind and text of a failure the OS or TLS reported anywhere in the chain, if one did."""
    if _has(chain, socket.gaierror):
        return kinds.DNS, f"dns: {message(chain)}"
    if _has(chain, ConnectionRefusedError):
        return kinds.REFUSED, "connection refused"
    if _has(chain, ssl.SSLError):
        return kinds.TLS, f"tls: {message(chain)}"
    if _has(chain, ConnectionResetError):
        return kinds.RESET, "connection reset by peer"
    return None


def _has(chain: list[BaseException], kind: type[BaseException]) -> bool:
    return any(isinstance(e, kind) for e in chain)
