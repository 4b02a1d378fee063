"""The measuring side of the benchmarks: fresh processes, min/median/max, peak memory, ratios.

A contender is a function ``fn(timer, **params) -> dict | None`` in a ``bench_*`` module. It
does its set-up, then calls ``timer.start()`` right before the measured work, ``timer.first()``
when the first result is out (optional), and ``timer.stop()`` after the last. It may return
extra figures (for example ``{"MB/s": ...}``), reported as medians too.

Peak memory growth is measured by the kernel: ``timer.start()`` resets the process's peak
resident set size (``/proc/self/clear_refs``) and ``timer.stop()`` reads it back (``VmHWM``),
minus the resident size at the start. It counts what torch and numpy allocate in C too.

Every figure is kept as ``{"min", "median", "max"}`` over the repeats, and every run records the
machine's 1-minute load average right after it (``load_1m``): a figure taken while the machine
was busy says so itself.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _status_kib(key: str) -> int:
    return int(re.search(rf"{key}:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


class Timer:
    """Marks the measured span inside a contender (see the module docstring)."""

    def __init__(self) -> None:
        self.t0 = self.t_first = self.t_end = None
        self.rss0 = self.peak = 0

    def start(self) -> None:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS to the current RSS
        self.rss0 = _status_kib("VmRSS")
        self.t0 = time.perf_counter()

    def first(self) -> None:
        if self.t_first is None:
            self.t_first = time.perf_counter()

    def stop(self) -> None:
        self.t_end = time.perf_counter()
        self.peak = _status_kib("VmHWM")

    def figures(self) -> dict[str, float]:
        first = self.t_first if self.t_first is not None else self.t_end
        return {
            "time_s": self.t_end - self.t0,
            "first_s": first - self.t0,
            "peak_MiB": max(self.peak - self.rss0, 0) / 1024,
        }


def time_epoch(timer: Timer, build: Callable[[], Iterable]) -> None:
    """Time one epoch: ``build()`` (inside the span, if it builds), ``iter``, first item, the rest."""
    timer.start()
    it = iter(build())
    next(it)
    timer.first()
    for _ in it:
        pass
    timer.stop()


@dataclass
class Comparison:
    """One row group of the report: contenders run on the same params, ratios against baseline."""

    title: str
    contenders: dict[str, str]  # label -> "bench_module:function"
    baseline: str  # the label the ratios divide by
    params: dict = field(default_factory=dict)
    note: str = ""
    columns: tuple[str, ...] = ()  # the figures to report (default: all)
    ratios: tuple[str, ...] | None = None  # the figures with a ratio to the baseline (default: all)
    python: str | None = None  # the interpreter its contenders run in (default: this one)
    runs: int | None = None  # fresh-process runs a contender (default: --repeats); 1 for counts
    timeout: float = 600  # seconds a run may take; a contender past it is left out, and said so
    unfinished: list[str] = field(default_factory=list)  # filled by measure(): the ones left out


def run_in_fresh_process(
    target: str, params: dict, timeout: float = 600, python: str | None = None
) -> dict[str, float]:
    """Run one contender once in a new interpreter (``python``, default this one's); its figures."""
    proc = subprocess.run(
        [python or sys.executable, "-m", "benchmarks._harness", target, json.dumps(params)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{target}({params}) failed:\n{proc.stderr}")
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**figures, "load_1m": os.getloadavg()[0]}


Spread = dict[str, float]  # {"min": ..., "median": ..., "max": ...} over the repeats


def spread(values: Iterable[float]) -> Spread:
    values = list(values)
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def measure(comparison: Comparison, repeats: int) -> dict[str, dict[str, Spread]]:
    """Min/median/max of ``repeats`` fresh-process runs for each contender (``comparison.runs``
    where set: figures that are counts come out the same every run), runs interleaved. A
    contender whose run passes ``comparison.timeout`` is left out and named in ``unfinished``."""
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in comparison.contenders}
    comparison.unfinished = []
    for _ in range(comparison.runs or repeats):  # interleaved: drift in the machine hits all
        for label, target in comparison.contenders.items():
            if label in comparison.unfinished:
                continue
            try:
                runs[label].append(run_in_fresh_process(
                    target, comparison.params, comparison.timeout, comparison.python
                ))  # fmt: skip
            except subprocess.TimeoutExpired:
                comparison.unfinished.append(label)
    return {label: {key: spread(r[key] for r in rs) for key in rs[0]}
            for label, rs in runs.items() if label not in comparison.unfinished}  # fmt: skip


def _child(target: str, params_json: str) -> None:
    module_name, function = target.split(":")
    fn = getattr(importlib.import_module(f"benchmarks.{module_name}"), function)
    timer = Timer()
    extra = fn(timer, **json.loads(params_json)) or {}
    assert timer.t_end is not None, f"{target} never called timer.stop()"
    print(json.dumps({**timer.figures(), **extra}))


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
