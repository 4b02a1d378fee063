"""Pictures for docs/tutorials/growing.md, drawn from the benchmark's own results.

``python -m benchmarks growing`` writes every figure's min/median/max to
``benchmarks/results/growing.json``; the bars below are its medians, so the picture always
shows the last measured run.
"""

from __future__ import annotations

import json
from pathlib import Path

from _svg import bars

RESULTS = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "results" / "growing.json"
FORMATS = ["memcpy bound", "distsampling", "naive npy + default_collate", "one pickle per sample"]


def _medians(comparison: dict, key: str) -> dict[str, float]:
    return {label: f[key]["median"] for label, f in comparison["figures"].items()}


def render() -> dict[str, str]:
    comparisons = json.loads(RESULTS.read_text())["comparisons"]
    throughput = {
        f"num_workers={c['params']['num_workers']}": {
            name: mbs / 1000 for name, mbs in _medians(c, "MB/s").items() if name in FORMATS
        }
        for c in comparisons
        if c["params"].get("order") == "sequential"
    }
    (stall_run,) = [c for c in comparisons if "step_s" in c["params"]]
    batch, boundary = _medians(stall_run, "batch_s"), _medians(stall_run, "boundary_s")
    stall = {
        label: {"steady batch": batch[name] * 1000, "epoch boundary": boundary[name] * 1000}
        for label, name in [
            ("rebuilt after the epoch", "rebuild after the epoch"),
            ("prefetch_epochs", "prefetch_epochs"),
        ]
    }
    return {
        "growing-throughput.svg": bars(
            throughput,
            "1 MiB float32 samples, batch 32, warm cache, in order: GB/s by num_workers",
            "GB/s",
        ),
        "growing-stall.svg": bars(
            stall, "Interval between batches, 2 workers, 100 ms step (ms)", "ms"
        ),
    }
