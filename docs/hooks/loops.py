"""mkdocs hook: render the loop matrix on docs/loops.md from the results of the tests.

``make test`` runs the matrix (tests/test_loops.py, tests/test_loops_frameworks.py and the
detection loaders) and writes every cell's outcome to docs/generated/loops.json. This hook
replaces the page's ``<!-- loop-matrix -->`` with a table of those outcomes, the settings and
refusals in words, and each loop's code (pulled from the test that runs it). Nothing on it is
written by hand: a cell that no test ran is an error here, so the page is never stale.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "docs" / "generated" / "loops.json"
MARK = "<!-- loop-matrix -->"
SYMBOLS = {"passed": "✓", "setting": "⚙", "refused": "✗", "failed": "‼"}

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
    ("Lightning Trainer, 2 processes", "tests/loops_frameworks.py", "lightning_fit"),
    ("Lightning resume from its checkpoint", "tests/loops_frameworks.py", "lightning_resume"),
    ("accelerate, 2 processes", "tests/loops_frameworks.py", "accelerate_rank"),
    ("torchrun DDP, 2 ranks", "tests/loops_frameworks.py", "ddp_rank"),
    ("rank check: set_epoch differs on one rank", "tests/loops_frameworks.py", "rank_check_rank"),
    ("detectron2's training loader", "tests/test_detection_loaders.py", "detectron2"),
    ("detectron2's loader, resumed", "tests/test_detection_loaders.py", "detectron2_resume"),
    ("mmengine Runner", "tests/test_detection_loaders.py", "mmengine"),
]


def expected_cells() -> set[tuple[str, str]]:
    """Every (sampler, loop) the tests run, from the tests themselves."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import test_loops
        import test_loops_frameworks as fw
        from loops import ACCELERATE, LIGHTNING, LIGHTNING_RESUME, RANK_CHECK, TORCHRUN
    finally:
        sys.path.pop(0)
    cells = set(test_loops.CELLS)
    cells |= {(n, LIGHTNING) for n in fw.TRAINED} | {(n, LIGHTNING_RESUME) for n in fw.RESUMABLE}
    cells |= {(n, ACCELERATE) for n in fw.EPOCHAL} | {(n, TORCHRUN) for n in fw.DDP}
    cells |= {(n, RANK_CHECK) for n in fw.CHECKED}
    for kind in ("InfiniteSampler", "RepeatFactorSampler"):
        cells |= {(kind, "detectron2's training loader"), (kind, "detectron2's loader, resumed")}
    return cells | {("InfiniteSampler", "mmengine Runner")}


def render(cells: list[dict]) -> str:
    by = {(c["sampler"], c["loop"]): c for c in cells}
    names = sorted({c["sampler"] for c in cells}, key=_order)
    head = "| sampler | " + " | ".join(f"[{i}](#loop-{i})" for i in range(1, len(LOOPS) + 1))
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
    counts = {s: sum(c["status"] == s for c in cells) for s in SYMBOLS}
    lines += ["", f"{len(names)} samplers and datasets, {len(LOOPS)} loops, {len(cells)} cells: "
              f"{counts['passed']} pass as written, {counts['setting']} with a named setting, "
              f"{counts['refused']} refused with a clear error, {counts['failed']} failed."]  # fmt: skip
    lines += ["", "## What each setting and refusal says", ""]
    for name in names:
        notes = [(i, loop, by[(name, loop)]) for i, (loop, *_) in enumerate(LOOPS, 1)
                 if (name, loop) in by and by[(name, loop)]["status"] in ("setting", "refused")]  # fmt: skip
        for i, loop, cell in notes:
            what = "needs" if cell["status"] == "setting" else "refuses, saying"
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


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARK not in markdown:
        return markdown
    cells = json.loads(RESULTS.read_text())["cells"] if RESULTS.exists() else []
    missing = expected_cells() - {(c["sampler"], c["loop"]) for c in cells}
    if missing and os.environ.get("DISTSAMPLING_LOOPS_PENDING") == "1":
        # a build inside `make test` itself (tests/test_site.py): the results come at its end
        note = '!!! warning "The results are due"\n    Run `make loops` to fill this table.\n'
        return markdown.replace(MARK, note + (render(cells) if cells else ""))
    if not RESULTS.exists():
        raise RuntimeError(
            f"{RESULTS.relative_to(ROOT)} is missing: the loop matrix is rendered from the "
            "results of its tests; run `make loops` (or `make test`) first"
        )
    if missing:
        raise RuntimeError(
            f"the loop matrix's results lack {len(missing)} cells the tests run (e.g. "
            f"{sorted(missing)[0]}): run `make loops` (or `make test`) again"
        )
    return markdown.replace(MARK, render(cells))
