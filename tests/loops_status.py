"""The loop matrix's expected statuses: every cell's, committed in ``loops_expected.json``.

Each test of the single-process and framework matrices (``tests/test_loops.py``,
``tests/test_loops_frameworks.py``) compares its cell's status with the committed one
(``expect``), so a cell whose status moves fails until that file moves with it, in review.
To move it on purpose: ``DISTSAMPLING_LOOPS_OBSERVE=1 make loops`` (the cells record what
they show without comparing), then ``python tests/loops_status.py --expected`` (writes the file
from that run's results, ``docs/generated/loops.json``; the diff is the change to review).
The detection loaders' cells (``tests/test_detection_loaders.py``) are not held here.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from loops import NOT_RUN, expected_cells, verified

#: the loops whose cells another file's tests run (tests/test_detection_loaders.py)
DETECTION_LOOPS = {
    "detectron2's training loader",
    "detectron2's loader, resumed",
    "mmengine Runner",
}
#: every cell's expected status, committed: a change of status is a reviewed change of this file
EXPECTED = Path(__file__).with_name("loops_expected.json")


def matrix_cells() -> set[tuple[str, str]]:
    """The cells of the single-process and the framework matrices (this file's rows), whose
    statuses ``EXPECTED`` holds."""
    return {(s, loop) for s, loop in expected_cells() if loop not in DETECTION_LOOPS}


def expected_statuses() -> dict[str, dict[str, str]]:
    """``EXPECTED``'s statuses: sampler -> loop -> status."""
    return json.loads(EXPECTED.read_text())["statuses"]


#: set to 1, the cells record what they show without comparing it (for ``--expected`` to write)
OBSERVE = "DISTSAMPLING_LOOPS_OBSERVE"


def expect(sampler: str, loop: str, status: str) -> None:
    """Invariant: the cell's status is the one ``EXPECTED`` holds for it (unless ``OBSERVE``
    is set: a run that records the statuses for ``write_expected``, to be reviewed)."""
    if os.environ.get(OBSERVE) == "1":
        return
    want = expected_statuses().get(sampler, {}).get(loop)
    assert status == want, (
        f"{sampler} in {loop!r}: {status}, but {EXPECTED.name} expects {want}. A change of status "
        f"is a change of that file: `{OBSERVE}=1 make loops`, then `python tests/loops_status.py "
        "--expected` writes it from that run, for review"
    )


def write_expected(results_path: Path) -> None:
    """Write ``EXPECTED`` from one run's results (``docs/generated/loops.json``), whole: every
    cell of ``matrix_cells()``, each run and none failed."""
    cells = {
        (c["sampler"], c["loop"]): c["status"]
        for c in verified(json.loads(results_path.read_text()))
    }
    bad = sorted(k for k in matrix_cells() if cells.get(k) in (None, NOT_RUN, "failed"))
    if bad:
        raise SystemExit(
            f"{len(bad)} cells not run or failed (e.g. {bad[0]}): run `make loops` whole"
        )
    statuses: dict[str, dict[str, str]] = {}
    for sampler, loop in sorted(matrix_cells()):
        statuses.setdefault(sampler, {})[loop] = cells[(sampler, loop)]
    EXPECTED.write_text(json.dumps({"statuses": statuses}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":  # python tests/loops_status.py --expected: EXPECTED from the latest run
    if sys.argv[1:] != ["--expected"]:
        raise SystemExit("usage: python tests/loops_status.py --expected")
    write_expected(Path(__file__).resolve().parent.parent / "docs" / "generated" / "loops.json")
