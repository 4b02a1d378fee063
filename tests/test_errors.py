"""The errors page (docs/errors.md): every public sampler and function has its errors listed.

``tests/test_docs.py`` runs each ``>>>`` call of the page and compares the message with the
text, so no listed message goes stale; this file checks that none is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

import distsampling
import distsampling.growing

PAGE = Path(__file__).resolve().parent.parent / "docs" / "errors.md"
#: public names whose errors are not listed: the growing-dataset classes (taught with their
#: errors in docs/tutorials/growing.md), the rank-consistency check (its RankMismatchError is
#: taught in docs/tutorials/ddp.md) and gather_by_index, a collective over a live group
NOT_LISTED = set(distsampling.growing.__all__) | {
    "RankMismatchError",
    "FrameworkWarning",  # a warning's category: nothing calls it
    "assert_rank_consistent",
    "epoch_digest",
    "gather_by_index",
    "shared_random_seed",  # takes no argument: nothing to call it wrongly with
    "Resumable",  # a mixin, never called itself: the page shows a class that forgets _identity()
}


def test_every_public_sampler_and_function_is_called_on_the_errors_page():
    """Invariant: each public name (but the few above) is called on a ``>>>`` line of the page,
    where test_docs checks its error message, so a reader finds the errors of what they import."""
    lines = re.findall(r"^>>> (.*)$", PAGE.read_text(), re.M)
    called = {name for line in lines for name in re.findall(r"\b(\w+)\(", line)}
    missing = sorted(set(distsampling.__all__) - NOT_LISTED - called)
    assert not missing, f"docs/errors.md calls none of {missing}"
