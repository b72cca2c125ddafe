"""What the straight-flight baseline can score, from the scene generators alone.

Every platform flies the same start-goal segment, so a straight trial succeeds exactly when the
segment clears the obstacles by the platform's collider radius (and the line is flown
cleanly). This script measures, per scenario type, the minimum clearance of that segment over
many generator seeds and turns it into the expected success over the 36 FLYINGTRUST
platforms: for the fixed configurations 0-9 the benchmark flies, and for the generator's
distribution (seeds 0..N-1, in blocks of ten as the protocol would draw them).

    .venv/bin/python benchmarks/straight_line.py --types forest,urban --seeds 200

Writes ``benchmarks/results/straight_line.json`` and prints a table. Geometry only: no
flight, so it separates "the scenes" from "the flying" when the baseline disagrees with the
paper (issue 5: straight ~10-20 % in forest/urban, ~0 % in the cluttered types).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from volary.bench.nav.protocol import get_suite
from volary.platforms import catalogue
from volary.worlds.scenarios import SCENARIOS, make_scenario
from volary.worlds.scenarios_common import line_clearance

RESULTS = Path(__file__).resolve().parent / "results" / "straight_line.json"


def clearances(kind: str, seeds: int) -> np.ndarray:
    """(seeds,) minimum clearance (m) of the start-goal segment, seeds 0..seeds-1."""
    out = []
    for s in range(seeds):
        spec = make_scenario(kind, s)
        out.append(line_clearance(list(spec.obstacles), spec.start, spec.goal))
    return np.asarray(out)


def expected_success(clear: np.ndarray, radii: np.ndarray) -> float:
    """Share of (configuration, platform) pairs whose segment clears the collider sphere."""
    return float((clear[:, None] > radii[None, :]).mean())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default=",".join(SCENARIOS), help="comma-separated types")
    ap.add_argument("--seeds", type=int, default=100, help="generator seeds per type")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    platforms = get_suite("flyingtrust").platforms
    radii = np.array([float(catalogue.params(p).radius.reshape(-1)[0]) for p in platforms])
    rows = {}
    for kind in args.types.split(","):
        t0 = time.perf_counter()
        clear = clearances(kind, max(args.seeds, 10))
        blocks = [expected_success(clear[i : i + 10], radii) for i in range(0, len(clear), 10)]
        rows[kind] = {
            "fixed_0_9": expected_success(clear[:10], radii),
            "distribution": expected_success(clear, radii),
            "blocks_of_10": blocks,
            "lines_clear_of_smallest": int((clear > radii.min()).sum()),
            "clearance_m": [round(float(c), 4) for c in clear],
            "seconds": time.perf_counter() - t0,
        }
    table = Table(title="straight baseline: expected success from line clearance")
    for col in ("type", "configs 0-9", f"seeds 0-{args.seeds - 1}", "10-seed blocks min-max"):
        table.add_column(col)
    for kind, r in rows.items():
        b = r["blocks_of_10"]
        table.add_row(
            kind,
            f"{100 * r['fixed_0_9']:.1f} %",
            f"{100 * r['distribution']:.1f} %",
            f"{100 * min(b):.0f}-{100 * max(b):.0f} %",
        )
    Console().print(table)
    doc = {
        "benchmark": "straight_line",
        "what": "expected straight-baseline success = share of (configuration, platform) "
        "pairs whose start-goal segment clears the platform's collider radius",
        "radii_m": {"min": radii.min(), "median": float(np.median(radii)), "max": radii.max()},
        "seeds": args.seeds,
        "types": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
