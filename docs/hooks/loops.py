"""mkdocs hook: render the loop matrix on docs/loops.md from the results of the tests.

``make test`` runs the matrix (tests/test_loops.py, tests/test_loops_frameworks.py and the
detection loaders) and writes every cell's outcome to docs/generated/loops.json. This hook
replaces the page's ``<!-- loop-matrix -->`` with a table of those outcomes, the settings and
refusals in words, and each loop's code (pulled from the test that runs it). Nothing on it is
written by hand: the results are one run's, whole (a cell that run did not run is marked so,
and refused here), and a digest of the cells refuses results changed after that run.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "docs" / "generated" / "loops.json"
MARK = "<!-- loop-matrix -->"
#: docs/frameworks.md: one framework column's outcomes, every sampler and dataset a row
OUTCOMES = re.compile(r"<!-- loop-outcomes: (.+?) -->")
#: why a kind has no cell in a framework's column (a Trainer's, accelerate's)
NO_CELL = {
    "endless": "not run: an endless stream has no epoch to end (detectron2's and mmengine's "
    "loops take it)",
    "uneven": "not run: an evaluation split's ranks read unequal counts, which hang a "
    "Trainer's collectives (torchrun's column trains it under join())",
}
SYMBOLS = {"passed": "✓", "setting": "⚙", "warned": "⚑", "silent": "⚠", "refused": "✗",
           "failed": "‼", "not run": "∅"}  # fmt: skip
#: the statuses whose note names the setting that holds and what the default did instead
NEEDS = ("setting", "warned", "silent")

#: the loops in the order of the table, with the test function that runs each (its snippet)
LOOPS = [
    ("DataLoader, batch_size", "tests/test_loops.py", "loop_batches"),
    ("DataLoader, 2 workers, batch_size", "tests/test_loops.py", "loop_batches"),
    ("persistent workers", "tests/test_loops.py", "loop_batches"),
    ("DataLoader, batch_size=None", "tests/test_loops.py", "loop_unbatched"),
    ("torch BatchSampler around it", "tests/test_loops.py", "loop_batch_sampler"),
    ("a peek, then the loop", "tests/test_loops.py", "loop_peek"),
    ("iter() twice", "tests/test_loops.py", "loop_iter_twice"),
    ("break, then the next epoch", "tests/test_loops.py", "loop_break"),
    ("set_epoch after the first batch", "tests/test_loops.py", "loop_late_set_epoch"),
    ("set_epoch after the first batch, 2 workers", "tests/test_loops.py", "loop_late_set_epoch"),
    ("StatefulDataLoader resume", "tests/test_loops.py", "loop_stateful_resume"),
    ("StatefulDataLoader resume, 2 workers", "tests/test_loops.py", "loop_stateful_resume"),
    ("elastic resume, 2 -> 3 ranks", "tests/test_loops.py", "loop_elastic"),
    ("elastic resume, 3 -> 2 ranks", "tests/test_loops.py", "loop_elastic"),
    ("plain DataLoader resume, 2 workers", "tests/test_loops.py", "loop_plain_resume"),
    (
        "growing cache: a shard lands mid-epoch, set_epoch late",
        "tests/test_loops.py",
        "loop_growing",
    ),
    ("Lightning Trainer, 2 processes", "tests/loops_frameworks.py", "lightning_fit"),
    ("Lightning resume from its checkpoint", "tests/loops_frameworks.py", "lightning_resume"),
    ("accelerate, 2 processes", "tests/loops_frameworks.py", "accelerate_train"),
    ("torchrun DDP, 2 ranks", "tests/loops_frameworks.py", "ddp_rank"),
    ("rank check: set_epoch differs on one rank", "tests/loops_frameworks.py", "rank_check_rank"),
    ("detectron2's training loader", "tests/test_detection_loaders.py", "detectron2"),
    ("detectron2's loader, resumed", "tests/test_detection_loaders.py", "detectron2_resume"),
    ("mmengine Runner", "tests/test_detection_loaders.py", "mmengine"),
]


def _loops_module():
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import loops
    finally:
        sys.path.pop(0)
    return loops


def expected_cells() -> set[tuple[str, str]]:
    """Every (sampler, loop) the tests run, from the tests themselves."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        return _loops_module().expected_cells()
    finally:
        sys.path.pop(0)


def load(path: Path) -> list[dict]:
    """The cells of one run's results, refused if changed since that run wrote them."""
    return _loops_module().verified(json.loads(path.read_text()))


def _counts(cells: list[dict]) -> str:
    """The cells' statuses counted, in words: ``391 ✓, 36 ⚙, ...`` (every mark, 0 too)."""
    counts = {s: sum(c["status"] == s for c in cells) for s in SYMBOLS}
    return ", ".join(f"{counts[s]} {SYMBOLS[s]}" for s in SYMBOLS)


def render(cells: list[dict]) -> str:
    loops = _loops_module()
    by = {(c["sampler"], c["loop"]): c for c in cells}
    names = sorted({c["sampler"] for c in cells}, key=_order)
    head = "| sampler | " + " | ".join(
        f"[{loop}](#loop-{i})" for i, (loop, *_) in enumerate(LOOPS, 1)
    )
    lines = [
        '<div class="loop-matrix" markdown>',
        "",
        head + " |",
        "| --- |" + " :-: |" * len(LOOPS),
    ]
    for name in names:
        row = [f"`{name}`"]
        for i, (loop, *_) in enumerate(LOOPS, 1):
            cell = by.get((name, loop))
            if cell is None:
                row.append("·")
                continue
            tip = (cell["note"] or cell["status"]).replace('"', "'").replace("|", "/")
            row.append(f'[{SYMBOLS[cell["status"]]}](#loop-{i} "{tip}")')
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "</div>"]
    refs = {e.name for e in loops.ENTRIES if e.reference is not None}
    exported = [c for c in cells if c["sampler"] not in refs]
    reference = [c for c in cells if c["sampler"] in refs]
    lines += ["", f"{len(names)} rows ({len(names) - len(refs)} exported classes, {len(refs)} "
              f"reference classes), {len(LOOPS)} loops, {len(cells)} cells. The exported classes: "
              f"{_counts(exported)}. The reference classes: {_counts(reference)}."]  # fmt: skip
    lines += ["", "## The rows", ""]
    for entry in (e for e in loops.ENTRIES if e.name in names):
        what = f"`{entry.name}`: {entry.setup}"
        if entry.reference is not None:
            module = entry.name.split(".")[0]
            what += (f"; the class of `distsampling/{module}.py`, the reference copy, beside "
                     f"the exported `{entry.reference}`")  # fmt: skip
        lines.append(f"- {what}.")
    lines += ["", "## What each setting and refusal says", ""]
    for name in names:
        notes = [(i, loop, by[(name, loop)]) for i, (loop, *_) in enumerate(LOOPS, 1)
                 if (name, loop) in by and by[(name, loop)]["status"] in (*NEEDS, "refused")]  # fmt: skip
        for i, loop, cell in notes:
            what = {"refused": "refuses, saying", "silent": "is silent"}.get(
                cell["status"], "needs"
            )
            what = f"{SYMBOLS[cell['status']]} {what}"
            lines.append(f"- `{name}` in [{loop}](#loop-{i}) {what}: {cell['note']}")
    lines += ["", "## The loops", ""]
    for i, (loop, path, section) in enumerate(LOOPS, 1):
        lines += [f"### {i}. {loop} {{#loop-{i}}}", "", "```python", f'--8<-- "{path}:{section}"',
                  "```", ""]  # fmt: skip
    return "\n".join(lines)


def _order(name: str) -> tuple[int, str]:
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from loops import ENTRIES
    finally:
        sys.path.pop(0)
    order = [e.name for e in ENTRIES]
    return (order.index(name) if name in order else len(order), name)


def render_outcomes(cells: list[dict], loop: str) -> str:
    """One framework column as a table: every row of the matrix, what the framework's
    defaults did with it, and the setting that holds where they did not."""
    loops = _loops_module()
    by = {(c["sampler"], c["loop"]): c for c in cells}
    lines = ["| sampler or dataset | with the defaults | |", "| --- | :-: | --- |"]
    for entry in loops.ENTRIES:
        cell = by.get((entry.name, loop))
        if cell is None:
            why = NO_CELL["endless" if entry.kind == "endless" else "uneven"]
            lines.append(f"| `{entry.name}` | · | {why} |")
            continue
        note = cell["note"].replace("|", "/")
        if cell["status"] == "passed":
            note = "each rank trains on exactly its plan, every epoch"
        elif cell["status"] in NEEDS:
            setting, _, default = note.partition("; ")
            note = f"{default[0].upper()}{default[1:]}. Holds with: {setting}"
        lines.append(f"| `{entry.name}` | {SYMBOLS[cell['status']]} | {note} |")
    return "\n".join(lines)


def _results(pending: bool) -> tuple[list[dict], str | None]:
    """The cells of the results, and why the pages cannot show them yet (None: they can)."""
    if not RESULTS.exists():
        if pending:
            return [], "missing"
        raise RuntimeError(
            f"{RESULTS.relative_to(ROOT)} is missing: the loop matrix is rendered from the "
            "results of its tests; run `make loops` (or `make test`) first"
        )
    cells = load(RESULTS)  # a changed cell refuses, pending or not
    missing = expected_cells() - {(c["sampler"], c["loop"]) for c in cells}
    not_run = sorted((c["sampler"], c["loop"]) for c in cells if c["status"] == "not run")
    if (missing or not_run) and pending:
        return cells, "due"
    if missing:
        raise RuntimeError(
            f"the loop matrix's results lack {len(missing)} cells the tests run (e.g. "
            f"{sorted(missing)[0]}): run `make loops` (or `make test`) again"
        )
    if not_run:
        raise RuntimeError(
            f"the loop matrix's results hold {len(not_run)} cells that the run which wrote them "
            f"did not run (deselected, skipped, or a fixture failed; e.g. {not_run[0]}): run "
            "`make loops` (or `make test`) whole"
        )
    return cells, None


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARK not in markdown and not OUTCOMES.search(markdown):
        return markdown
    # a build inside `make test` itself (tests/test_site.py): the results come at its end
    pending = os.environ.get("DISTSAMPLING_LOOPS_PENDING") == "1"
    cells, due = _results(pending)
    note = '!!! warning "The results are due"\n    Run `make loops` to fill this table.\n'
    if MARK in markdown:
        table = render(cells) if cells else ""
        markdown = markdown.replace(MARK, note + table if due else table)
    return OUTCOMES.sub(
        lambda m: (
            note
            if due and not cells
            else (note if due else "") + render_outcomes(cells, m.group(1))
        ),
        markdown,
    )
