"""``python -m benchmarks [stem ...] [--large] [--repeats K]``: run, print, write results."""

from __future__ import annotations

import argparse
import importlib
import platform
from pathlib import Path

import torch

from ._harness import ROOT, Comparison, measure

RESULTS = ROOT / "benchmarks" / "results"


def _fmt(key: str, value: float) -> str:
    if key.endswith("_s"):
        return f"{value * 1e3:,.1f} ms" if value < 1 else f"{value:,.2f} s"
    if key.endswith("MiB"):
        return f"{value:,.1f} MiB"
    if key.endswith("_us"):
        return f"{value:,.3f} us"
    return f"{value:,.1f}"


def report(comparison: Comparison, medians: dict[str, dict[str, float]]) -> str:
    """A markdown table: one row per contender, each figure with its ratio to the baseline."""
    keys = list(next(iter(medians.values())))
    base = medians[comparison.baseline]
    lines = [f"**{comparison.title}**" + (f" — {comparison.note}" if comparison.note else ""), ""]
    lines.append("| | " + " | ".join(keys) + " |")
    lines.append("|---" * (len(keys) + 1) + "|")
    for label, figures in medians.items():
        cells = []
        for key in keys:
            ratio = figures[key] / base[key] if base.get(key) else float("nan")
            suffix = "" if label == comparison.baseline else f" ({ratio:.2f}x)"
            cells.append(_fmt(key, figures[key]) + suffix)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("stems", nargs="*", help="bench_<stem>.py modules to run (default: all)")
    parser.add_argument("--large", action="store_true", help="add the largest sizes (slow)")
    parser.add_argument("--repeats", type=int, default=5, help="fresh-process runs per contender")
    args = parser.parse_args()
    stems = args.stems or sorted(p.stem[6:] for p in (ROOT / "benchmarks").glob("bench_*.py"))
    machine = f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {__import__('os').cpu_count()} cores"
    RESULTS.mkdir(exist_ok=True)
    for stem in stems:
        module = importlib.import_module(f"benchmarks.bench_{stem}")
        sections = [
            f"_Measured by `make bench` on {machine}; median of {args.repeats} fresh-process runs; ratios against the first row's baseline._\n"
        ]
        for comparison in module.suite(args.large):
            text = report(comparison, measure(comparison, args.repeats))
            print(text, flush=True)
            sections.append(text)
        Path(RESULTS / f"{stem}.md").write_text("\n".join(sections))


if __name__ == "__main__":
    main()
