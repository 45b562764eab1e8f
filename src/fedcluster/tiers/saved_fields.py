"""A method's saved state, declared once per field: its type, its saved kind and when it is kept.

A method class declares each attribute a checkpoint holds as a descriptor,

* ``alpha = Saved[np.ndarray](Reals(low=0, high=1))`` — an attribute of the method itself;
* ``gamma = StateField[np.ndarray](Rows(cluster_axis=1))`` — a field of the method's
  :class:`~fedcluster.tiers.cluster_state.ClusterState` (``alg.gamma`` is ``alg.state.gamma``; ``path=`` reaches
  into a part of the state, ``"stats.counts"``, or gives the field another name, ``HardClusters.cluster`` for the
  state's ``assigned``),

with its :class:`~fedcluster.tiers.saved_kinds.Kind` (what a resume checks its values against), ``kept=`` (saved
only when this is true of the method, e.g. the cluster book when K can change) and ``default=`` (its value when
a checkpoint lacks it, one written before the field was saved). The type parameter is what ``alg.alpha`` reads
and takes. That one declaration drives :meth:`~fedcluster.engine.algorithm.Algorithm.state_dict` (and so the
checkpoint, and moving a state to another device), :meth:`~fedcluster.engine.algorithm.Algorithm.load_state_dict`
and the resume check :meth:`~fedcluster.engine.algorithm.Algorithm.state_problem`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, Self, TypeVar, overload

import numpy as np

from fedcluster.tiers.cluster_book import ClusterBook
from fedcluster.tiers.saved_kinds import Kind

T = TypeVar("T")


class Saved(Generic[T]):
    """A saved attribute of a method (kept in the instance, under its name), declared with its ``kind``; ``kept``:
    saved only when it returns True for the method; ``default``: the value when a checkpoint lacks the field."""

    def __init__(self, kind: Kind, *, kept: Callable[[Any], bool] | None = None,
                 default: Callable[[Any], T] | None = None) -> None:
        if not isinstance(kind, Kind):
            raise TypeError(f"a saved field needs its kind (fedcluster.tiers.saved_kinds), e.g. Reals(low=0), so "
                            f"that a resume can check its values; got {kind!r}")
        self.kind, self.kept, self.default = kind, kept, default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @property
    def place(self) -> str:
        """Where the value lives (two declarations of one place are one field: the subclass's wins)."""
        return self.name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> Self: ...

    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...

    def __get__(self, obj: object | None, objtype: type | None = None) -> Self | T:
        if obj is None:
            return self
        try:
            value: T = vars(obj)[self.name]
        except KeyError:
            raise AttributeError(f"{type(obj).__name__!r} object has no attribute {self.name!r}") from None
        return value

    def __set__(self, obj: object, value: T) -> None:
        vars(obj)[self.name] = value

    def is_kept(self, alg: object) -> bool:
        """Whether a checkpoint of ``alg`` holds the field."""
        return self.kept is None or self.kept(alg)

    def save(self, alg: object) -> Any:
        """The field's value as a checkpoint holds it."""
        return saved(self.__get__(alg))

    def load(self, alg: object, value: Any) -> None:
        """The field back from a checkpoint's ``value``."""
        self.__set__(alg, restored(self.__get__(alg), value))


class StateField(Saved[T]):
    """A saved field of the method's cluster state, read and written through the method attribute
    (``alg.omega`` is ``alg.state.omega``); ``path``: a dotted path into a part of the state (``stats.counts``)
    or the state field's own name where the method names it otherwise (default: the attribute's name)."""

    def __init__(self, kind: Kind, *, path: str | None = None, kept: Callable[[Any], bool] | None = None,
                 default: Callable[[Any], T] | None = None) -> None:
        super().__init__(kind, kept=kept, default=default)
        self.path = path or ""

    def __set_name__(self, owner: type, name: str) -> None:
        super().__set_name__(owner, name)
        self.path = self.path or name

    @property
    def place(self) -> str:
        return f"state.{self.path}"

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> Self: ...

    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...

    def __get__(self, obj: object | None, objtype: type | None = None) -> Self | T:
        if obj is None:
            return self
        value: T = getattr(obj, "state").get(self.path)  # noqa: B009 - any owner with a cluster state
        return value

    def __set__(self, obj: object, value: T) -> None:
        getattr(obj, "state").put(self.path, value)  # noqa: B009


@functools.cache
def declared(cls: type) -> dict[str, Saved[Any]]:
    """Every saved field the classes along ``cls``'s bases declare, base first, by attribute name; a subclass that
    declares a field again (the same name, or the same place under another name) replaces the base's."""
    fields: dict[str, Saved[Any]] = {}
    for klass in reversed(cls.__mro__):
        for name, attr in vars(klass).items():
            if not isinstance(attr, Saved):
                continue
            for other in [n for n, f in fields.items() if f.place == attr.place and n != name]:
                del fields[other]
            fields[name] = attr
    return fields


def saved(value: Any) -> Any:
    """A value as a checkpoint holds it: plain data for a cluster book and a random generator's position, the
    value itself otherwise (tensors, arrays, numbers, text, lists and mappings of them)."""
    if isinstance(value, ClusterBook):
        return value.state_dict()
    if isinstance(value, np.random.Generator):
        return value.bit_generator.state
    return value


def restored(current: Any, value: Any) -> Any:
    """The inverse of :func:`saved`, given the field's ``current`` value (its type)."""
    if isinstance(current, ClusterBook):
        return ClusterBook.from_state(value)
    if isinstance(current, np.random.Generator):
        current.bit_generator.state = value
        return current
    return value
