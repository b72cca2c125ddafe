"""The volary exception family: every error a user can trigger derives from VolaryError."""

from __future__ import annotations

from collections.abc import Iterable


class VolaryError(Exception):
    """Base class of every error volary raises on purpose."""


class ConfigError(VolaryError, ValueError):
    """A parameter, config field or argument has an invalid value, shape, dtype or device."""


class UnknownNameError(VolaryError, KeyError):
    """A name looked up in a registry or catalogue does not exist; the message lists valid ones."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]) -> None:
        self.kind, self.name, self.valid = kind, name, sorted(valid)
        super().__init__(
            f"unknown {kind} {name!r}{did_you_mean(name, self.valid)}; "
            f"valid names: {', '.join(self.valid)}"
        )

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return str(self.args[0])


def not_one_of(
    label: str, value: object, valid: Iterable[object], shown: str | None = None
) -> ConfigError:
    """The ConfigError for ``value`` outside ``valid``: ``LABEL: expected one of A, B, got 'x'``
    (``shown`` in place of the comma-separated names where a caller lists them another way)
    and the valid names close to a typo (:func:`did_you_mean`)."""
    names = [str(v) for v in valid]
    listed = ", ".join(names) if shown is None else shown
    head = f"{label}: " if label else ""
    return ConfigError(f"{head}expected one of {listed}, got {value!r}{did_you_mean(value, names)}")


def did_you_mean(name: object, valid: list[str]) -> str:
    """`` (did you mean 'x'?)`` for a typo close to valid names (difflib's ratio >= 0.75; the
    best and any within 0.02 of it, at most 3), else empty: with 46 platforms in the list, the
    one meant should not have to be found by eye."""
    from difflib import SequenceMatcher

    if not isinstance(name, str) or not name:
        return ""
    ratio = {v: SequenceMatcher(None, name, v).ratio() for v in valid}
    best = max(ratio.values(), default=0.0)
    if best < 0.75:
        return ""
    close = sorted((v for v, r in ratio.items() if r >= best - 0.02), key=lambda v: -ratio[v])[:3]
    shown = " or ".join(repr(v) for v in close)
    return f" (did you mean {shown}?)"


class MissingDependencyError(VolaryError, ImportError):
    """An optional backend is not installed; the message names the extra that provides it."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed; install it with `pip install volary[{extra}]`"
        )


class FileFormatError(VolaryError, ValueError):
    """A data file is malformed; the message names the file and the problem."""
