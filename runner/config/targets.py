"""The URLs a run sends to, with their weights, and which URL each send goes to: one value.

A URL list may give a URL a weight (`3 http://a/` sends three times as often to it as to a
URL of weight 1; no weight is weight 1, so a list without any is the even split). Which URL
send n goes to is `wheel[n % len(wheel)]`: the engine sends by it, a shard works out from it
which URLs it reaches (runner.load.shards), the metrics give series to those only and
`soak validate` says the split it makes. The wheel is built once, by smooth weighted round
robin as nginx's upstream module picks its peers, so that every run of consecutive sends
from the start holds each URL's share to within one send (3:1 is a, a, b, a: never a, a, a, b).
Without weights (or with all weights equal) the wheel is the URLs in order, as before.

Also here: how URLs are labelled when they are counted apart (the metrics' url label, the
summary's per-URL section), and the one bound on how many are: URL_SERIES_CAP.
Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import field
from typing import overload
from urllib.parse import urlsplit, urlunsplit

from runner.core import redact
from runner.core.lazymethods import dataclass

# A weight is a whole number from 1 to MAX_WEIGHT; the weights of a weighted list, divided by their
# greatest common divisor, add up to at most MAX_TURN: the sends of one turn of the wheel, which is
# built once and held for the run (a list of that many URL indices). Hand-written lists of a
# service's endpoints need far less; a long generated list without weights has no wheel to build.
MAX_WEIGHT = 1000
MAX_TURN = 10_000


@dataclass(frozen=True)
class Targets(Sequence[str]):
    """The URL list as a sequence of URLs (what most parts need), with each URL's weight."""

    urls: tuple[str, ...]
    weights: tuple[int, ...] = ()  # one per URL; () for the even split (every weight 1)
    wheel: Sequence[int] = field(init=False, repr=False, compare=False)  # send n goes to wheel[n % len(wheel)]

    def __post_init__(self) -> None:
        if self.weights and len(self.weights) != len(self.urls):
            raise ValueError("one weight per URL")
        object.__setattr__(self, "wheel", wheel_of(self.weights) if self.weighted else range(len(self.urls)))

    @classmethod
    def even(cls, urls: Sequence[str]) -> Targets:
        return cls(tuple(urls))

    @property
    def weighted(self) -> bool:
        """Whether the split is not the even one, URL n mod count (the engines then send by the wheel)."""
        return len(set(self.weights)) > 1

    def url_of(self, n: int) -> int:
        """The URL (index) send n goes to."""
        return self.wheel[n % len(self.wheel)]

    def shares(self) -> tuple[float, ...]:
        """Each URL's part of the sends, 0 to 1."""
        if not self.weighted:
            return tuple(1 / len(self.urls) for _ in self.urls)
        total = sum(self.weights)
        return tuple(w / total for w in self.weights)

    def __len__(self) -> int:
        return len(self.urls)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self.urls[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self.urls)


def reduced(weights: Sequence[int]) -> list[int]:
    """The weights divided by their greatest common divisor: 2:2 is 1:1, 6:2 is 3:1."""
    divisor = math.gcd(*weights) or 1
    return [w // divisor for w in weights]


def turn_of(weights: Sequence[int]) -> int:
    """The sends of one turn of the wheel these weights make."""
    return sum(reduced(weights))


def wheel_of(weights: Sequence[int]) -> tuple[int, ...]:
    """One turn of smooth weighted round robin over the (reduced) weights: the URL of each send.

    nginx's pick (ngx_http_upstream_get_peer): every URL's current weight grows by its weight,
    the largest current weight is picked (the first of equals) and loses the total. URLs of
    equal weight take their turns in list order, so the pick is made among groups of equal
    weight: each group's candidate is its member with the fewest picks (the first of those),
    and its current weight follows from the group's picks alone. That costs one comparison per
    distinct weight and send, not per URL and send (tests/unit/test_wheel.py checks it against
    nginx's loop itself).
    """
    weights = reduced(weights)
    total = sum(weights)
    groups: dict[int, list[int]] = {}
    for index, weight in enumerate(weights):
        groups.setdefault(weight, []).append(index)
    members = list(groups.values())
    group_weight = list(groups)
    picks = [0] * len(members)
    wheel = []
    for step in range(1, total + 1):
        best, best_current, best_index = 0, -math.inf, 0
        for g, weight in enumerate(group_weight):
            size = len(members[g])
            current = step * weight - total * (picks[g] // size)
            index = members[g][picks[g] % size]
            if current > best_current or (current == best_current and index < best_index):
                best, best_current, best_index = g, current, index
        picks[best] += 1
        wheel.append(best_index)
    return tuple(wheel)


# --- URLs counted apart: their labels, and how many have their own -----------------------------

# URLs counted apart (a series of their own in the metrics, an entry of their own in the
# summary's perUrl): enough for every URL of a hand-written list (a service's endpoints), few
# enough that the url label's series stay in the hundreds (each URL has up to 6 status classes,
# its failure kinds and a 21-sample histogram: about 30 samples) and the summary stays short.
URL_SERIES_CAP = 20


OTHER_URLS = "other"  # the url label of the URLs beyond the cap; never a URL's label (those have a scheme)


@dataclass(frozen=True)
class UrlSlots:
    """Where each URL's results are counted: under its own url label, or under "other".

    Made once, at the start: counting then costs one list index per result, and the counts
    take room for at most URL_SERIES_CAP + 1 labels, whatever the number of URLs. Slots go to
    the first distinct labels in the list's order, the order its author chose, and never move
    during a run (a series that changed URL midway would mix two URLs' counts). A URL listed
    twice, or twice with other credentials (which labels leave out), shares one slot, for a
    Pushgateway rejects a push that holds the same series twice.
    """

    labels: tuple[str, ...]  # slot -> url label; OTHER_URLS last, when some URLs are beyond the cap
    slot_of: tuple[int, ...]  # URL index -> slot
    others: int  # distinct url labels counted under OTHER_URLS
    shown: frozenset[int] | None = None  # the slots with series; None: all (see metrics.tally.reached_by)


def url_slots(urls: Sequence[str], cap: int = URL_SERIES_CAP) -> UrlSlots:
    """Each URL's slot: the first `cap` distinct labels get one each, the rest share the last."""
    slots: dict[str, int] = {}
    others: set[str] = set()
    slot_of = []
    for url in urls:
        label = url_label(url)
        slot = slots.get(label)
        if slot is None:
            if len(slots) < cap:
                slot = slots[label] = len(slots)
            else:
                others.add(label)
                slot = cap
        slot_of.append(slot)
    return UrlSlots((*slots, OTHER_URLS) if others else tuple(slots), tuple(slot_of), len(others))


def url_label(url: str) -> str:
    """A URL as a label value: without a user name or password, which must never reach a metric,
    and with secret query values hidden (runner/core/redact.py), for labels are pushed and kept."""
    url = redact.url(url)
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def as_targets(urls: Sequence[str]) -> Targets:
    """A URL list as Targets: itself if it is one, else the even split of its URLs."""
    return urls if isinstance(urls, Targets) else Targets(tuple(urls))


def matching(selector: str, urls: Sequence[str]) -> list[int]:
    """The URLs (indices) a threshold's `{url=...}` names: those whose path (with its query, or
    without), or whose whole URL, is `selector`, each URL as its label shows it (url_label: the
    same at validate, in the run and in a summary read back, whose URLs are shown redacted)."""
    found = []
    for index, url in enumerate(urls):
        label = url_label(url)
        parts = urlsplit(label)
        if selector in (label, parts.path or "/", f"{parts.path or '/'}?{parts.query}"):
            found.append(index)
    return found


def scope_problem(selector: str, urls: Sequence[str]) -> str:
    """Why a rule scoped to `selector` cannot be judged on these URLs, as a phrase; "" if it can:
    it names none of them, or one beyond the first URL_SERIES_CAP, which are counted together."""
    found = matching(selector, urls)
    if not found:
        return f"names no URL of the run: {selector} is not the path, nor the whole, of any URL it sends to"
    slots = url_slots(urls)
    if OTHER_URLS in slots.labels and any(slots.slot_of[i] == len(slots.labels) - 1 for i in found):
        return (f"names a URL beyond the first {URL_SERIES_CAP} of the list, which are counted together "
                f'(as url "{OTHER_URLS}"); list it among the first {URL_SERIES_CAP}')
    return ""
