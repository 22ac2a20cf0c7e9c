"""Writing the run's metrics to a receiver (remote write, OTLP) from a thread, and what a write's answer means.

A write happens at each interval's close and at the end, with the figures as they were at that
moment and its real timestamp. The loop only hands a snapshot over (Exporter.write_soon); the
thread encodes it into a frame, joins it to the frames not yet written (Backlog) and posts them
all at once, so a receiver that is down, slow or failing never holds up sending, and the points
of a failed write go with the next one, in time order. What the receiver answered decides what
becomes of them (judge): written, refused for good (a 4xx: sending them again would be refused
again), or kept for the next write (a 5xx, a 429, no answer). A receiver that refuses native
histograms (Prometheus 2.x without --enable-feature=native-histograms answers 500 "native
histograms are disabled" and writes nothing) gets the frames again without them; one that says
it wrote fewer than it was sent (X-Prometheus-Remote-Write-Histograms-Written, remote write 2.0's
answer) is told about. Each cause is said once on stderr, never once per interval; nothing here
changes the run's verdict or its exit code.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Generic, Protocol, TextIO, TypeVar

from runner.core import redact
from runner.core.lazymethods import dataclass
from runner.stats.runinfo import RunInfo

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from runner.metrics.native import NativeFamily

WRITE_TIMEOUT_S = 5.0  # one write, connecting included (the final one is waited for as a push is: push.FINAL_WAIT_S)
BACKLOG_BYTES = 8 << 20  # frames kept for the next write, encoded: the oldest go first beyond this
NATIVE_REFUSED = "native histograms are disabled"  # Prometheus 2.x's answer without the feature flag
HISTOGRAMS_WRITTEN = "X-Prometheus-Remote-Write-Histograms-Written"
ANSWER_BYTES = 4096  # of an answer's body, read

S = TypeVar("S")  # what the loop hands over: a snapshot of the figures


class Moment(Protocol):
    """The figures at one moment, as a receiver encodes them (runner.metrics.collector.Snapshot)."""

    @property
    def at_s(self) -> float:
        """Unix time: the samples' timestamp."""

    def families(self) -> list[Metric]: ...

    def native_histograms(self) -> list[NativeFamily]: ...


class Receiver(Protocol):
    """What the metrics reporter asks of a receiver (runner.metrics.receivers)."""

    def start(self, info: RunInfo) -> None: ...

    def write_soon(self, snapshot: Moment) -> int: ...

    def write_final(self, snapshot: Moment) -> int: ...

    def wait(self, ask: int, timeout_s: float) -> bool: ...

    def close(self, timeout_s: float) -> None: ...


@dataclass(frozen=True)
class Frame:
    """One moment's points, encoded: the float series, and the native histograms apart, so that
    they can be left out for a receiver that refuses them."""

    floats: bytes
    histograms: bytes = b""
    histogram_count: int = 0  # native histogram samples in `histograms`


class Backlog:
    """The frames not yet written, oldest first, at most `limit` bytes of them: when a new one would
    go over, the oldest are dropped (and counted), so a receiver down for a whole run costs a
    bounded amount of memory however many intervals it lasts."""

    def __init__(self, limit: int = BACKLOG_BYTES) -> None:
        self.limit = limit
        self._frames: deque[Frame] = deque()
        self.held = 0  # bytes
        self.dropped = 0  # frames dropped for room

    def add(self, frame: Frame) -> None:
        self._frames.append(frame)
        self.held += _size(frame)
        while self.held > self.limit and len(self._frames) > 1:
            self.held -= _size(self._frames.popleft())
            self.dropped += 1

    def __len__(self) -> int:
        return len(self._frames)

    def body(self, histograms: bool = True) -> tuple[bytes, int]:
        """Every frame's points as one message (encoded messages joined are one message holding all
        their elements), and the native histogram samples among them."""
        parts = []
        count = 0
        for frame in self._frames:
            parts.append(frame.floats)
            if histograms:
                parts.append(frame.histograms)
                count += frame.histogram_count
        return b"".join(parts), count

    def clear(self) -> None:
        self._frames.clear()
        self.held = 0


def _size(frame: Frame) -> int:
    return len(frame.floats) + len(frame.histograms)


@dataclass(frozen=True)
class Answer:
    """What a write got back: an HTTP status (0: none at all), the reason, its body's first words, headers."""

    status: int
    reason: str
    said: str = ""
    headers: Mapping[str, str] | None = None
    body: bytes = b""  # the first ANSWER_BYTES of it


class Outcome(Enum):
    WRITTEN = "written"
    REFUSED = "refused"  # for good: these points are dropped
    KEPT = "kept"  # for the next write
    NO_NATIVE = "no native histograms"  # refused because of the native histograms: again without them


def judge(answer: Answer, histograms_sent: int) -> tuple[Outcome, bool]:
    """What becomes of the points of a write, and whether the receiver dropped native histograms it
    was sent while it accepted the rest (it said it wrote fewer). The remote write spec: 2xx is
    written; 4xx but 429 will never be accepted, so the sender drops the points; 429, 5xx and no
    answer may be retried."""
    if histograms_sent and NATIVE_REFUSED in answer.said:
        return Outcome.NO_NATIVE, False
    if 200 <= answer.status < 300:
        written = (answer.headers or {}).get(HISTOGRAMS_WRITTEN)
        dropped = bool(histograms_sent) and written is not None and written.strip().isdigit() and \
            int(written) < histograms_sent
        return Outcome.WRITTEN, dropped
    if 400 <= answer.status < 500 and answer.status != 429:
        return Outcome.REFUSED, False
    return Outcome.KEPT, False


def cause(answer: Answer) -> str:
    """A failed write's cause, the same for every write that fails the same way: what makes a line."""
    return f"HTTP {answer.status}" if answer.status else answer.reason


def describe(answer: Answer) -> str:
    """A failed write's answer in a few words, on one line."""
    if not answer.status:
        return answer.reason
    return f"HTTP {answer.status} {answer.reason}" + (f": {answer.said}" if answer.said else "")


def post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float = WRITE_TIMEOUT_S,
         said: Callable[[bytes, str], str] | None = None) -> Answer:
    """POST `body`; the answer, whatever happens (never an exception). `said(body, content type)`: what
    an answer's body says, for a receiver that answers in more than text (OTLP's protobuf Status)."""
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    words = said or _said
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer = response.read(ANSWER_BYTES)
            return Answer(response.status, response.reason, "", dict(response.headers), answer)
    except urllib.error.HTTPError as e:
        answer = e.read(ANSWER_BYTES) if e.fp is not None else b""
        kind = e.headers.get("Content-Type", "") if e.headers else ""
        return Answer(e.code, str(e.reason), words(answer, kind), dict(e.headers or {}), answer)
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, TimeoutError):
            return Answer(0, f"no answer within {timeout_s:g}s")
        return Answer(0, getattr(reason, "strerror", None) or str(reason))
    except TimeoutError:
        return Answer(0, f"no answer within {timeout_s:g}s")
    except OSError as e:
        return Answer(0, e.strerror or str(e) or type(e).__name__)
    except Exception as e:  # anything at all: a write must never stop the run
        return Answer(0, str(e) or type(e).__name__)


def _said(body: bytes, content_type: str = "") -> str:
    """An answer's body as text: its first words, on one line."""
    return " ".join(body.decode("utf-8", "replace").split())[:200]


class Exporter(Generic[S]):
    """Writes snapshots to one receiver, from its own thread (see the module's docstring).

    `encode` makes a snapshot's frame, `send` posts a body and returns the answer; both run on the
    thread. `name` is the setting (remoteWrite, otlp) that starts each line on stderr.
    """

    def __init__(self, name: str, url: str, encode: Callable[[S], Frame], send: Callable[[bytes], Answer],
                 err: TextIO, *, backlog: Backlog | None = None) -> None:
        self.name = name
        self.url = url
        self._encode = encode
        self._send = send
        self._err = err
        self.backlog = backlog if backlog is not None else Backlog()
        self._cond = threading.Condition()
        self._queue: list[tuple[int, S]] = []
        self._asked = 0
        self._done = 0  # the last ask whose write is over, however it went
        self._final: int | None = None
        self._closing = False
        self.native = True  # whether native histograms are sent (False once the receiver refused them)
        self.said: set[str] = set()  # the causes already told
        self.writes = 0  # writes that were answered 2xx
        self.failed = 0  # writes that were not
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def write_soon(self, snapshot: S, *, final: bool = False) -> int:
        """Queue a snapshot for writing; returns its ask's number."""
        with self._cond:
            self._asked += 1
            self._queue.append((self._asked, snapshot))
            if final:  # known to the thread as it takes the ask
                self._final = self._asked
            self._cond.notify_all()
            return self._asked

    def write_final(self, snapshot: S) -> int:
        """Queue the final snapshot: once its write is over, a failure says that the figures were not written."""
        return self.write_soon(snapshot, final=True)

    def wait(self, ask: int, timeout_s: float) -> bool:
        """Wait (boundedly) until the write of `ask` is over; whether it is."""
        with self._cond:
            return self._cond.wait_for(lambda: self._done >= ask, timeout=max(timeout_s, 0))

    def close(self, timeout_s: float = WRITE_TIMEOUT_S + 1) -> None:
        """Stop once what is queued is written, waiting for that at most `timeout_s` (a daemon thread:
        one still writing to a slow receiver when the process exits holds nothing up)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closing)
                if not self._queue:
                    return  # closing, with nothing left to write
                taken, self._queue = self._queue, []
                final = self._final is not None and taken[-1][0] >= self._final
            for _, snapshot in taken:
                self._add(snapshot)
            self._write(final)
            with self._cond:
                self._done = taken[-1][0]
                self._cond.notify_all()

    def _add(self, snapshot: S) -> None:
        before = self.backlog.dropped
        try:
            self.backlog.add(self._encode(snapshot))
        except Exception as e:  # a bug: told once, and never the run's end
            self.tell_once("encode", f"cannot encode the figures: {e!r}")
        if self.backlog.dropped > before:
            limit = self.backlog.limit
            size = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
            self.tell_once("backlog", f"more than {size} of points not yet written: the oldest are dropped")

    def _write(self, final: bool) -> None:
        if not len(self.backlog):
            return
        body, histograms = self.backlog.body(self.native)
        answer = self._send(body)
        outcome, dropped = judge(answer, histograms)
        if outcome is Outcome.NO_NATIVE:
            self.native = False
            self.tell_once("native", f"the receiver refuses native histograms ({describe(answer)}): from now on the "
                                 f"latency goes as classic histograms only (Prometheus: --enable-feature="
                                 f"native-histograms)")
            body, _ = self.backlog.body(histograms=False)
            answer = self._send(body)
            outcome, _ = judge(answer, 0)
        if dropped:
            written = (answer.headers or {}).get(HISTOGRAMS_WRITTEN)
            self.tell_once("dropped", f"the receiver wrote {written} of the {histograms} native histogram samples it "
                                      f"was sent: it drops native histograms (enable them on the receiver)")
        if outcome is Outcome.WRITTEN:
            self.writes += 1
            self.backlog.clear()
            return
        self.failed += 1
        if outcome is Outcome.REFUSED:
            self.backlog.clear()
            self.tell_once(cause(answer), f"{describe(answer)}; these points are dropped (the receiver refuses them)")
        elif not final:
            self.tell_once(cause(answer), f"{describe(answer)}; the points are kept and go with the next write")
        if final:
            self._say(f"{describe(answer)}; the final figures were not written")

    def tell_once(self, key: str, text: str) -> None:
        if key not in self.said:
            self.said.add(key)
            self._say(text)

    def _say(self, text: str) -> None:
        self._err.write(f"soak: {self.name} {redact.url(self.url)}: {redact.printable(text)}\n")
        self._err.flush()
