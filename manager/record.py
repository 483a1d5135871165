"""Value classes without :mod:`dataclasses`.

``import dataclasses`` costs every CLI command ~10 ms (it imports ``inspect``, and with
it ``ast``, ``dis``, ``tokenize``), and each ``@dataclass`` another ~0.5 ms compiling
its methods: together a third of ``workspace status``'s start-up. The classes on the
review path list their fields in ``__slots__`` and write their ``__init__`` out; ``==``
and ``repr`` (and, for :class:`Value`, ``hash``) come from here, as a dataclass's do.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~3 ms
if TYPE_CHECKING:
    from typing import Any
    from typing import ClassVar
    from typing import Self


class Record:
    """Fields from ``__slots__``: ``==`` field by field between instances of the same
    class, a dataclass-like ``repr``; not hashable (a mutable dataclass is not)."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[str, ...]] = ()   # __eq__ without __hash__: instances are unhashable

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.FIELDS = tuple(name for c in reversed(cls.__mro__)
                           for name in c.__dict__.get("__slots__", ()) if not name.startswith("__"))

    def field_values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__ or not isinstance(other, Record):
            return NotImplemented
        return self.field_values() == other.field_values()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{self.__class__.__qualname__}({fields})"

    def as_dict(self) -> dict[str, Any]:
        """Field name to value (values as they are: not copied, unlike ``dataclasses.asdict``)."""
        return {name: getattr(self, name) for name in self.FIELDS}

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return self.__class__(**{**self.as_dict(), **changes})


class Value(Record):
    """A :class:`Record` whose fields are never reassigned (declared ``Final``, so mypy
    refuses it, as it does for a frozen dataclass): hashable."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self.field_values())
