"""Prometheus remote write 1.0: a WriteRequest of one moment's series, encoded by hand.

The messages are few and small (prometheus/prompb's types.proto and remote.proto: WriteRequest,
TimeSeries, Label, Sample, Histogram, BucketSpan), and protobuf's wire format is simple: every
field is a tag (its number and wire type as a varint), then a varint, 8 bytes, or a length and
bytes. Written here, in about as many lines as the generated code would take to import, with no
dependency: no package on PyPI ships prompb's messages with native histograms without pulling
in a code generator or an SDK. tests/unit/test_remotewrite.py decodes what this writes with
protobuf itself, from a descriptor of prompb's own field numbers and types.

Two encoded WriteRequests joined end to end are one WriteRequest holding both's series (a
repeated field's elements simply follow each other), so frames kept after a failed write are
sent with the next by joining their bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from runner.metrics.native import SCHEMA, ZERO_THRESHOLD_S, NativeHistogram, spans

Labels = Sequence[tuple[str, str]]  # name, value; __name__ among them

# Wire types.
_VARINT, _I64, _LEN = 0, 1, 2


def _varint(n: int) -> bytes:
    """A base-128 varint; a negative int64 as its two's complement, ten bytes, as protobuf writes it."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _zigzag(n: int) -> int:
    """sint32 and sint64: small negative numbers in few bytes."""
    return n << 1 if n >= 0 else (-n << 1) - 1


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _len(number: int, payload: bytes) -> bytes:
    return _tag(number, _LEN) + _varint(len(payload)) + payload


def _double(number: int, value: float) -> bytes:
    return _tag(number, _I64) + struct.pack("<d", value)


def _uint(number: int, value: int) -> bytes:
    return _tag(number, _VARINT) + _varint(value)


def _label(name: str, value: str) -> bytes:
    return _len(1, name.encode()) + _len(2, value.encode())


def _labels(labels: Labels) -> bytes:
    """Label messages, sorted by name as the remote write spec requires."""
    return b"".join(_len(1, _label(name, value)) for name, value in sorted(labels))


def sample_series(labels: Labels, value: float, timestamp_ms: int) -> bytes:
    """One TimeSeries (field 1 of WriteRequest) with one float sample."""
    sample = _double(1, value) + _uint(2, timestamp_ms)
    return _len(1, _labels(labels) + _len(2, sample))


def histogram(h: NativeHistogram, timestamp_ms: int) -> bytes:
    """A Histogram message: integer counts, at SCHEMA, the zero bucket up to ZERO_THRESHOLD_S."""
    runs, deltas = spans(h.positive())
    body = (_uint(1, h.count) + _double(3, h.sum_s) + _uint(4, _zigzag(SCHEMA)) + _double(5, ZERO_THRESHOLD_S)
            + _uint(6, h.zero_count))
    for offset, length in runs:
        body += _len(11, _uint(1, _zigzag(offset)) + _uint(2, length))
    if deltas:
        body += _len(12, b"".join(_varint(_zigzag(d)) for d in deltas))  # packed sint64
    return body + _uint(15, timestamp_ms)


def histogram_series(labels: Labels, h: NativeHistogram, timestamp_ms: int) -> bytes:
    """One TimeSeries with one native histogram sample."""
    return _len(1, _labels(labels) + _len(4, histogram(h, timestamp_ms)))


def write_request(series: Iterable[bytes]) -> bytes:
    """A WriteRequest of encoded TimeSeries (each already a WriteRequest field)."""
    return b"".join(series)
