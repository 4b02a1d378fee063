"""The benchmark harness (benchmarks/_harness.py): a contender that runs too long is left out of
its table and named, and the other tables still come out."""

from __future__ import annotations

import statistics
import subprocess
from collections import Counter

import benchmarks._harness as harness
import pytest
from benchmarks._harness import Comparison, measure


def test_a_contender_past_its_timeout_is_left_out_and_named_not_a_crash(monkeypatch):
    """Invariant: ``measure`` never raises for a run past ``timeout``: that contender gets no
    row and is listed in ``unfinished``, and it is started once, not again for the other runs."""
    started = Counter()
    real = harness.run_in_fresh_process

    def counted(target, *args, **kwargs):
        started[target] += 1
        return real(target, *args, **kwargs)

    monkeypatch.setattr(harness, "run_in_fresh_process", counted)
    # a real fresh interpreter that imports torch: never done in a hundredth of a second
    comparison = Comparison(
        "t", {"slow": "bench_mixture:ours_random"}, "slow", runs=3, timeout=0.01
    )
    figures = measure(comparison, repeats=5)
    assert figures == {} and comparison.unfinished == ["slow"]
    assert started == {"bench_mixture:ours_random": 1}  # one try, not three (nor five)


@pytest.mark.parametrize("runs", [None, 1, 3])
def test_the_contenders_that_finish_keep_their_rows_beside_one_left_out(monkeypatch, runs):
    """Invariant: beside a contender past its timeout (started once, then named in
    ``unfinished``), every other contender runs ``runs`` times (``repeats`` where unset),
    interleaved, and its row is the min/median/max of its figures."""
    calls = []

    def fake(target, params, timeout, python):
        calls.append(target)
        if target == "slow":
            raise subprocess.TimeoutExpired(target, timeout)
        return {"seconds": float(len(calls))}

    monkeypatch.setattr(harness, "run_in_fresh_process", fake)
    comparison = Comparison("t", {"a": "fast", "b": "slow"}, "a", runs=runs)
    figures = measure(comparison, repeats=4)
    n = runs or 4
    assert calls == ["fast", "slow"] + ["fast"] * (n - 1)
    assert comparison.unfinished == ["b"]
    seconds = [1.0] + [float(k) for k in range(3, n + 2)]  # the calls each fast run was
    assert list(figures) == ["a"]
    expected = {"min": min(seconds), "median": statistics.median(seconds), "max": max(seconds)}
    assert figures["a"]["seconds"] == expected
