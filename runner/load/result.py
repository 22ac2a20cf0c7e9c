"""The one record that flows through the pipeline: what happened to one scheduled send.

Transports fill in timings, status and bytes; the engine adds which send it was and when it
was due; the recorder reads it and lets it go. Times are absolute `time.monotonic_ns()`
readings, so every duration (connect, latency, send lag) is a subtraction, and nothing
about a request is kept once it has been counted.
"""

from __future__ import annotations

from enum import StrEnum

from runner.core.lazymethods import dataclass

# The most characters of a backendHeader's value kept: a pod's name is at most 63 (a DNS
# label), and a server that sends a long value (or a new one per response) costs no more.
BACKEND_CHARS = 64


class ErrorKind(StrEnum):
    """Why a send got no HTTP response. The kinds are few and stable so results can be counted
    by kind; the error text says the rest. Each member is its wire string ("timeout"), which
    the summary, the shard record, the metrics' kind label and the docs use as they always did.
    """

    DNS = "dns"  # the host name did not resolve
    REFUSED = "refused"  # nothing listening: connection refused
    CONNECT = "connect"  # any other failure to connect (unreachable, ...)
    TIMEOUT = "timeout"  # no complete response within the timeout
    RESET = "reset"  # the connection was reset
    CLOSED = "closed"  # the peer closed the connection before the response was complete
    PROTOCOL = "protocol"  # the response was not valid HTTP
    TLS = "tls"  # the TLS handshake or certificate check failed
    CANCELLED = "cancelled"  # still in flight when the run had to stop
    OTHER = "other"  # anything else; the error text names it


@dataclass(slots=True)
class Result:
    """One send made: a response (status > 0) or a failure (error set).

    Classification follows slow_cooker: status 200-499 is good, any other status is bad,
    no response at all is failed. Sends that were due but not made are no Results: the
    engine reports them in runs (schedule.Skips).
    """

    seq: int = -1  # the send's number in the whole run (0, 1, 2, ...)
    url_index: int = 0  # which target URL
    due_ns: int = 0  # when the schedule wanted it sent
    free_ns: int = 0  # closed model: when the client's previous request ended (0 for its first)
    start_ns: int = 0  # when it was actually sent
    resolved_ns: int = 0  # when a new connection's name lookup ended (0: none, a reused connection or a numeric host)
    tcp_ns: int = 0  # when a new connection's TCP connect completed, before any TLS (0 if one was reused)
    connected_ns: int = 0  # when a new connection became ready (0 if one was reused)
    written_ns: int = 0  # when the whole request (head and body) had been written (0 if it never was)
    headers_ns: int = 0  # when the response headers had arrived (0 if none did)
    end_ns: int = 0  # when the body was read to the end, or the send failed
    status: int = 0  # HTTP status, 0 without a response
    bytes_in: int = 0  # response body bytes received
    header_bytes: int = 0  # size of the response head: status line, header lines, blank line
    bytes_out: int = 0  # request body bytes sent
    server: str = ""  # the Server header; transports fill it in only until a session has reported one
    backend: str = ""  # the backendHeader's value, raw (at most BACKEND_CHARS), when the run names one
    connections_closed: int = 0  # the session's connections seen to end during this send (it used or found dead)
    kept_alive: bool = False  # the server left the connection open for another request
    protocol: str = ""  # on a send that opened a connection and got a response: what it speaks, "HTTP/2 TLSv1.3"
    error: ErrorKind | None = None  # why there was no response; None when one arrived
    error_text: str = ""  # the failure in words, for the per-interval error report
    kernel_clock: bool = False  # headers_ns and end_ns are the kernel's receive times, not when the loop read them
    body_hash: int | None = None  # FNV-1a 64 of the body, when it was sampled for checking

    @property
    def good(self) -> bool:
        return is_good(self.status) and not self.error

    @property
    def bad(self) -> bool:
        return not self.error and not is_good(self.status)

    @property
    def failed(self) -> bool:
        return bool(self.error)

    @property
    def latency_ns(self) -> int:
        """From sending to the response headers: slow_cooker's latency (connecting included)."""
        return self.headers_ns - self.start_ns

    @property
    def corrected_latency_ns(self) -> int:
        """From when the send was due to the response headers: no coordinated omission."""
        return self.headers_ns - min(self.due_ns, self.start_ns)

    @property
    def client_lag_ns(self) -> int:
        """How long after it could and should have gone out the send left: the client's own delay.

        A send is due at due_ns, and in the closed model cannot go before its client's previous
        request has ended (free_ns). Waiting for that is the server's doing (and shows in goal%
        and skips); whatever comes on top is the client's: a busy event loop or a starved CPU.
        """
        return self.start_ns - max(self.due_ns, self.free_ns)



def is_good(status: int) -> bool:
    """slow_cooker's classification of a response: 200-499 is good, any other status bad.

    A 4xx is the service answering as designed (a 404, a 401); a 5xx, or a status outside
    any class, is the service failing. Every count of good and bad uses this one rule.
    """
    return 200 <= status < 500
