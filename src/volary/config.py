"""Dotted ``field=value`` overrides of frozen config dataclasses: one path from the CLI's
``--set`` (and every option that names a config field) to any config (layer 0).

    >>> cfg = apply_overrides(TrainConfig(), ["lr=3e-4", "arch.cnn_width=0.5", "latent=none"])

Keys are field names, dotted into nested dataclasses (``arch.cnn_width``) and into ``dict``
fields (``scene_options.density``). A value is read as a Python literal where it is one
(``1e-3``, ``(1, 1, 0.5)``, ``'text'``, ``None``), else as bare words (``numba``;
``a,b`` is a tuple), and then checked against the field's annotation: ``bool`` (also
true/false/yes/no/on/off), ``int``, ``float``, ``str``, tuples and lists of those (``8,8``),
``dict``, ``Optional``/unions (tried scalars first, ``str`` last), ``Literal``, enums and
nested dataclasses. Annotations written as strings are resolved with
:func:`typing.get_type_hints`. The caller's config is never mutated: a new one is built with
:func:`dataclasses.replace`, so its ``__post_init__`` checks run. Errors are
:class:`~volary.errors.ConfigError` naming the field path, the expected type and the value
given; an unknown field lists the valid ones. :func:`configure` is how a command builds its
config from its named options and its ``--set`` items (an error names the option). Imports
only the standard library and :mod:`volary.errors`.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import pathlib
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from volary.errors import ConfigError, VolaryError

C = TypeVar("C")

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")
_NONE = ("none", "null")


class _Text(str):
    """A value as typed on the command line (parsed against the field's annotation)."""


class _Mismatch(Exception):
    """A value does not fit an annotation (turned into a ConfigError by the caller)."""


def apply_overrides(cfg: C, overrides: Iterable[str] | Mapping[str, Any]) -> C:
    """A copy of the dataclass ``cfg`` with ``overrides``: ``"field=value"`` strings (values
    parsed as text) or a mapping ``{"field": value}`` (values checked as given); keys may be
    dotted (``"arch.cnn_width"``). Later overrides of the same key win."""
    changes = parse_overrides(cfg, overrides)
    return dataclasses.replace(cfg, **changes) if changes else cfg  # type: ignore[type-var]


def parse_overrides(cfg: Any, overrides: Iterable[str] | Mapping[str, Any]) -> dict[str, Any]:
    """The new values of ``cfg``'s top-level fields that ``overrides`` set (a nested dataclass
    or dict comes back whole, built from ``cfg``'s current one): keyword options for a
    ``replace``-like call, checked like :func:`apply_overrides`."""
    if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        raise ConfigError(f"config: expected a dataclass instance, got {type(cfg).__name__}")
    return _changes(cfg, _tree(overrides), type(cfg).__name__)


def split_override(item: str) -> tuple[str, str]:
    """``"key=value"`` -> ``("key", "value")`` (stripped); ConfigError if there is no ``=``."""
    if not isinstance(item, str):
        raise ConfigError(f"override {_shown(item)}: expected a 'FIELD=VALUE' string")
    key, sep, text = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {_shown(item)}: expected FIELD=VALUE")
    return key.strip(), text.strip()


def describe(annotation: Any) -> str:
    """What an annotation accepts, in words ("an int", "a float or None", ...)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if _is_union(annotation):
        return " or ".join(describe(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(repr(m.value) for m in annotation)
    if origin in (tuple, list):
        kind = origin.__name__
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            item = _short(args[0]) if args else "value"
            return f"a {kind} of {item}s (a,b,...)"
        return f"a {kind} ({', '.join(_short(a) for a in args)})"
    if origin is dict:
        return "a dict {key: value}"
    if dataclasses.is_dataclass(annotation):
        return _article(annotation.__name__)  # type: ignore[union-attr]
    return _WORDS.get(annotation) or _article(getattr(annotation, "__name__", repr(annotation)))


def _shown(value: Any, n: int = 80) -> str:
    """``repr(value)``, cut to ``n`` characters: an error stays one short line."""
    text = repr(value)
    return text if len(text) <= n else f"{text[: n - 3]}..."


def _article(name: str) -> str:
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


_WORDS = {
    int: "an int",
    float: "a float",
    bool: "a bool (true/false)",
    str: "a str",
    type(None): "None",
    Any: "any value",
}


def _short(annotation: Any) -> str:
    if annotation in (int, float, bool, str):
        return annotation.__name__
    return describe(annotation)


# ---- the override tree ----------------------------------------------------------------------
def _tree(overrides: Iterable[str] | Mapping[str, Any]) -> dict[str, Any]:
    """Dotted keys -> a nested dict whose leaves are values (``_Text`` when typed as text)."""
    if isinstance(overrides, Mapping):
        pairs = [(str(k), v) for k, v in overrides.items()]
    elif isinstance(overrides, str):
        raise ConfigError(f"overrides: expected a list of 'FIELD=VALUE', got {_shown(overrides)}")
    else:
        pairs = [(k, _Text(v)) for k, v in map(split_override, overrides)]
    root: dict[str, Any] = {}
    for key, value in pairs:
        *parents, leaf = key.split(".")
        node = root
        for depth, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(
                    f"override {_shown(key)}: conflicts with {'.'.join(parents[: depth + 1])}"
                )
        if isinstance(node.get(leaf), dict):
            raise ConfigError(f"override {_shown(key)}: conflicts with the overrides of its fields")
        node[leaf] = value
    return root


def _changes(obj: Any, tree: dict[str, Any], path: str) -> dict[str, Any]:
    hints = _hints(type(obj))
    valid = [f.name for f in dataclasses.fields(obj) if f.init]
    out = {}
    for name, sub in tree.items():
        if name not in valid:
            raise ConfigError(
                f"{path}: unknown field {_shown(name)}; valid fields: {', '.join(sorted(valid))}"
            )
        where = f"{path}.{name}"
        if isinstance(sub, dict):
            out[name] = _nested(getattr(obj, name), hints.get(name, Any), sub, where)
        else:
            out[name] = convert(sub, hints.get(name, Any), where)
    return out


def _nested(current: Any, annotation: Any, tree: dict[str, Any], path: str) -> Any:
    """A new value of a dataclass or dict field with its sub-fields ``tree`` set."""
    if current is None:  # an Optional[SomeConfig] left at None: start from its defaults
        current = _default_dataclass(annotation, path)
    if dataclasses.is_dataclass(current) and not isinstance(current, type):
        changes = _changes(current, tree, path)
        return dataclasses.replace(current, **changes)
    if isinstance(current, Mapping):
        args = typing.get_args(_without_none(annotation))
        value_type = args[1] if len(args) == 2 else Any
        new = dict(current)
        for key, leaf in tree.items():
            if isinstance(leaf, dict):
                raise ConfigError(f"{path}.{key}: a dict entry has no fields to set")
            new[key] = convert(leaf, value_type, f"{path}.{key}")
        return new
    field_path = path.partition(".")[2]
    raise ConfigError(
        f"{path}: {type(current).__name__} has no fields to set; give it whole ({field_path}=VALUE)"
    )


def _default_dataclass(annotation: Any, path: str) -> Any:
    for cls in typing.get_args(annotation) or (annotation,):
        if dataclasses.is_dataclass(cls) and isinstance(cls, type):
            try:
                return cls()
            except TypeError:
                break
    raise ConfigError(f"{path}: is None and has no default to set fields of")


def _hints(cls: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - a name only imported for type checking: check nothing
        return {f.name: f.type for f in dataclasses.fields(cls) if not isinstance(f.type, str)}


# ---- values -----------------------------------------------------------------------------------
def convert(value: Any, annotation: Any, path: str) -> Any:
    """``value`` checked against (and converted to) ``annotation``; a ``str`` subclass
    ``_Text`` (from :func:`split_override`) is parsed first. ConfigError names ``path``."""
    raw = value if isinstance(value, _Text) else None
    parsed = _literal(raw) if raw is not None else value
    try:
        return _coerce(parsed, raw, annotation)
    except _Mismatch:
        given = str(raw) if raw is not None else value
        hint = ""
        if dataclasses.is_dataclass(_without_none(annotation)):
            hint = f" (or set its fields: {path.partition('.')[2]}.FIELD=VALUE)"
        raise ConfigError(
            f"{path}: expected {describe(annotation)}{hint}, got {_shown(given)}"
        ) from None


def _literal(text: str) -> Any:
    """A Python literal, else bare words: ``a,b`` / ``[a, b]`` -> a tuple, else the text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    inner = text
    if len(text) >= 2 and text[0] + text[-1] in ("()", "[]"):
        inner = text[1:-1]
    elif "," not in text:
        return str(text)
    return tuple(_literal(part.strip()) for part in inner.split(",") if part.strip())


def _coerce(value: Any, raw: str | None, ann: Any, in_union: bool = False) -> Any:
    origin = typing.get_origin(ann)
    if ann is Any or ann is object:
        return value
    if _is_union(ann):
        for member in sorted(typing.get_args(ann), key=_rank):
            try:
                return _coerce(value, raw, member, in_union=True)
            except _Mismatch:
                continue
        raise _Mismatch
    if ann is type(None):
        if value is None or (isinstance(value, str) and value.lower() in _NONE):
            return None
        raise _Mismatch
    if origin is typing.Literal:
        for choice in typing.get_args(ann):
            if type(value) is type(choice) and value == choice or raw == str(choice):
                return choice
        raise _Mismatch
    if origin in (tuple, list):
        return _sequence(value, ann, origin, in_union)
    if origin is dict:
        return _mapping(value, ann)
    if isinstance(ann, type):
        return _scalar(value, raw, ann)
    raise _Mismatch  # an annotation a text value cannot fill (a callable, a type variable)


def _scalar(value: Any, raw: str | None, ann: type) -> Any:
    if ann is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int | str) and str(value).lower() in (*_TRUE, *_FALSE):
            return str(value).lower() in _TRUE
        raise _Mismatch
    if isinstance(value, bool):
        raise _Mismatch  # True is an int to Python, not to a config
    if ann is int:
        if isinstance(value, int):
            return value
        raise _Mismatch
    if ann is float:
        if isinstance(value, int | float):
            try:
                return float(value)
            except OverflowError:  # an int beyond the largest float (10**400)
                raise _Mismatch from None
        if not isinstance(value, str):
            raise _Mismatch
        try:
            return float(value)  # inf, nan
        except ValueError:
            raise _Mismatch from None
    if issubclass(ann, enum.Enum):
        try:
            return ann(value)
        except ValueError:
            raise _Mismatch from None
    if ann is str:
        if isinstance(value, str):
            return str(value)
        if raw is not None:
            return str(raw)
        raise _Mismatch
    if issubclass(ann, pathlib.PurePath) and isinstance(value, str | pathlib.PurePath):
        return ann(value)
    if isinstance(value, ann):
        return value
    raise _Mismatch


def _sequence(value: Any, ann: Any, origin: type, in_union: bool) -> Any:
    if isinstance(value, list | tuple):
        items = list(value)
    elif not in_union and value is not None and not isinstance(value, dict | set):
        items = [value]  # one value for a sequence field: hidden=64 -> (64,)
    else:
        raise _Mismatch
    args = typing.get_args(ann)
    if not args:
        types_ = [Any] * len(items)
    elif len(args) == 2 and args[1] is Ellipsis or origin is list:
        types_ = [args[0]] * len(items)
    elif len(args) == len(items):
        types_ = list(args)
    else:
        raise _Mismatch
    return origin(_coerce(v, None, t) for v, t in zip(items, types_, strict=True))


def _mapping(value: Any, ann: Any) -> dict[Any, Any]:
    if not isinstance(value, Mapping):
        raise _Mismatch
    args = typing.get_args(ann)
    key_type, value_type = args if len(args) == 2 else (Any, Any)
    return {_coerce(k, None, key_type): _coerce(v, None, value_type) for k, v in value.items()}


def _is_union(ann: Any) -> bool:
    return typing.get_origin(ann) in (typing.Union, types.UnionType)


def _without_none(ann: Any) -> Any:
    if _is_union(ann):
        rest = [a for a in typing.get_args(ann) if a is not type(None)]
        return rest[0] if len(rest) == 1 else ann
    return ann


def _rank(ann: Any) -> int:
    """Union members in the order they are tried: None, bool, numbers, the rest, str last."""
    order = {type(None): 0, bool: 1, int: 2, float: 3}
    if ann in order:
        return order[ann]
    return 9 if ann is str else 5


def configure(
    base: C, options: Iterable[tuple[str, str, Any]] = (), sets: Iterable[str] | None = None
) -> C:
    """``base`` with ``options`` ``(flag, field path, value)`` (a value of None: the flag was
    not given) and then ``sets`` (``"FIELD=VALUE"``, a command's ``--set``) applied: how every
    command builds its config from its options. ConfigError names the flag that caused it
    (``--latent: latent: expected an integer >= 1, got 0``; ``--set: ...``)."""
    given = [(flag, path, value) for flag, path, value in options if value is not None]
    try:
        cfg = apply_overrides(base, {path: value for _, path, value in given})
    except VolaryError as err:
        raise ConfigError(f"{_culprit(base, given)}{err}") from err
    try:
        return apply_overrides(cfg, list(sets or ()))
    except VolaryError as err:
        raise ConfigError(f"--set: {err}") from err


def _culprit(base: Any, given: list[tuple[str, str, Any]]) -> str:
    """``"--flag: "`` of the first option that fails on its own ("" if only together)."""
    for flag, path, value in given:
        try:
            apply_overrides(base, {path: value})
        except VolaryError:
            return f"{flag}: "
    return ""


__all__ = [
    "apply_overrides",
    "configure",
    "convert",
    "describe",
    "parse_overrides",
    "split_override",
]
