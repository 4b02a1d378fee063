"""Pictures for docs/tutorials/growing.md, drawn from the benchmark's own results.

``python -m benchmarks growing`` writes the medians of every run to
``benchmarks/results/growing.json``; the bars below are those numbers, so the picture always
shows the last measured run.
"""

from __future__ import annotations

import json
from pathlib import Path

from _svg import bars

RESULTS = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "results" / "growing.json"
FORMATS = ["memcpy bound", "distsampling", "naive npy", "one pickle per sample"]


def render() -> dict[str, str]:
    medians = json.loads(RESULTS.read_text())["medians"]
    throughput = {
        f"num_workers={w}": {
            name: medians[name][w]["MB/s"] / 1000 for name in FORMATS if w in medians.get(name, {})
        }
        for w in ("0", "1", "2")
    }
    stall = {
        label: {
            "steady batch": medians[name]["stall"]["batch_s"] * 1000,
            "epoch boundary": medians[name]["stall"]["boundary_s"] * 1000,
        }
        for label, name in [
            ("rebuilt after the epoch", "rebuild after the epoch"),
            ("prefetch_epochs", "prefetch_epochs"),
        ]
    }
    return {
        "growing-throughput.svg": bars(
            throughput, "1 MiB float32 samples, batch 32, warm cache: GB/s by num_workers", "GB/s"
        ),
        "growing-stall.svg": bars(
            stall, "Interval between batches, 2 workers, 100 ms step (ms)", "ms"
        ),
    }
