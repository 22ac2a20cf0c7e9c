"""Where each response's time went: its phases, one histogram each, per interval and per run.

A response's time splits as k6 and curl split it (http_req_connecting, tls_handshaking, waiting,
receiving; curl's time_namelookup ...): dns (the name lookup), connect (TCP), tls (the
handshake), ttfb (request written to the response headers: the server's wait) and body
(headers to the last byte). A request on a reused connection has dns = connect = tls = 0, as
ab and k6 count it; a numeric host, or the native engine (whose names Python looks up between
intervals), has dns 0; plain HTTP has tls 0. The request's own writing (ready to written) is in
no phase: the phases add up to the latency (send to headers) less that, and to the whole
request (send to last byte) less that.

As BenchTally does for ab's phases, a request on a reused connection records two values (its
ttfb and body) and a count; histograms() adds the zeros. Only responses are timed: a failed
send has no headers to end its ttfb.
"""

from __future__ import annotations

from dataclasses import field

from runner.core.lazymethods import dataclass
from runner.core.measures import PHASES
from runner.load.result import Result
from runner.stats.histogram import LatencyHistogram

__all__ = ["PHASES", "PhaseTally", "waiting_ns"]


def waiting_ns(result: Result) -> int:
    """The request written to the response headers: ttfb here, ab's "Waiting" in a bench."""
    return result.headers_ns - (result.written_ns or result.start_ns)


@dataclass
class PhaseTally:
    """The phase histograms of one span of a run (an interval, or the whole run)."""

    dns_new: LatencyHistogram = field(default_factory=LatencyHistogram)  # requests that opened a connection
    connect_new: LatencyHistogram = field(default_factory=LatencyHistogram)
    tls_new: LatencyHistogram = field(default_factory=LatencyHistogram)
    ttfb: LatencyHistogram = field(default_factory=LatencyHistogram)  # every response
    body: LatencyHistogram = field(default_factory=LatencyHistogram)
    reused: int = 0  # responses on a reused connection: dns, connect and tls 0

    def add(self, result: Result) -> None:
        """Time one response's phases (never a failure's)."""
        connected = result.connected_ns
        if connected:
            start = result.start_ns
            resolved = result.resolved_ns or start
            tcp = result.tcp_ns or connected
            self.dns_new.record(resolved - start)
            self.connect_new.record(tcp - resolved)
            self.tls_new.record(connected - tcp)
        else:
            self.reused += 1
        headers = result.headers_ns
        self.ttfb.record(headers - (result.written_ns or result.start_ns))
        self.body.record(result.end_ns - headers)

    def merge(self, other: PhaseTally) -> None:
        """Add another span's phases to this one."""
        for mine, theirs in zip(self._parts(), other._parts(), strict=True):
            mine.add(theirs)
        self.reused += other.reused

    def _parts(self) -> tuple[LatencyHistogram, ...]:
        return self.dns_new, self.connect_new, self.tls_new, self.ttfb, self.body

    @property
    def count(self) -> int:
        """Responses timed."""
        return self.ttfb.count

    def histograms(self) -> dict[str, LatencyHistogram]:
        """Each phase's histogram by name (PHASES' order), a reused connection's zeros added."""
        found = {}
        for name, new in (("dns", self.dns_new), ("connect", self.connect_new), ("tls", self.tls_new)):
            whole = LatencyHistogram.merged(new)
            whole.record(0, self.reused)
            found[name] = whole
        return found | {"ttfb": self.ttfb, "body": self.body}
