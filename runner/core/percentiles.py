"""The latency percentiles every output can show, as data: each one's name, rank and quantile.

A percentile is named the same in the interval line's header, the JSON summary's keys, a
threshold rule (`p99 < 50ms`) and a gauge's quantile label; which outputs show which ones is
said in runner.stats.figures, and for the interval line (with its records and gauges) by its
columns in runner.core.columns. A new percentile is one line here (and, if an output should
show it, one word in that output's set there, or one row in the line's columns).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from runner.core.lazymethods import dataclass


@dataclass(frozen=True)
class Percentile:
    """One latency percentile: its name in every output, its rank, and its Prometheus quantile."""

    key: str  # "p99": the summary's key, the threshold's metric, the line's column
    rank: float  # 99.0
    quantile: str  # "0.99": the quantile label of the gauges

    @property
    def fraction(self) -> float:
        return self.rank / 100


PERCENTILES: Mapping[str, Percentile] = MappingProxyType({p.key: p for p in (
    Percentile("p50", 50, "0.5"),
    Percentile("p75", 75, "0.75"),
    Percentile("p90", 90, "0.9"),
    Percentile("p95", 95, "0.95"),
    Percentile("p99", 99, "0.99"),
    Percentile("p999", 99.9, "0.999"),
)})
