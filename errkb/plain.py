"""Plain data classes for the modules a cold ``errkb explain`` loads.

``dataclasses`` imports ``inspect`` (and with it ast, dis, tokenize): about 7 ms of a
~75 ms cold call, plus a generated-code ``exec`` per class. The few small records of
the explain path (messages, matches, near matches) write their ``__init__`` by hand and
take ``__eq__`` and ``__repr__`` from :class:`Plain`, which behave as a dataclass's do:
equal when of the same class with equal fields in order, unhashable, shown as
``Name(field=value, ...)``.
"""

from __future__ import annotations


class Plain:
    """``__eq__`` and ``__repr__`` over the fields named in ``_fields`` (those named in
    ``_hidden`` are left out of the repr, as ``field(repr=False)``)."""

    _fields: tuple[str, ...] = ()
    _hidden: tuple[str, ...] = ()

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    __hash__ = None  # mutable and compared by value, like a dataclass with eq=True

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields if name not in self._hidden)
        return f"{type(self).__qualname__}({shown})"
