"""mkdocs hook: measured figures quoted in prose come from the last ``make bench`` results.

A page never types a measurement by hand. It writes a placeholder instead, which this hook
replaces with the number read from ``benchmarks/results/<name>.json`` at every build:

- ``{{ bench("growing", "medians", "distsampling", "0-sequential", "MB/s", unit="GB/s") }}``: the value at
  that key path, formatted in ``unit`` (``GB/s``/``MB/s`` from MB/s, ``ms`` from seconds, ``x``
  for a plain ratio);
- ``{{ ratio("growing", ["medians", "distsampling", "0-sequential", "MB/s"], ["medians", "naive npy", "0",
  "MB/s"]) }}``: the first value over the second, as ``3.7`` (``digits=2``: ``3.71``).

A placeholder naming a file or key that does not exist stops the build, naming both. Tables of
results are included whole with ``--8<-- "benchmarks/results/<name>.md"``.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "results"
PLACEHOLDER = re.compile(r"\{\{\s*(?P<call>(?:bench|ratio)\(.*?\))\s*\}\}", re.S)
UNITS = {
    "GB/s": lambda v: f"{v / 1000:.1f} GB/s",  # from MB/s
    "MB/s": lambda v: f"{v:,.0f} MB/s",
    "ms": lambda v: f"{v * 1000:.0f} ms",  # from seconds
    "x": lambda v: f"{v:.1f}",
}


def lookup(name: str, keys: list[str]) -> float:
    """The number at ``keys`` in ``benchmarks/results/<name>.json``."""
    path = RESULTS / f"{name}.json"
    if not path.exists():
        raise ValueError(f"no results file {path.name}: run `make bench`")
    value = json.loads(path.read_text())
    for k, key in enumerate(keys):
        if not isinstance(value, dict) or key not in value:
            raise ValueError(f"{path.name} has no key {keys[: k + 1]}")
        value = value[key]
    return float(value)


def bench(name: str, *keys: str, unit: str = "x") -> str:
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {sorted(UNITS)}, got {unit!r}")
    return UNITS[unit](lookup(name, list(keys)))


def ratio(name: str, over: list[str], under: list[str], digits: int = 1) -> str:
    return f"{lookup(name, over) / lookup(name, under):.{digits}f}"


def render(markdown: str, where: str = "page") -> str:
    """``markdown`` with every placeholder replaced by its figure."""

    def figure(m: re.Match) -> str:
        call = ast.parse(m["call"], mode="eval").body
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        try:
            return {"bench": bench, "ratio": ratio}[call.func.id](*args, **kwargs)
        except ValueError as e:
            raise ValueError(f"{where}: {m.group(0)}: {e}") from None

    return PLACEHOLDER.sub(figure, markdown)


def on_page_markdown(markdown, page, **kwargs):
    return render(markdown, page.file.src_path)
