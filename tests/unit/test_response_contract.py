"""Every parser the project has against one table of HTTP/1.1 responses (tests/support/contract.py).

Each row is fed to the native parser (response.c, through the binding `pip install -e .` builds
in place) whole, in two at every byte, a byte per read and at seeded random points, and must
come out exactly as the row says every time: status, body bytes and whether the connection may
carry another request, or the failure's kind and text, or still waiting. The rows are written
by hand, one rule each, so they are the reference: no other parser's answer is. Where the native
parser is not built (no compiler), its rows skip, saying so. h11 too, as httpx runs it
(H11Parser: httpx_transport's session over scripted connections): where it reads a row
otherwise, the outcomes it gives are H11_DIFFERS's, one table, checked to be still true.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.contract import (
    CASES,
    FAULT_SERVER,
    H11_DIFFERS,
    PENDING,
    Case,
    H11Parser,
    NativeParser,
    Parser,
    Response,
    feeds,
    native_module,
    row,
    stale,
)

SEED = 33  # the random splits' seed (with each row's name); a failure names the split it came from
RANDOM_SPLITS = 20
SHOWN = 5  # feeds named per wrong outcome


@pytest.fixture(scope="module")
def h11() -> Iterator[Parser]:
    with H11Parser() as parser:
        yield parser


@pytest.fixture(scope="module")
def native() -> Parser:
    module = native_module()
    if module is None:
        pytest.skip("runner.load.native._response is not built here (pip install -e . builds it where gcc and the "
                    "Python headers are)")
    why = stale(module)
    if why is not None:
        pytest.fail(why)
    return NativeParser(module)


@pytest.mark.parametrize("which", ["native", "h11"])
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_every_parser_reads_each_response_as_the_table_says(case: Case, which: str,
                                                            request: pytest.FixtureRequest) -> None:
    parser: Parser = request.getfixturevalue(which)
    allowed = {case.outcome}
    if which == "h11":  # httpx's parser: where it reads the row otherwise is H11_DIFFERS
        allowed |= set(H11_DIFFERS.get(case.name, ()))
    wrong: dict[object, list[str]] = {}
    fed = 0
    for how, reads in feeds(case, SEED, RANDOM_SPLITS):
        fed += 1
        got = parser(case.method, reads, case.closed)
        if got not in allowed:
            wrong.setdefault(got, []).append(how)
    assert not wrong, f"{which} read {case.name!r} ({case.method}, closed={case.closed}) otherwise in " + "; ".join(
        f"{len(hows)} of {fed} feeds ({', '.join(hows[:SHOWN])}): {got}" for got, hows in wrong.items())


def test_every_difference_of_h11_is_still_true(h11: Parser) -> None:
    """H11_DIFFERS names what h11 answers otherwise, feed by feed: once it no longer does, the row must go."""
    for name, outcomes in H11_DIFFERS.items():
        case = row(name)
        answers = {h11(case.method, reads, case.closed) for _, reads in feeds(case, SEED, RANDOM_SPLITS)}
        gone = [outcome for outcome in outcomes if outcome not in answers]
        assert not gone, f"{name!r}: h11 never answers {gone} any more: drop it from H11_DIFFERS"


def test_the_table_covers_every_ending() -> None:
    """Responses kept and ended, failures of both kinds, and waits, each with and without the close."""
    kinds = {(type(case.outcome).__name__, getattr(case.outcome, "kind", None), case.closed) for case in CASES}
    assert kinds >= {("Response", None, False), ("Response", None, True), ("Failure", "protocol", False),
                     ("Failure", "protocol", True), ("Failure", "closed", True), ("Pending", None, False)}
    assert {case.outcome.reusable for case in CASES if isinstance(case.outcome, Response)} == {True, False}
    assert {case.method for case in CASES} == {"GET", "HEAD"}
    assert any(case.outcome is PENDING and case.reads for case in CASES)
    names = [case.name for case in CASES]
    assert len(set(names)) == len(names), "row names are unique: a failure names its row"
    assert set(FAULT_SERVER.values()) <= set(names)
