"""docs/errors.md names every error class volary raises on purpose, and no other."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import volary.errors as errors

DOC = (Path(__file__).resolve().parents[1] / "docs" / "errors.md").read_text()


def test_every_error_class_is_documented_and_only_those():
    classes = {
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, errors.VolaryError)
    }
    documented = set(re.findall(r"^\| `(\w+)`", DOC, flags=re.M))
    assert documented == classes
    for name in classes - {"VolaryError"}:  # each row says what else the class is, as Python
        cls = getattr(errors, name)
        bases = [b.__name__ for b in cls.__bases__ if b is not errors.VolaryError]
        for b in bases:
            assert re.search(rf"`{name}` \(also an? `{b}`\)", DOC), (name, b)
