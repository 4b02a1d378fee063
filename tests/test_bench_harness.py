"""The benchmark harness (benchmarks/_harness.py): a contender that runs too long is left out of
its table and named, and the other tables still come out."""

from __future__ import annotations

import time

from benchmarks._harness import Comparison, measure


def test_a_contender_past_its_timeout_is_left_out_and_named_not_a_crash():
    """Invariant: ``measure`` never raises for a run past ``timeout``: that contender gets no
    row and is listed in ``unfinished``, and it is not started again for the other runs."""
    # a real fresh interpreter that imports torch: never done in a hundredth of a second
    comparison = Comparison(
        "t", {"slow": "bench_mixture:ours_random"}, "slow", runs=3, timeout=0.01
    )
    t0 = time.perf_counter()
    figures = measure(comparison, repeats=5)
    assert figures == {} and comparison.unfinished == ["slow"]
    assert time.perf_counter() - t0 < 5  # one try, not three (nor five)
