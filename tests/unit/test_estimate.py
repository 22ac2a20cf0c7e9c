"""Run-wide percentiles estimated from interval rows: exact where the rows pin them down."""

from __future__ import annotations

import pytest

from runner.stats.estimate import estimate, interval_points

QUANTILES = {"p50": 0.5, "p75": 0.75, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}
ROW = {0.5: 10, 0.95: 20, 0.99: 40, 0.999: 80}


def points(low: float = 5, row: dict[float, float | None] | None = None, high: float = 100) -> list:
    return interval_points(low, ROW if row is None else row, high)


def test_identical_intervals_give_their_own_percentiles_back() -> None:
    found = estimate([(100, points()), (300, points())], QUANTILES)
    assert found["p50"] == pytest.approx(10)
    assert found["p95"] == pytest.approx(20)
    assert found["p99"] == pytest.approx(40)
    assert found["p999"] == pytest.approx(80)
    # Between the printed points, straight lines: p75 is halfway from p50 to p95 in fraction.
    assert found["p75"] == pytest.approx(10 + (0.25 / 0.45) * 10)
    assert found["p90"] == pytest.approx(10 + (0.40 / 0.45) * 10)


def test_the_mean_is_that_of_the_straight_line_distribution() -> None:
    found = estimate([(7, points())], {})
    expected = 0.5 * (5 + 10) / 2 + 0.45 * (10 + 20) / 2 + 0.04 * (20 + 40) / 2 + 0.009 * (40 + 80) / 2 + 0.001 * 90
    assert found["mean"] == pytest.approx(expected)


def test_intervals_weigh_by_their_responses() -> None:
    """Half the responses at exactly 1, half at exactly 3: the median is the boundary, 1."""
    at_1 = interval_points(1, {q: 1 for q in ROW}, 1)
    at_3 = interval_points(3, {q: 3 for q in ROW}, 3)
    found = estimate([(10, at_1), (10, at_3)], {"p50": 0.5, "p75": 0.75})
    assert found["p50"] == pytest.approx(1)
    assert found["p75"] == pytest.approx(3)
    assert found["mean"] == pytest.approx(2)
    heavy = estimate([(90, at_1), (10, at_3)], {"p90": 0.9, "p95": 0.95})
    assert heavy["p90"] == pytest.approx(1) and heavy["p95"] == pytest.approx(3)
    assert heavy["mean"] == pytest.approx(1.2)


def test_zero_latency_rows_as_ms_logs_print_them() -> None:
    """nginx on loopback in ms: min, p50 and p95 are 0, p99 1: 99% of the run is under 1 ms."""
    row = interval_points(0, {0.5: 0, 0.95: 0, 0.99: 1, 0.999: 1}, 1)
    found = estimate([(6000, row)] * 3, QUANTILES)
    assert found["p50"] == 0 and found["p95"] == 0
    assert found["p99"] == pytest.approx(1)
    assert 0 < found["mean"] < 0.1


def test_no_responses_means_nothing_to_estimate() -> None:
    assert estimate([], QUANTILES) == {}
    assert estimate([(0, points())], QUANTILES) == {}


def test_unknown_quantiles_are_left_out_of_the_points() -> None:
    """slow_cooker's rows have no real p999: the line goes from p99 straight to max."""
    assert points(row={0.5: 10, 0.95: 20, 0.99: 40, 0.999: None}) == [(0, 5), (0.5, 10), (0.95, 20), (0.99, 40),
                                                                     (1, 100)]


def test_points_never_fall_below_the_one_before_nor_above_max() -> None:
    """slow_cooker prints p999 a bucket above max (2121 vs 2120); a mangled row may be anything."""
    assert points(low=5, row={0.5: 3, 0.95: 20, 0.99: 15, 0.999: 2121}, high=2120) == [
        (0, 5), (0.5, 5), (0.95, 20), (0.99, 20), (0.999, 2120), (1, 2120)]


def test_estimates_stay_within_min_and_max() -> None:
    groups = [(n, interval_points(low, {0.5: low + 1, 0.95: low + 5, 0.99: low + 9, 0.999: low + 9}, low + 10))
              for n, low in ((5, 0), (50, 20), (500, 3))]
    found = estimate(groups, QUANTILES)
    values = [found[k] for k in QUANTILES]
    assert values == sorted(values)
    assert 0 <= values[0] and values[-1] <= 30
