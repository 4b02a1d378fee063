"""``python -m benchmarks [stem ...] [--large] [--repeats K]``: run, print, write results."""

from __future__ import annotations

import argparse
import importlib
import json
import platform
from pathlib import Path

import torch

from ._harness import ROOT, Comparison, Spread, measure

RESULTS = ROOT / "benchmarks" / "results"


def _fmt(key: str, value: float) -> str:
    if key.endswith("_s"):
        return f"{value * 1e3:,.1f} ms" if value < 1 else f"{value:,.2f} s"
    if key.endswith("MiB"):
        return f"{value:,.1f} MiB"
    if key.endswith("_us"):
        return f"{value:,.3f} us"
    return f"{value:,.1f}"


def _ratio(r: float) -> str:
    # two decimals; below 0.01 the first significant digit, never a "0.00x" that says nothing
    return f"{r:.2f}" if r >= 0.01 else f"{r:.1g}"


def report(comparison: Comparison, figures: dict[str, dict[str, Spread]]) -> str:
    """A markdown table: one row per contender, each figure's median (min-max) and its ratio."""
    keys = list(comparison.columns or next(iter(figures.values())))
    keys = [k for k in keys if k != "load_1m"] + ["load_1m"]  # the machine's load, last
    ratios = keys if comparison.ratios is None else comparison.ratios
    base = figures[comparison.baseline]
    lines = [f"**{comparison.title}**" + (f" — {comparison.note}" if comparison.note else ""), ""]
    lines.append("| | " + " | ".join(keys) + " |")
    lines.append("|---" * (len(keys) + 1) + "|")
    for label, spreads in figures.items():
        cells = []
        for key in keys:
            low, mid, high = (_fmt(key, spreads[key][k]) for k in ("min", "median", "max"))
            cell = f"{mid} ({low} – {high})"
            ratio_wanted = key in ratios and key != "load_1m"
            if label != comparison.baseline and ratio_wanted and base[key]["median"]:
                cell += f" **{_ratio(spreads[key]['median'] / base[key]['median'])}x**"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def medians_by_params(results: list[dict]) -> dict:
    """``{label: {"<param>-<param>": {figure: median}}}``, e.g. ``["distsampling"]["2-shuffled"]``."""
    medians: dict = {}
    for result in results:
        key = "-".join(str(v) for v in result["params"].values())
        for label, spreads in result["figures"].items():
            medians.setdefault(label, {})[key] = {f: s["median"] for f, s in spreads.items()}
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("stems", nargs="*", help="bench_<stem>.py modules to run (default: all)")
    parser.add_argument("--large", action="store_true", help="add the largest sizes (slow)")
    parser.add_argument("--repeats", type=int, default=5, help="fresh-process runs per contender")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="TEXT",
        help="run only the comparisons whose title holds TEXT (repeatable); the others keep "
        "the figures of the last results, marked as kept",
    )
    args = parser.parse_args()
    stems = args.stems or sorted(p.stem[6:] for p in (ROOT / "benchmarks").glob("bench_*.py"))
    machine = f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {__import__('os').cpu_count()} cores"
    RESULTS.mkdir(exist_ok=True)
    for stem in stems:
        module = importlib.import_module(f"benchmarks.bench_{stem}")
        sections = [
            f"_Measured by `make bench` on {machine}; median (min – max) of {args.repeats} "
            "fresh-process runs (one where a table says its figures are counts); **ratios** of "
            "medians against the table's baseline; `load_1m`: the machine's load average after "
            "each run._\n"
        ]
        results = []  # every figure's min/median/max, for pages and pictures to read
        last = RESULTS / f"{stem}.json"
        kept = {}  # with --only: the last results of the comparisons not run again
        if args.only and last.exists():
            kept = {c["title"]: c for c in json.loads(last.read_text())["comparisons"]}
        for comparison in module.suite(args.large):
            again = not args.only or any(text in comparison.title for text in args.only)
            if not again and comparison.title in kept:
                figures = kept[comparison.title]["figures"]
                comparison.unfinished = kept[comparison.title].get("unfinished", [])
                text = report(comparison, figures) + (
                    "\n_Kept from the last results: `--only` ran the other tables again._\n"
                )
            else:
                figures = measure(comparison, args.repeats)
                text = report(comparison, figures)
            if comparison.unfinished:  # a row left out is said, never silently missing
                text += (f"\n_Left out: {', '.join(comparison.unfinished)} did not finish a "
                         f"run in {comparison.timeout:.0f} s._\n")  # fmt: skip
            print(text, flush=True)
            sections.append(text)
            results.append(
                {"title": comparison.title, "baseline": comparison.baseline}
                | {"params": comparison.params, "figures": figures}
                | {"unfinished": comparison.unfinished}
            )
        Path(RESULTS / f"{stem}.md").write_text("\n".join(sections))
        summary = {"machine": machine, "repeats": args.repeats, "comparisons": results}
        summary["medians"] = medians_by_params(results)  # for the docs' {{ bench(...) }} figures
        Path(RESULTS / f"{stem}.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
