"""run_world's own contract: results in rank order, errors surfaced, bad input rejected."""

from __future__ import annotations

import pytest

from distsampling import run_world

pytestmark = [pytest.mark.multiprocess, pytest.mark.xdist_group("worlds")]


def test_a_failing_rank_is_reported_with_its_output():
    """Invariant: an exception on a rank ends the world with RuntimeError naming the rank and showing its error."""
    with pytest.raises(RuntimeError, match=r"(?s)rank \d failed.*math domain error"):
        run_world("math:sqrt", 2, -1.0, timeout=60)


@pytest.mark.parametrize("world_size", [0, -1])
def test_world_size_below_one_is_rejected(world_size):
    """Invariant: a world needs at least one process; the error names the value."""
    with pytest.raises(
        ValueError, match=f"world_size should be >= 1, but got world_size={world_size}"
    ):
        run_world("torch.distributed:get_rank", world_size)
