"""What both transports share about connections: how long one is kept (Lifetime), a pure
rule, given the time."""

from __future__ import annotations

import pytest

from runner.load.transport import Lifetime

MS = 1_000_000


# --- Lifetime: is this request the connection's last? --------------------------------------------


def test_no_limit_never_ends_a_connection() -> None:
    forever = Lifetime()
    assert not forever.limited
    assert not any(forever.last(served, 0, now) for served in (0, 1, 10**9) for now in (0, 10**18))


@pytest.mark.parametrize("limit", [1, 2, 5, 50])
def test_the_max_requests_th_request_is_the_last(limit: int) -> None:
    lifetime = Lifetime(max_requests=limit)
    # `served` is the number sent before this one: the limit-th request finds limit - 1.
    assert [lifetime.last(served, 0, 0) for served in range(limit)] == [False] * (limit - 1) + [True]


def test_the_first_request_sent_at_the_age_is_the_last() -> None:
    lifetime = Lifetime(max_age_ns=100 * MS)
    opened = 5_000 * MS
    assert not lifetime.last(7, opened, opened)  # a new connection's first request
    assert not lifetime.last(7, opened, opened + 100 * MS - 1)
    assert lifetime.last(7, opened, opened + 100 * MS)  # at the age exactly: the connection is that old
    assert lifetime.last(0, opened, opened + 10**12)  # an idle connection found old rides once, then ends


def test_both_limits_whichever_comes_first() -> None:
    lifetime = Lifetime(max_requests=3, max_age_ns=100 * MS)
    assert lifetime.limited
    assert lifetime.last(2, 0, 0)  # the count, young
    assert lifetime.last(0, 0, 100 * MS)  # the age, on its second request
    assert not lifetime.last(1, 0, 99 * MS)
