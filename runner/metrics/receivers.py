"""Where the metrics are written: a Prometheus remote write receiver, an OTLP/HTTP receiver.

Each is an Exporter (runner.metrics.export: its thread, its backlog, what an answer means) with
its encoding and its request. This module loads only for a run that writes (remoteWrite, otlp),
and each receiver's library only for its own: cramjam (snappy) for remote write, protobuf and
opentelemetry-proto for OTLP.

Every series written carries job (pushgatewayJob), pod_index (as the Pushgateway's grouping key
has it) and run: the run's start, in UTC to the second (2026-12-01T10:00:00Z), the same in every
shard of a run (they start at the instant they agree on), so that each run's counters are series
of their own, cumulative from 0, as k6 labels a test run's series with its test id.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit, urlunsplit

from runner import __version__
from runner.config.settings import MetricsSpec
from runner.metrics import remotewrite
from runner.metrics.export import Answer, Exporter, Frame, Moment, Receiver, post
from runner.metrics.push import pod_index
from runner.stats.runinfo import RunInfo

USER_AGENT = f"soak/{__version__}"


def receivers_for(spec: MetricsSpec, err: TextIO) -> list[Receiver]:
    """The receivers the settings name."""
    found: list[Receiver] = []
    if spec.remote_write:
        found.append(RemoteWrite(spec, err))
    if spec.otlp:
        found.append(Otlp(spec, err))
    return found


def run_label(info: RunInfo) -> str:
    """The run label's value: the run's start, UTC, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(info.wall_start))


class _Written:
    """A receiver on an Exporter: the labels every series carries are known once the run starts."""

    name = ""

    def __init__(self, url: str, err: TextIO) -> None:
        self.job = ""
        self.labels: tuple[tuple[str, str], ...] = ()
        self.start_s = 0.0
        self.exporter: Exporter[Moment] = Exporter(self.name, url, self.encode, self.send, err)

    def start(self, info: RunInfo) -> None:
        self.labels = (("job", self.job), ("pod_index", pod_index(info.shard)), ("run", run_label(info)))
        self.start_s = info.wall_start

    def write_soon(self, snapshot: Moment) -> int:
        return self.exporter.write_soon(snapshot)

    def write_final(self, snapshot: Moment) -> int:
        return self.exporter.write_final(snapshot)

    def wait(self, ask: int, timeout_s: float) -> bool:
        return self.exporter.wait(ask, timeout_s)

    def close(self, timeout_s: float) -> None:
        self.exporter.close(timeout_s)

    def encode(self, snapshot: Moment) -> Frame:
        raise NotImplementedError

    def send(self, body: bytes) -> Answer:
        raise NotImplementedError


class RemoteWrite(_Written):
    """Prometheus remote write 1.0: snappy-compressed protobuf WriteRequests (runner.metrics.remotewrite)."""

    name = "remoteWrite"

    def __init__(self, spec: MetricsSpec, err: TextIO) -> None:
        import cramjam  # snappy's block format, as remote write asks; loaded for a run that writes only

        self._compress = cramjam.snappy.compress_raw
        self._url = spec.remote_write
        self._headers = dict(spec.remote_write_headers)
        self._token_file = spec.remote_write_token_file
        super().__init__(spec.remote_write, err)
        self.job = spec.job

    def encode(self, snapshot: Moment) -> Frame:
        """Every series of the snapshot, then its native histograms apart (Frame)."""
        at_ms = round(snapshot.at_s * 1000)
        labels = self.labels
        floats = [remotewrite.sample_series((("__name__", sample.name), *sample.labels.items(), *labels), sample.value,
                                            at_ms)
                  for family in snapshot.families() for sample in family.samples]
        native = snapshot.native_histograms() if self.exporter.native else []  # not for a receiver that refuses them
        histograms = [remotewrite.histogram_series((("__name__", family.name), *series_labels.items(), *labels),
                                                   histogram, at_ms)
                      for family in native for series_labels, histogram in family.series]
        return Frame(remotewrite.write_request(floats), remotewrite.write_request(histograms), len(histograms))

    def send(self, body: bytes) -> Answer:
        headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy",
                   "X-Prometheus-Remote-Write-Version": "0.1.0", "User-Agent": USER_AGENT, **self._headers}
        if self._token_file:
            try:  # read before every write: a rotated token is the current one
                token = Path(self._token_file).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeError) as e:
                why = getattr(e, "strerror", None) or str(e)
                return Answer(0, f"remoteWriteBearerTokenFile: {self._token_file}: cannot read it: {why}")
            headers["Authorization"] = f"Bearer {token}"
        return post(self._url, bytes(self._compress(body)), headers)


def otlp_url(url: str) -> str:
    """An OTLP/HTTP metrics URL: as given, or with /v1/metrics when it has no path (a collector's address)."""
    parts = urlsplit(url)
    if parts.path in ("", "/"):
        return urlunsplit(parts._replace(path="/v1/metrics"))
    return url


class Otlp(_Written):
    """OTLP/HTTP metrics: protobuf ExportMetricsServiceRequests (runner.metrics.otlp)."""

    name = "otlp"

    def __init__(self, spec: MetricsSpec, err: TextIO) -> None:
        from runner.metrics import otlp  # protobuf and opentelemetry-proto, for a run that sends OTLP only

        self._otlp = otlp
        self._url = otlp_url(spec.otlp)
        self._headers = dict(spec.otlp_headers)
        super().__init__(spec.otlp, err)
        self.job = spec.job

    def encode(self, snapshot: Moment) -> Frame:
        return Frame(self._otlp.request(snapshot, dict(self.labels), self.start_s))

    def send(self, body: bytes) -> Answer:
        headers = {"Content-Type": "application/x-protobuf", "User-Agent": USER_AGENT, **self._headers}
        answer = post(self._url, body, headers, said=self._otlp.status_message)
        rejected = self._otlp.rejected(answer)
        if rejected:
            self.exporter.tell_once("partial", rejected)
        return answer
