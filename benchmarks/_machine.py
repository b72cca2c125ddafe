"""Shared by the benchmark scripts: what machine a result was measured on."""

from __future__ import annotations

from volary.bench.threads import cpu_model

__all__ = ["cpu_model"]
