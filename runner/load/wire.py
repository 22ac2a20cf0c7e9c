"""A request's bytes on the wire, and the name of a failure to connect: what the native engine's
Python side hands its C engine, kept apart from any transport.

The native engine (runner/load/native) writes exactly these bytes for each send, and fails a
new connection whose name lookup failed with classify_connect_error's kind and text, so that a
run reads the same whichever engine sent it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from runner import __version__
from runner.load.failures import causes, message, os_failure
from runner.load.request import Request, origin
from runner.load.result import ErrorKind

USER_AGENT = f"soak/{__version__}"


def wire_request(request: Request, keep_alive: bool, compress: bool) -> tuple[bytes, str, int, bool]:
    """The request's bytes on the wire, and where it goes: (bytes, host, port, https).

    Built once per target and reused for every send: a soak sends the same request over and
    over, so there is nothing to format per request.
    """
    url = urlsplit(request.url)
    scheme, host, port = origin(request.url)
    https = scheme == "https"
    target = (url.path or "/") + (f"?{url.query}" if url.query else "")
    names = {name.lower() for name, _ in request.headers}
    default_port = port == (443 if https else 80)
    host_header = host if ":" not in host else f"[{host}]"
    lines = [f"{request.method} {target} HTTP/1.1"]
    if "host" not in names:
        lines.append(f"Host: {host_header}" + ("" if default_port else f":{port}"))
    if "user-agent" not in names:
        lines.append(f"User-Agent: {USER_AGENT}")
    if "accept" not in names:
        lines.append("Accept: */*")
    if compress and "accept-encoding" not in names:
        lines.append("Accept-Encoding: gzip")
    if not keep_alive:
        lines.append("Connection: close")
    lines += [f"{name}: {value}" for name, value in request.headers]
    if request.body or request.method in ("POST", "PUT", "PATCH"):
        if "content-length" not in names:
            lines.append(f"Content-Length: {len(request.body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + request.body, host, port, https


def classify_connect_error(exc: OSError) -> tuple[ErrorKind, str]:
    """The error kind and text for a failure to connect."""
    chain = causes(exc)
    return os_failure(chain) or (ErrorKind.CONNECT, f"connect: {message(chain)}")
