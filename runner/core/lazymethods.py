"""`dataclass`, as the standard library's, with `__repr__`, `__eq__` and `__hash__` made at their first use.

Issue 34: the standard `dataclass` compiles the source of each method it writes as the class is
made: five or six per frozen class (`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`,
`__delattr__`), about 0.5 ms of CPU a class, 25 ms of a one-request bench's 109 ms for the 47 on
its start path. The run calls their `__init__` and nothing else: a repr, an equality or a hash is
a test's, a log line's or a dict key's. This decorator lets the standard one write `__init__` (and
a frozen class's guards) as it does, and leaves in the class, for each of the other three that the
standard one would have written, a placeholder that on its first use makes the method the standard
one makes (on a twin class of the same fields and compare, hash and repr flags), sets it in the
class in its place and answers with it: the same method, compiled later or never. Looked up on the
class without being called (the standard decorator checks that a field's default has a __hash__),
it answers with a function that makes the method when called.

It takes the subset of the standard options used here: `frozen`, `eq` and `slots` (`unsafe_hash`
and `order` are not offered: a class that needs them uses the standard decorator).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")


@overload
def dataclass(cls: type[T], /) -> type[T]: ...


@overload
def dataclass(*, frozen: bool = False, eq: bool = True, slots: bool = False) -> Any: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(cls: type[T] | None = None, /, *, frozen: bool = False, eq: bool = True, slots: bool = False) -> Any:
    """`dataclasses.dataclass(cls, frozen=..., eq=..., slots=...)`, its repr, equality and hash made at first use."""

    def wrap(cls: type[T]) -> type[T]:
        body = dict(cls.__dict__)  # what the class defines itself, which the standard one never overwrites
        made = dataclasses.dataclass(cls, frozen=frozen, eq=False, repr=False, slots=slots)
        _defer(made, body, frozen, eq)
        return made

    return wrap if cls is None else wrap(cls)


def _defer(cls: type, body: dict[str, Any], frozen: bool, eq: bool) -> None:
    """Set a placeholder for each method the standard decorator would write, as its rules say."""
    deferred: dict[str, _Later | None] = {}
    if "__repr__" not in body:
        deferred["__repr__"] = _Later(cls, "__repr__")
    if eq and "__eq__" not in body:
        deferred["__eq__"] = _Later(cls, "__eq__")
    # The standard rule (eq without unsafe_hash): a __hash__ the class wrote stays; else a frozen
    # class's hashes its fields and another's is None (a class that writes __eq__ gets None from Python).
    written = body.get("__hash__", dataclasses.MISSING)
    if eq and (written is dataclasses.MISSING or (written is None and "__eq__" in body)):
        deferred["__hash__"] = _Later(cls, "__hash__") if frozen else None
    for name, method in deferred.items():
        setattr(cls, name, method)


class _Later:
    """One of a class's generated methods, not made yet: made when first looked up, and set in its place."""

    def __init__(self, owner: type, name: str) -> None:
        self.owner = owner  # the class it stands in (a subclass's instance looks it up here too)
        self.name = name

    def __get__(self, instance: object, kind: type | None = None) -> Any:
        if instance is None:  # looked up on the class, not called (the standard decorator's check of a default's
            return self.call  # hash is one): what makes the method when it is called
        return self.make().__get__(instance, kind)

    def make(self) -> Any:
        """The method, made and set in the class in this placeholder's place."""
        method = _made(self.owner, self.name)
        setattr(self.owner, self.name, method)
        return method

    def call(self, instance: object, *args: Any) -> Any:
        return self.make()(instance, *args)


def _made(cls: type, name: str) -> Any:
    """`name` as the standard decorator writes it for `cls`: from a twin of its fields' names and flags."""
    fields = [(f.name, object, dataclasses.field(repr=f.repr, hash=f.hash, compare=f.compare))
              for f in dataclasses.fields(cls)]
    # The one method asked for alone (no __init__); a hash as a frozen class with eq has it (unsafe_hash adds it).
    # A docstring, or the standard decorator writes one from inspect.signature (tokenize's regular expressions).
    twin = dataclasses.make_dataclass(cls.__name__, fields, init=False, repr=name == "__repr__", eq=name == "__eq__",
                                      unsafe_hash=name == "__hash__", namespace={"__doc__": cls.__doc__ or "-"})
    method = twin.__dict__[name]
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    return method
