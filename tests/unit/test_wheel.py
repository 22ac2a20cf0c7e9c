"""The wheel of weighted URLs (runner.config.targets): nginx's smooth weighted round robin, exhaustively.

Every weight vector of up to four URLs with weights up to 6 (and some longer ones) is checked
against nginx's own loop, for the property the split promises (every prefix of the sends
within one send of each URL's share), and for what each shard of a split run reaches.
"""

from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction

import pytest

from runner.config.targets import MAX_TURN, MAX_WEIGHT, Targets, reduced, turn_of, wheel_of
from runner.config.urls import parse_targets, targets_from_arguments
from runner.core.errors import UsageError
from runner.load.shards import Shard


def nginx_wheel(weights: list[int]) -> list[int]:
    """ngx_http_upstream_get_peer's loop as written, one turn (of the reduced weights)."""
    weights = reduced(weights)
    total, current, picks = sum(weights), [0] * len(weights), []
    for _ in range(total):
        best = None
        for i, weight in enumerate(weights):
            current[i] += weight
            if best is None or current[i] > current[best]:
                best = i
        assert best is not None
        current[best] -= total
        picks.append(best)
    return picks


WEIGHTS = [list(w) for n in range(1, 5) for w in itertools.product(range(1, 7), repeat=n)]
LONGER = [[1] * 30 + [2], [7, 3, 3, 1, 1, 1, 9, 2], [MAX_WEIGHT, 1, 1], [5] * 12 + [1, 2, 3], list(range(1, 40))]


# The enumerations run as loops, each failure naming its case: 3,400 pytest items cost 4 times
# the CPU of the checks themselves.


def test_wheel_is_nginx_smooth_weighted_round_robin() -> None:
    for weights in WEIGHTS + LONGER:
        assert list(wheel_of(weights)) == nginx_wheel(weights), weights


def test_every_prefix_of_sends_is_within_one_send_of_the_weights() -> None:
    """Over two turns (the wheel repeats), after any number m of sends each URL has had
    within one send of m x its share, and each turn gives each URL exactly its weight."""
    for weights in WEIGHTS + LONGER:
        wheel = wheel_of(weights)
        total = sum(weights)
        assert len(wheel) == turn_of(weights) == total // math.gcd(*weights), weights
        counts = [0] * len(weights)
        for m in range(1, 2 * len(wheel) + 1):
            counts[wheel[(m - 1) % len(wheel)]] += 1
            for url, weight in enumerate(weights):
                assert abs(counts[url] - Fraction(m * weight, total)) < 1, (weights, m, url, counts)
        assert [c * total for c in counts] == [2 * len(wheel) * w for w in weights], weights


def test_three_to_one_is_a_a_b_a() -> None:
    assert wheel_of([3, 1]) == (0, 0, 1, 0)
    assert wheel_of([5, 1, 1]) == (0, 0, 1, 0, 2, 0, 0)  # nginx's documented example: a a b a c a a


def shard_urls_by_brute_force(targets: Targets, shard: Shard) -> list[int]:
    """The URLs a shard's sends reach, over every send of the least common turn."""
    length = math.lcm(len(targets.wheel), shard.stride)
    return sorted({targets.url_of(n) for n in range(shard.offset, length * 2, shard.stride)})


SPLITS = [(count, workers) for count in range(1, 7) for workers in range(1, 4)]


def test_shards_urls_are_the_urls_their_sends_reach() -> None:
    for weights in [w for w in WEIGHTS if len(w) <= 3] + LONGER[:3]:
        targets = Targets(tuple(f"http://h/{i}" for i in range(len(weights))), tuple(weights))
        for count, workers in SPLITS:
            reached: set[int] = set()
            for index in range(count):
                for worker in range(workers):
                    shard = Shard(index, count, worker, workers)
                    assert list(shard.urls(targets.wheel)) == shard_urls_by_brute_force(targets, shard), (weights,
                                                                                                        shard)
                    reached |= set(shard.urls(targets.wheel))
            assert reached == set(range(len(weights))), weights  # together, the processes send to every URL


def part_by_brute_force(targets: Targets, shard: Shard, urls: set[int]) -> Fraction:
    """The shard's part of the sends to `urls`, counted over every send of the least common turn."""
    length = math.lcm(len(targets.wheel), shard.stride)
    everyone = sum(1 for n in range(length) if targets.url_of(n) in urls)
    mine = sum(1 for n in range(shard.offset, length, shard.stride) if targets.url_of(n) in urls)
    return Fraction(mine, everyone) if everyone else Fraction(0)


@pytest.mark.parametrize("weights", [w for w in WEIGHTS if len(w) <= 3] + LONGER[:3], ids=str)
def test_a_shards_part_of_a_urls_sends_is_what_its_sends_make_and_the_parts_add_up(weights: list[int]) -> None:
    """A scoped rate rule's shard multiplies its rate by 1 / part: 3 shards of 3 URLs each make all of
    one URL's sends (not a third), so the extrapolation must not be x 3 there."""
    targets = Targets(tuple(f"http://h/{i}" for i in range(len(weights))), tuple(weights))
    groups = [set(g) for n in range(1, min(len(weights), 2) + 1) for g in itertools.combinations(range(len(weights)), n)]
    for count, workers in SPLITS:
        for urls in groups:
            parts = []
            for index in range(count):
                for worker in range(workers):
                    shard = Shard(index, count, worker, workers)
                    part = shard.part_of(targets.wheel, urls)
                    assert part == part_by_brute_force(targets, shard, urls), (shard, urls)
                    assert (part > 0) == bool(urls & set(shard.urls(targets.wheel)))
                    parts.append(part)
            assert sum(parts) == 1, (count, workers, urls)
    assert Shard(1, 3).part_of(3, {1}) == 1 and Shard(1, 2).part_of(3, {1}) == Fraction(1, 2)


def test_unweighted_targets_keep_the_old_split() -> None:
    """No weights, or all equal: the wheel is the URLs in order (send n to URL n mod count), as the
    native engine sends; `weighted` says when a list is not that."""
    for weights in [(), (1, 1, 1), (4, 4, 4)]:
        targets = Targets(("http://a/", "http://b/", "http://c/"), weights)
        assert targets.wheel == range(3) and not targets.weighted
        assert [targets.url_of(n) for n in range(7)] == [0, 1, 2, 0, 1, 2, 0]
        assert Shard(1, 3).urls(targets.wheel) == Shard(1, 3).urls(3) == range(1, 3, 3)
    assert Targets(("http://a/", "http://b/"), (2, 1)).weighted


# --- weights as written ---------------------------------------------------------------------


def test_weights_in_a_list_file() -> None:
    text = "# the checkout is a quarter\n3 http://a/\n\n  1\thttp://b/x  \nhttp://c/\n"
    targets = parse_targets(text, "urls.txt")
    assert targets.urls == ("http://a/", "http://b/x", "http://c/") and targets.weights == (3, 1, 1)
    assert targets.shares() == (0.6, 0.2, 0.2)
    assert parse_targets("2 http://a/\n2 http://b/\n", "urls.txt").weighted is False


def test_weights_on_the_command_line() -> None:
    targets = targets_from_arguments(["3", "http://a/", "http://b/"])
    assert targets.urls == ("http://a/", "http://b/") and targets.weights == (3, 1)
    assert targets_from_arguments(["3 http://a/", "http://b/"]) == targets  # a file's line, quoted
    assert not targets_from_arguments(["http://a/", "http://b/"]).weighted


@pytest.mark.parametrize(("text", "message"), [
    ("http://a/\n0 http://b/\n", "urls.txt:2: weight '0' is not allowed; a weight is a whole number from 1 to 1000"),
    ("1001 http://a/\n", "urls.txt:1: weight '1001' is not allowed"),
    ("-2 http://a/\n", "urls.txt:1: weight '-2' is not allowed"),
    ("+2 http://a/\n", "urls.txt:1: weight '+2' is not allowed"),
    ("1.5 http://a/\n", "urls.txt:1: weight '1.5' is not allowed"),
    ("3x http://a/\n", "urls.txt:1: weight '3x' is not allowed"),
    ("3 ftp://a/\n", "urls.txt:1: 'ftp://a/' is not an http:// or https:// URL"),
    ("3 http://a/ b\n", "urls.txt:1: 'http://a/ b' contains a space"),
    ("http://a/ 3\n", "urls.txt:1: 'http://a/ 3' contains a space"),
    (f"{MAX_WEIGHT} http://a/\n" + f"{MAX_WEIGHT - 1} http://b/\n" * 10,
     f"urls.txt: the weights make a turn of {MAX_WEIGHT * 11 - 10} sends (their sum over their greatest common "
     f"divisor); at most {MAX_TURN}: give smaller weights or fewer URLs"),
])
def test_a_bad_weight_is_one_line_naming_file_line_and_value(text: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_targets(text, "urls.txt")
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


@pytest.mark.parametrize(("arguments", "message"), [
    (["0", "http://a/"], "URL argument: weight '0' is not allowed"),
    (["http://a/", "3"], "URL argument: weight 3 is not followed by a URL"),
    (["3", "4", "http://a/"], "URL argument: '4' is not an http:// or https:// URL"),
])
def test_a_bad_weight_on_the_command_line(arguments: list[str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        targets_from_arguments(arguments)
    assert str(caught.value).startswith(message)


NOT_A_URL = "is not an http:// or https:// URL"


@pytest.mark.parametrize("written", ["127.0.0.1:18471/", "127.0.0.1:18471", "127.0.0.1", "10.0.0.1/x", "1.2.3", "0:80",
                                     "8080/"])
def test_an_address_without_its_scheme_is_said_to_be_no_url_not_a_bad_weight(written: str) -> None:
    """Issue 32: `soak 127.0.0.1:18471/` said `weight '127.0.0.1:18471/' is not allowed`, where
    `soak localhost:18471` says what is wrong. A word that reads as a host (a colon, a slash, a second
    dot) is a URL, however it starts: on the command line, alone or after a weight, and in a file."""
    for arguments in ([written], ["3", written], [written, "http://a/"]):
        with pytest.raises(UsageError) as caught:
            targets_from_arguments(arguments)
        assert str(caught.value) == f"URL argument: {written!r} {NOT_A_URL}"
    with pytest.raises(UsageError) as caught:
        targets_from_arguments(["localhost:18471"])
    assert str(caught.value) == f"URL argument: 'localhost:18471' {NOT_A_URL}"  # the line both now get
    with pytest.raises(UsageError) as caught:
        parse_targets(f"{written} http://a/\n", "urls.txt")
    assert str(caught.value) == f"urls.txt:1: '{written} http://a/' contains a space"


@pytest.mark.parametrize("word", ["0", "1001", "-2", "+2", "1.5", ".5", "3x"])
def test_what_reads_as_a_number_is_still_a_weight(word: str) -> None:
    """Only words that read as a host changed: a number, well or badly written, is still judged as a weight."""
    with pytest.raises(UsageError, match=rf"^URL argument: weight '{re.escape(word)}' is not allowed"):
        targets_from_arguments([word, "http://a/"])
    assert targets_from_arguments(["7", "http://a/", "http://b/"]).weights == (7, 1)


def test_a_long_list_without_weights_builds_no_wheel() -> None:
    """A generated list of 200,000 URLs has no weights: its wheel is a range, nothing held per URL."""
    targets = parse_targets("".join(f"http://h/{n}\n" for n in range(200_000)), "urls.txt")
    assert targets.wheel == range(200_000)
