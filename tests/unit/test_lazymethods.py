"""runner.core.lazymethods: a dataclass whose repr, equality and hash are made at first use
behaves as the standard library's, case for case, and makes none of them before it is used.

Each case defines the same classes twice, once with each decorator, and compares what they do.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from runner.core import lazymethods

DECORATORS = {"standard": dataclasses.dataclass, "lazy": lazymethods.dataclass}


def classes(decorate: Callable[..., Any]) -> dict[str, type]:
    """Every shape of class runner uses: frozen, plain, eq=False, slots, inherited, with a method of its own."""

    @decorate(frozen=True)
    class Frozen:
        x: int
        items: list[int] = dataclasses.field(default_factory=list, compare=False, repr=False)
        name: str = "a"
        shared: ClassVar[int] = 0

    @decorate(frozen=True)
    class Child(Frozen):
        extra: int = 0

    @decorate
    class Plain:
        x: int = 1

    @decorate(eq=False)
    class Identity:
        x: int = 1

    @decorate(slots=True)
    class Slotted:
        x: int = 1

    @decorate(frozen=True)
    class OwnRepr:
        x: int = 1

        def __repr__(self) -> str:
            return "mine"

    @decorate(frozen=True)
    class OwnEq:
        x: int = 1

        def __eq__(self, other: object) -> bool:
            return True

    @decorate(frozen=True)
    class OwnHash:
        x: int = 1

        def __hash__(self) -> int:
            return 7

    return {c.__name__: c for c in (Frozen, Child, Plain, Identity, Slotted, OwnRepr, OwnEq, OwnHash)}


def behaviour(made: dict[str, type]) -> list[Any]:
    """What each class answers: reprs, equalities, hashes (or that it has none), copies and guards."""
    seen: list[Any] = []
    for name, cls in made.items():
        a, b, c = cls(1), cls(1), cls(2)
        hashable = type(a).__hash__ is not None
        seen += [name, repr(a), a == b, a == c, a != b, a == 1, hashable, hashable and hash(a) == hash(b),
                 hashable and hash(a) == hash(c), copy.deepcopy(a) == a, copy.copy(a) == a,
                 dataclasses.replace(a, x=3) == cls(3), dataclasses.asdict(a), cls.__match_args__,
                 [f.name for f in dataclasses.fields(cls)]]
        try:
            a.x = 5
            seen.append(("assigned", a.x))
        except dataclasses.FrozenInstanceError as error:
            seen.append(("frozen", str(error)))
    frozen, child = made["Frozen"], made["Child"]
    seen += [frozen(1, [2]) == frozen(1, [3]), hash(frozen(1, [2])) == hash(frozen(1, [3])),
             child(1) == frozen(1), frozen(1) == child(1), repr(child(1, extra=4))]
    return seen


def test_behaves_as_the_standard_dataclass() -> None:
    assert behaviour(classes(lazymethods.dataclass)) == behaviour(classes(dataclasses.dataclass))


@pytest.mark.parametrize("first", ["__repr__", "__eq__", "__hash__"])
def test_any_method_may_be_used_first(first: str) -> None:
    """Whichever is asked for first, each is made alone and the others still answer as the standard ones."""
    made = classes(lazymethods.dataclass)["Frozen"]
    standard = classes(dataclasses.dataclass)["Frozen"]
    use = {"__repr__": repr, "__eq__": lambda v: v == v, "__hash__": hash}
    assert use[first](made(1)) == use[first](standard(1))
    assert (repr(made(1)), made(1) == made(1), made(1) == made(2)) == (repr(standard(1)), True, False)
    assert hash(made(1)) == hash(standard(1))  # the same fields hashed the same way
    assert made.__eq__.__qualname__ == standard.__eq__.__qualname__


def test_nothing_but_init_is_made_with_the_class() -> None:
    """What a run pays for at import: __init__ (and a frozen class's guards), not repr, eq or hash."""
    made = classes(lazymethods.dataclass)
    for name in ("Frozen", "Child"):
        assert all(isinstance(vars(made[name])[method], lazymethods._Later)
                   for method in ("__repr__", "__eq__", "__hash__")), name
    assert vars(made["Plain"])["__hash__"] is None  # unhashable as the standard one's, nothing to make
    assert not isinstance(vars(made["OwnEq"])["__eq__"], lazymethods._Later)
    assert isinstance(vars(made["OwnEq"])["__hash__"], lazymethods._Later)  # the standard one adds it too
    frozen = made["Frozen"]

    @lazymethods.dataclass(frozen=True)
    class Holder:  # the standard decorator looks up a default's __hash__ (a mutable default is refused)
        held: Any = frozen(1)

    assert isinstance(vars(frozen)["__hash__"], lazymethods._Later)  # looked up, not made
    assert frozen.__hash__(frozen(1)) == hash(frozen(1)) == hash(Holder().held)  # called from the class, made
    made["Frozen"](1).__repr__()
    assert not isinstance(vars(made["Frozen"])["__repr__"], lazymethods._Later)  # made once, then in place
    assert isinstance(vars(made["Frozen"])["__eq__"], lazymethods._Later)
