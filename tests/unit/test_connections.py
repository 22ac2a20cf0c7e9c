"""What both transports share about connections: how long one is kept (Lifetime), and the
addresses a new one is dialled to (in_turn, Answers): pure rules, given the time."""

from __future__ import annotations

import socket

import pytest

from runner.load.transport import RESOLVE_TTL_NS, Address, Answers, Lifetime, in_turn

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


# --- in_turn: where successive connections to a name go -------------------------------------------


def v4(last: int) -> Address:
    return (socket.AF_INET, (f"127.0.0.{last}", 80))


def v6(last: int) -> Address:
    return (socket.AF_INET6, (f"::{last}", 80, 0, 0))


def test_one_address_is_always_first() -> None:
    assert [in_turn([v4(2)], turn) for turn in range(3)] == [[v4(2)]] * 3
    assert in_turn([], 4) == []


def test_successive_connections_begin_at_each_address_in_turn() -> None:
    addresses = [v4(2), v4(3), v4(4)]
    firsts = [in_turn(addresses, turn)[0] for turn in range(7)]
    assert firsts == [v4(2), v4(3), v4(4), v4(2), v4(3), v4(4), v4(2)]
    for turn in range(6):  # every address is still there to fall back to, in the resolver's cycle
        order = in_turn(addresses, turn)
        assert sorted(order) == sorted(addresses)
        assert order == (addresses * 2)[turn % 3: turn % 3 + 3]


def test_the_resolvers_first_family_stays_first() -> None:
    """Rotating across families would send every other dial to one a server may not listen on."""
    addresses = [v6(1), v4(1), v6(2), v4(2)]
    assert [in_turn(addresses, turn) for turn in range(3)] == [
        [v6(1), v6(2), v4(1), v4(2)],
        [v6(2), v6(1), v4(1), v4(2)],
        [v6(1), v6(2), v4(1), v4(2)],
    ]
    assert in_turn([v4(1), v6(1)], 1) == [v4(1), v6(1)]  # localhost: the other family only as the fallback


# --- Answers: a name's addresses kept for RESOLVE_TTL_NS, and each connection's turn --------------


def test_an_answer_is_kept_for_the_ttl_from_its_arrival() -> None:
    answers = Answers()
    key = ("backends.test", 80)
    assert answers.fresh(key, 0) is None  # never looked up
    answers.keep(key, [v4(2), v4(3)], now_ns=1_000 * MS)
    assert answers.fresh(key, 1_000 * MS) == [v4(2), v4(3)]
    assert answers.fresh(key, 1_000 * MS + RESOLVE_TTL_NS - 1) == [v4(2), v4(3)]
    assert answers.fresh(key, 1_000 * MS + RESOLVE_TTL_NS) is None  # looked up again
    assert answers.fresh(("backends.test", 81), 1_000 * MS) is None  # by host and port


def test_an_answer_expires_when_it_stops_being_fresh() -> None:
    """The native engine looks a name up again at that moment (NativeEngine._keep_resolved)."""
    answers = Answers()
    key = ("backends.test", 80)
    assert answers.expires(key) is None
    answers.keep(key, [v4(2)], now_ns=1_000 * MS)
    expires = answers.expires(key)
    assert expires == 1_000 * MS + RESOLVE_TTL_NS
    assert answers.fresh(key, expires - 1) is not None and answers.fresh(key, expires) is None
    answers.keep(key, [], now_ns=2_000 * MS)  # an empty answer is not kept: the last one still expires
    assert answers.expires(key) == expires


def test_the_ttl_is_a_few_seconds() -> None:
    """Long enough that the resolver is not asked per connection, no longer than the cluster's
    DNS keeps a Service's records (CoreDNS: 5 s)."""
    assert RESOLVE_TTL_NS == 5_000_000_000


def test_an_empty_answer_is_not_kept() -> None:
    answers = Answers()
    answers.keep(("a.test", 80), [], 0)
    assert answers.fresh(("a.test", 80), 0) is None


def test_turns_go_on_across_new_answers() -> None:
    """A refreshed answer does not start the turns over: the pods are still taken in turn."""
    answers = Answers(ttl_ns=10)
    key = ("backends.test", 80)
    answers.keep(key, [v4(2), v4(3), v4(4)], 0)
    firsts = [answers.next_turn(key, [v4(2), v4(3), v4(4)])[0] for _ in range(2)]
    answers.keep(key, [v4(2), v4(3), v4(4)], 10)
    firsts += [answers.next_turn(key, [v4(2), v4(3), v4(4)])[0] for _ in range(2)]
    assert firsts == [v4(2), v4(3), v4(4), v4(2)]
    assert answers.next_turn(("other.test", 80), [v4(5), v4(6)])[0] == v4(5)  # each name its own turns
