"""The errors page (docs/errors.md): every public sampler and function has its errors listed.

``tests/test_docs.py`` runs each ``>>>`` call of the page and compares the message with the
text, so no listed message goes stale; this file checks that none is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

import distsampling

PAGE = Path(__file__).resolve().parent.parent / "docs" / "errors.md"
#: public names with no argument a user can get wrong here, or listed on their own pages
NOT_LISTED = {
    # the growing-dataset classes: their errors are taught in docs/tutorials/growing.md
    "CorruptShardError",
    "Producer",
    "RemoteSource",
    "ShardCache",
    "Snapshot",
    "SnapshotDataset",
    "collate_batch",
    "load_shard",
    "prefetch_epochs",
    "produce",
    # collectives over a live process group, and the check's own error class
    "RankMismatchError",
    "assert_rank_consistent",
    "epoch_digest",
    "gather_by_index",
}


def test_every_public_sampler_and_function_is_called_on_the_errors_page():
    """Invariant: each public name (but the few above) is called on a ``>>>`` line of the page,
    where test_docs checks its error message, so a reader finds the errors of what they import."""
    lines = re.findall(r"^>>> (.*)$", PAGE.read_text(), re.M)
    called = {name for line in lines for name in re.findall(r"\b(\w+)\(", line)}
    missing = sorted(set(distsampling.__all__) - NOT_LISTED - called)
    assert not missing, f"docs/errors.md calls none of {missing}"
