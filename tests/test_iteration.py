"""Properties of distsampling.IterationBasedBatchSampler: exact count, exact resume, new passes."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distsampling import (
    BatchSampler,
    DistributedSampler,
    GroupedBatchSampler,
    IterationBasedBatchSampler,
)
from strategies import batch_sizes, dataset_lengths, flags, group_id_lists, num_iterations


@st.composite
def batch_samplers(draw: st.DrawFn):
    """A non-empty shuffled pipeline: BatchSampler or GroupedBatchSampler over a sampler."""
    groups = draw(group_id_lists.filter(bool))
    sampler = DistributedSampler(
        range(len(groups)), num_replicas=1, rank=0, seed=draw(st.integers(0, 99))
    )
    if draw(flags):
        return GroupedBatchSampler(sampler, groups, draw(batch_sizes))
    return BatchSampler(sampler, draw(batch_sizes), drop_last=False)


class Counting:
    """Wraps a batch sampler and counts how often it is iterated (one count per pass built)."""

    def __init__(self, batch_sampler) -> None:
        self.inner, self.passes = batch_sampler, 0
        self.sampler = batch_sampler.sampler

    def __iter__(self):
        self.passes += 1
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


@given(batch_sampler=batch_samplers(), total=num_iterations, data=st.data())
def test_yields_exactly_num_iterations_minus_start_iter_batches(batch_sampler, total, data):
    """Invariant: the count is exact and equals len(), whatever the pass length."""
    start = data.draw(st.integers(0, total), label="start_iter")
    ibs = IterationBasedBatchSampler(batch_sampler, total, start)
    assert len(list(ibs)) == len(ibs) == total - start


class PassCache:
    """A batch sampler that builds each epoch's pass once and replays it after, read at
    ``.sampler.epoch``: what the batch sampler it wraps yields, since a pass depends on its epoch
    only (test_pass_p_is_the_batch_sampler_at_epoch_p), at a fraction of the cost. The run sees
    the same ``.sampler.set_epoch``, ``len`` and ``iter`` calls, so a ``len`` taken before
    ``set_epoch`` still reads the wrong pass."""

    def __init__(self, batch_sampler) -> None:
        self.inner, self.sampler = batch_sampler, batch_sampler.sampler
        self.passes: dict[int, list[list[int]]] = {}

    def _pass(self) -> list[list[int]]:
        epoch = self.sampler.epoch
        if epoch not in self.passes:
            self.passes[epoch] = list(self.inner)
        return self.passes[epoch]

    def __iter__(self):
        return iter(self._pass())

    def __len__(self) -> int:
        return len(self._pass())


@given(batch_sampler=batch_samplers(), total=num_iterations)
def test_resuming_at_every_k_equals_the_tail_of_the_uninterrupted_run(batch_sampler, total):
    """Invariant: list(IBS(start_iter=k)) == list(IBS(start_iter=0))[k:] for every k."""
    uninterrupted = list(IterationBasedBatchSampler(batch_sampler, total))
    # total + 1 resumed runs of up to total batches each: each pass is built once, then replayed
    cached = PassCache(batch_sampler)
    for k in range(total + 1):
        assert list(IterationBasedBatchSampler(cached, total, k)) == uninterrupted[k:]


@given(batch_sampler=batch_samplers(), total=num_iterations)
def test_pass_p_is_the_batch_sampler_at_epoch_p(batch_sampler, total):
    """Invariant: the run is pass 0, pass 1, ... each read after set_epoch(pass), cut at total."""
    expected, epoch = [], 0
    while len(expected) < total:
        batch_sampler.sampler.set_epoch(epoch)
        expected += list(batch_sampler)
        epoch += 1
    assert list(IterationBasedBatchSampler(batch_sampler, total)) == expected[:total]


def test_consecutive_passes_read_different_orders():
    """Invariant: set_epoch reaches the sampler, so pass 1 is not a replay of pass 0."""
    batches = BatchSampler(DistributedSampler(range(10), 1, 0, seed=3), 5, drop_last=False)
    run = list(IterationBasedBatchSampler(batches, num_iterations=4))
    assert run[:2] != run[2:]
    pass0, pass1 = [i for b in run[:2] for i in b], [i for b in run[2:] for i in b]
    assert sorted(pass0) == sorted(pass1) == list(range(10))


@given(n=dataset_lengths.filter(bool), batch_size=batch_sizes, total=num_iterations, data=st.data())
def test_resume_builds_only_the_passes_it_yields_from(n, batch_size, total, data):
    """Invariant: skipped passes are counted by len, never iterated (no index work, no data)."""
    start = data.draw(st.integers(0, total), label="start_iter")
    counting = Counting(BatchSampler(DistributedSampler(range(n), 1, 0), batch_size, False))
    list(IterationBasedBatchSampler(counting, total, start))
    per_pass = -(-n // batch_size)
    # passes holding iterations start .. total - 1, and none before
    needed = 0 if start == total else (total - 1) // per_pass - start // per_pass + 1
    assert counting.passes == needed


def test_set_epoch_goes_to_the_batch_sampler_when_it_has_one():
    """Invariant: a batch sampler with its own set_epoch gets the pass number, not its .sampler."""
    calls: list[tuple[str, int]] = []

    class Inner:
        def set_epoch(self, epoch: int) -> None:
            calls.append(("sampler", epoch))

    class Outer:
        sampler = Inner()

        def set_epoch(self, epoch: int) -> None:
            calls.append(("batch_sampler", epoch))

        def __iter__(self):
            return iter([[0]])

    list(IterationBasedBatchSampler(Outer(), 3))
    assert calls == [("batch_sampler", 0), ("batch_sampler", 1), ("batch_sampler", 2)]


def test_a_batch_sampler_without_len_is_resumed_exactly_by_counting_its_passes():
    """Invariant: a plain iterable (no len, no set_epoch) still resumes at the right batch."""
    batches = [[0, 1], [2, 3], [4]]
    assert list(IterationBasedBatchSampler(iter_only(batches), 7, 4)) == [[2, 3], [4], [0, 1]]


def iter_only(batches: list[list[int]]):
    """A re-iterable object with neither __len__ nor set_epoch."""

    class Batches:
        def __iter__(self):
            return iter(batches)

    return Batches()


@pytest.mark.parametrize("start_iter", [0, 2])
def test_an_empty_pass_raises_instead_of_looping_forever(start_iter):
    """Invariant: a batch sampler with no batch can never reach num_iterations: a clear error."""
    empty = BatchSampler(DistributedSampler(range(0), 1, 0), 2, drop_last=False)
    with pytest.raises(RuntimeError) as error:
        list(IterationBasedBatchSampler(empty, 5, start_iter))
    assert str(error.value) == (
        "the batch sampler yielded no batch in pass epoch=0, so num_iterations=5 can never be "
        "reached (an empty dataset or rank, or drop_last/drop_uneven dropping everything)"
    )


def test_zero_remaining_iterations_yield_nothing_even_from_an_empty_pass():
    """Invariant: start_iter == num_iterations is a finished run: nothing to do, no error."""
    empty = BatchSampler(DistributedSampler(range(0), 1, 0), 2, drop_last=False)
    assert list(IterationBasedBatchSampler(empty, 5, 5)) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"start_iter": -1}, ValueError, "start_iter should be >= 0, but got start_iter=-1"),
        (
            {"start_iter": 11},
            ValueError,
            "start_iter should be <= num_iterations (the batches already done), "
            "but got start_iter=11, num_iterations=10",
        ),
        (
            {"num_iterations": -1},
            ValueError,
            "num_iterations should be >= 0, but got num_iterations=-1",
        ),
        (
            {"num_iterations": 2.5},
            TypeError,
            "num_iterations should be an integer, but got num_iterations=2.5",
        ),
        (
            {"start_iter": None},
            TypeError,
            "start_iter should be an integer, but got start_iter=None",
        ),
    ],
)
def test_bad_num_iterations_or_start_iter_is_rejected_naming_the_value(kwargs, error, message):
    """Invariant: negative start_iter, start_iter past the end, non-integers: errors naming values."""
    args = {"num_iterations": 10, "start_iter": 0, **kwargs}
    with pytest.raises(error) as info:
        IterationBasedBatchSampler([[0]], **args)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("batch_sampler", [3, None, 1.5])
def test_a_batch_sampler_that_is_not_iterable_is_rejected_naming_it(batch_sampler):
    """Invariant: the batch sampler is checked when the run is built, not at its first batch."""
    with pytest.raises(TypeError) as info:
        IterationBasedBatchSampler(batch_sampler, 3)
    assert str(info.value) == (
        "batch_sampler should be an iterable of batches (lists of indices), "
        f"but got batch_sampler={batch_sampler!r}"
    )


def test_a_run_longer_than_len_can_count_is_rejected_naming_it():
    """Invariant: num_iterations must fit len() (sys.maxsize), or len() would overflow later."""
    with pytest.raises(ValueError, match=rf"num_iterations should be <= {sys.maxsize}, but got"):
        IterationBasedBatchSampler([[0]], sys.maxsize + 1)
    # the bound is exact: sys.maxsize iterations is a run len() can count
    longest = IterationBasedBatchSampler([[0]], sys.maxsize, start_iter=1)
    assert len(longest) == sys.maxsize - 1 and next(iter(longest)) == [0]
