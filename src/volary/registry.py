"""Names -> interchangeable parts: the one lookup every volary registry uses (layer 0).

A :class:`Registry` maps names to objects (classes, factories, presets). An entry is either the
object itself or a lazy ``"package.module:attr"`` spec, imported on first :meth:`Registry.get`.
A registry may also accept ``module:attr`` specs as names (``specs=True``, e.g. a user's planner
class) and names that installed packages declare under an entry-point ``group`` (loaded on first
use). An unknown name raises :class:`~volary.errors.UnknownNameError`, whose message names the
registry's argument (``kind``) and lists the valid names.

    >>> from volary.registry import Registry
    >>> LAYOUTS = Registry("layout", {"quad_x": quad_x, "hexa": "mypkg.layouts:hexa"})
    >>> LAYOUTS.get("hexa")        # imported now
    >>> LAYOUTS.get("octo")        # UnknownNameError: unknown layout 'octo'; valid names: ...

:func:`parse_enum` and :func:`check_name` give string enums and fixed name tuples the same
error. Imports only the standard library and :mod:`volary.errors`.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Iterable, Iterator, Mapping
from enum import Enum
from typing import Any, Generic, TypeVar, cast

from volary.errors import ConfigError, UnknownNameError

T = TypeVar("T")
E = TypeVar("E", bound=Enum)

SPEC_HINT = "or a 'package.module:Class' spec"


def entry_points(group: str) -> Iterable[Any]:
    """The installed entry points of ``group`` (importlib.metadata, imported on first use)."""
    from importlib import metadata

    return metadata.entry_points(group=group)


def load_spec(spec: str, kind: str = "object", name: str | None = None) -> Any:
    """The attribute ``attr`` (dotted paths allowed) of ``package.module`` for the spec
    ``"package.module:attr"``; ConfigError naming ``kind`` and ``name`` when it cannot."""
    label = f"{kind} {spec if name is None else name!r}"
    module, sep, attr = spec.partition(":")
    if not sep or not module.strip() or not attr.strip():
        raise ConfigError(f"{label}: expected 'package.module:Class', got {spec!r}")
    try:
        obj = importlib.import_module(module.strip())
    except ImportError as exc:
        raise ConfigError(f"{label}: cannot import {module!r}: {exc}") from exc
    for part in attr.strip().split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{label}: module {module!r} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


class Registry(Generic[T]):
    """Named parts of one kind; ``kind`` is what the caller's argument picks ("planner",
    "ray-cast backend", "imu preset", ...) and starts every error message."""

    def __init__(
        self,
        kind: str,
        items: Mapping[str, T | str] | None = None,
        *,
        group: str | None = None,
        specs: bool = False,
        hints: Iterable[str] = (),
    ) -> None:
        """``items``: initial entries (a ``str`` value is a lazy spec); ``group``: entry-point
        group searched after them; ``specs``: accept ``module:attr`` names; ``hints``: extra
        words listed with the valid names (e.g. ``"auto"`` resolved by the caller)."""
        self.kind, self.group, self.specs = kind, group, specs
        self.hints = tuple(hints) + ((SPEC_HINT,) if specs else ())
        self._items: dict[str, T | str] = {}
        self._loaded: dict[str, T] = {}
        for name, obj in (items or {}).items():
            self.register(name, obj)

    def register(self, name: str, obj: T | str, *, replace: bool = False) -> None:
        """Add ``obj`` (or a lazy ``"module:attr"`` spec) under ``name``; re-registering a name
        raises unless ``replace``."""
        if not isinstance(name, str) or not name or ":" in name:
            raise ConfigError(f"{self.kind}: expected a non-empty name without ':', got {name!r}")
        if name in self._items and not replace:
            raise ConfigError(f"{self.kind} {name!r} is already registered")
        self._items[name] = obj
        self._loaded.pop(name, None)

    def get(self, name: str) -> T:
        """The part called ``name``: registered, an entry point of ``group``, or (``specs``) a
        ``module:attr`` spec. Unknown names raise UnknownNameError listing the valid ones."""
        if not isinstance(name, str):
            raise self.unknown(name)
        if name in self._items:
            return self._load(name)
        if self.specs and ":" in name:
            return load_spec(name, self.kind, name)
        ep = self._entry_points().get(name)
        if ep is None:
            raise self.unknown(name)
        try:
            return ep.load()
        except Exception as exc:  # noqa: BLE001 - any failure of a third-party entry point
            raise ConfigError(f"{self.kind} {name!r}: its entry point failed: {exc}") from exc

    __getitem__ = get

    def resolve(self, spec: T | str, cls: type) -> T:
        """``spec`` as is when it is a ``cls`` instance (a config given in full), else the part
        it names (a preset)."""
        return cast(T, spec) if isinstance(spec, cls) else self.get(cast(str, spec))

    def names(self) -> tuple[str, ...]:
        """Registered names in registration order, then entry-point names (sorted)."""
        extra = sorted(set(self._entry_points()) - set(self._items))
        return (*self._items, *extra)

    def keys(self) -> tuple[str, ...]:
        """:meth:`names` (so ``dict(registry)`` works)."""
        return self.names()

    def values(self) -> list[T]:
        """The parts, in :meth:`names` order (lazy entries are imported)."""
        return [self.get(n) for n in self.names()]

    def items(self) -> list[tuple[str, T]]:
        """(name, part) for every name of :meth:`names` (lazy entries are imported)."""
        return [(n, self.get(n)) for n in self.names()]

    def unknown(self, name: object) -> UnknownNameError:
        """The error for an unknown ``name`` (for callers that check before :meth:`get`)."""
        return UnknownNameError(self.kind, str(name), [*self.names(), *self.hints])

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._items or name in self._entry_points())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self.names())})"

    def _load(self, name: str) -> T:
        if name not in self._loaded:
            obj = self._items[name]
            self._loaded[name] = load_spec(obj, self.kind, name) if isinstance(obj, str) else obj
        return self._loaded[name]

    def _entry_points(self) -> dict[str, Any]:
        if self.group is None:
            return {}
        return {ep.name: ep for ep in entry_points(group=self.group)}


def parse_enum(enum: type[E], value: E | str, kind: str) -> E:
    """``enum(value)``; a value that is not one raises UnknownNameError listing the values."""
    try:
        return enum(value)
    except ValueError:
        raise UnknownNameError(kind, str(value), [str(m.value) for m in enum]) from None


def check_name(kind: str, name: Any, valid: Collection[str]) -> str:
    """``name`` if it is one of ``valid``, else UnknownNameError listing them."""
    if not isinstance(name, str) or name not in valid:
        raise UnknownNameError(kind, str(name), valid)
    return name


__all__ = [
    "SPEC_HINT",
    "Registry",
    "check_name",
    "entry_points",
    "load_spec",
    "parse_enum",
]
