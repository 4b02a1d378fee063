"""A sweep of every public sampler and function for the errors that do not name their argument.

docs/errors.md promises that every bad argument fails with an error naming the argument and its
value. The tests next to each class check the values a user is expected to get wrong; this file
draws the ones that slip past such tests, for every integer argument of every public name at
once: integers past int64 (numpy's and torch's arithmetic overflows there), numpy's integer
types, unsigned ones included (where a Python int works, each must give the same result), and
``None`` (or a non-iterable) returned by a user's callback. (BatchSampler is left out: it
refuses what torch's refuses, numpy's integers included, and takes what torch's takes.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from distsampling import (
    BatchBalanceClassSampler,
    DistributedSampler,
    DistributedSamplerWrapper,
    GroupedBatchSampler,
    IndexShuffleSampler,
    InferenceSampler,
    InfiniteSampler,
    IterationBasedBatchSampler,
    RepeatFactorSampler,
    ResumableDistributedSampler,
    ResumableIndexShuffleSampler,
    ResumableUnpaddedDistributedSampler,
    ResumableWeightedBalanceClassSampler,
    SequentialWindowedDataset,
    ShardedIterableDataset,
    TokenBudgetBatchSampler,
    UnpaddedDistributedSampler,
    WeightedBalanceClassSampler,
    aspect_ratios,
    epoch_key,
    epoch_offset,
    epoch_permutation,
    index_shuffle,
    index_unshuffle,
    inference_shard,
    largest_remainder_counts,
    make_batch_data_sampler,
    make_data_sampler,
    merge_by_index,
    rank_positions,
    resumed_positions,
    split_sizes,
    window_indices,
)
from distsampling.growing import prefetch_epochs


def run(obj: object) -> object:
    """What a loop sees first: the length and the first item of a sampler or a dataset (a
    tensor as its list)."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (range, tuple, list, int)):
        return obj
    if not hasattr(obj, "__iter__"):  # a map-style dataset
        return len(obj), obj[0]
    first = next(iter(obj), None)
    first = first.tolist() if hasattr(first, "tolist") else first
    return (len(obj) if hasattr(obj, "__len__") else None), first


def _read(shard: int) -> range:
    return range(3)


def _sharded(**kwargs: object) -> ShardedIterableDataset:
    args = {"shards": [0, 1], "sizes": [3, 3], "read": _read, "num_replicas": 2, "rank": 0}
    return ShardedIterableDataset(**{**args, **kwargs})


def _epoch(sampler: object, epoch: object) -> object:
    sampler.set_epoch(epoch)
    return sampler


W = {"num_replicas": 2, "rank": 0}
LABELS, WEIGHT = [0, 1] * 8, [1, 1]
#: (argument named in the error, a valid value, the call with the value as that argument)
CASES: dict[str, tuple[str, int, Callable[[object], object]]] = {
    "DistributedSampler.num_replicas": ("num_replicas", 2, lambda v: DistributedSampler(range(10), v, 0)),
    "DistributedSampler.rank": ("rank", 1, lambda v: DistributedSampler(range(10), 2, v)),
    "DistributedSampler.seed": ("seed", 3, lambda v: DistributedSampler(range(10), 2, 0, seed=v)),
    "DistributedSampler.set_epoch": ("epoch", 3, lambda v: _epoch(DistributedSampler(range(10), 2, 0), v)),
    "IndexShuffleSampler.num_replicas": ("num_replicas", 2, lambda v: IndexShuffleSampler(range(10), v, 0)),
    "IndexShuffleSampler.seed": ("seed", 3, lambda v: IndexShuffleSampler(range(10), 2, 0, seed=v)),
    "IndexShuffleSampler.set_epoch": ("epoch", 3, lambda v: _epoch(IndexShuffleSampler(range(10), 2, 0), v)),
    "ResumableDistributedSampler.num_replicas": ("num_replicas", 2, lambda v: ResumableDistributedSampler(range(10), v, 0)),
    "ResumableIndexShuffleSampler.rank": ("rank", 1, lambda v: ResumableIndexShuffleSampler(range(10), 2, v)),
    "ResumableIndexShuffleSampler.set_epoch": ("epoch", 3, lambda v: _epoch(ResumableIndexShuffleSampler(range(10), 2, 0), v)),
    "UnpaddedDistributedSampler.num_replicas": ("num_replicas", 3, lambda v: UnpaddedDistributedSampler(range(10), v, 0)),
    "ResumableUnpaddedDistributedSampler.seed": ("seed", 3, lambda v: ResumableUnpaddedDistributedSampler(range(10), 2, 0, seed=v)),
    "DistributedSamplerWrapper.num_replicas": ("num_replicas", 2, lambda v: DistributedSamplerWrapper(range(10), v, 0)),
    "DistributedSamplerWrapper.seed": ("seed", 3, lambda v: DistributedSamplerWrapper(range(10), 2, 0, seed=v)),
    "InferenceSampler.num_replicas": ("num_replicas", 3, lambda v: InferenceSampler(range(10), v, 0)),
    "InfiniteSampler.seed": ("seed", 3, lambda v: InfiniteSampler(range(10), 2, 0, seed=v)),
    "InfiniteSampler.num_replicas": ("num_replicas", 3, lambda v: InfiniteSampler(range(10), v, 0, seed=0)),
    "RepeatFactorSampler.seed": ("seed", 3, lambda v: RepeatFactorSampler([1.0, 2.5], 2, 0, seed=v)),
    "RepeatFactorSampler.num_replicas": ("num_replicas", 3, lambda v: RepeatFactorSampler([1.0, 2.5], v, 0, seed=0)),
    "SequentialWindowedDataset.size": ("size", 10, lambda v: SequentialWindowedDataset(v, 3)),
    "SequentialWindowedDataset.window": ("window", 3, lambda v: SequentialWindowedDataset(10, v)),
    "SequentialWindowedDataset.seed": ("seed", 3, lambda v: SequentialWindowedDataset(10, 3, seed=v)),
    "window_indices.starts": ("starts", 4, lambda v: window_indices([v], 3, 10)),
    "window_indices.window": ("window", 3, lambda v: window_indices([4], v, 10)),
    "window_indices.size": ("size", 10, lambda v: window_indices([4], 3, v)),
    "epoch_offset.size": ("size", 10, lambda v: epoch_offset(v, 0, 1)),
    "epoch_offset.seed": ("seed", 3, lambda v: epoch_offset(10, v, 1)),
    "epoch_offset.epoch": ("epoch", 3, lambda v: epoch_offset(10, 0, v)),
    "epoch_permutation.n": ("n", 10, lambda v: epoch_permutation(v, True, 0, 0)),
    "epoch_permutation.epoch": ("epoch", 3, lambda v: epoch_permutation(10, True, 0, v)),
    "rank_positions.n": ("n", 10, lambda v: rank_positions(v, 2, 0)),
    "rank_positions.num_replicas": ("num_replicas", 2, lambda v: rank_positions(10, v, 0)),
    "split_sizes.num_replicas": ("num_replicas", 3, lambda v: split_sizes(10, v, False)),
    "resumed_positions.start": ("start", 4, lambda v: resumed_positions(10, 2, 0, v)),
    "resumed_positions.n": ("n", 10, lambda v: resumed_positions(v, 2, 0, 4)),
    "index_shuffle.positions": ("positions", 4, lambda v: index_shuffle([v], 10, 0)),
    "index_shuffle.n": ("n", 10, lambda v: index_shuffle([4], v, 0)),
    "index_shuffle.seed": ("seed", 3, lambda v: index_shuffle([4], 10, v)),
    "index_unshuffle.indices": ("indices", 4, lambda v: index_unshuffle([v], 10, 0)),
    "epoch_key.seed": ("seed", 3, lambda v: epoch_key(v, 1)),
    "epoch_key.epoch": ("epoch", 3, lambda v: epoch_key(0, v)),
    "inference_shard.n": ("n", 10, lambda v: inference_shard(v, 3, 1)),
    "TokenBudgetBatchSampler.max_tokens": ("max_tokens", 12, lambda v: TokenBudgetBatchSampler([2, 7, 3, 8], v, **W)),
    "TokenBudgetBatchSampler.max_tokens.sum": ("max_tokens", 12, lambda v: TokenBudgetBatchSampler([2, 7, 3, 8], v, cost="sum", **W)),
    "TokenBudgetBatchSampler.num_buckets": ("num_buckets", 2, lambda v: TokenBudgetBatchSampler([2, 7, 3, 8], 12, num_buckets=v, **W)),
    "TokenBudgetBatchSampler.max_batch_size": ("max_batch_size", 2, lambda v: TokenBudgetBatchSampler([2, 7, 3, 8], 12, max_batch_size=v, **W)),
    "TokenBudgetBatchSampler.max_batch_size.sum": ("max_batch_size", 2, lambda v: TokenBudgetBatchSampler([2, 7, 3, 8], 12, cost="sum", max_batch_size=v, **W)),
    "TokenBudgetBatchSampler.lengths": ("lengths[1]", 5, lambda v: TokenBudgetBatchSampler([2, v, 3], 12, **W)),
    "TokenBudgetBatchSampler.seed": ("seed", 3, lambda v: TokenBudgetBatchSampler([2, 7, 3, 8], 12, seed=v, **W)),
    "TokenBudgetBatchSampler.set_epoch": ("epoch", 3, lambda v: _epoch(TokenBudgetBatchSampler([2, 7, 3, 8], 12, **W), v)),
    "ShardedIterableDataset.sizes": ("sizes[1]", 3, lambda v: _sharded(sizes=[3, v])),
    "ShardedIterableDataset.num_replicas": ("num_replicas", 2, lambda v: _sharded(num_replicas=v)),
    "ShardedIterableDataset.seed": ("seed", 3, lambda v: _sharded(seed=v)),
    "ShardedIterableDataset.set_epoch": ("epoch", 3, lambda v: _epoch(_sharded(), v)),
    "ShardedIterableDataset.worker_runs": ("num_workers", 2, lambda v: _sharded().worker_runs(0, v)),
    "WeightedBalanceClassSampler.length": ("length", 6, lambda v: WeightedBalanceClassSampler(LABELS, WEIGHT, v)),
    "WeightedBalanceClassSampler.seed": ("seed", 3, lambda v: WeightedBalanceClassSampler(LABELS, WEIGHT, 6, seed=v)),
    "ResumableWeightedBalanceClassSampler.length": ("length", 6, lambda v: ResumableWeightedBalanceClassSampler(LABELS, WEIGHT, v)),
    "largest_remainder_counts.total": ("total", 7, lambda v: largest_remainder_counts([1.0, 2.0], v)),
    "BatchBalanceClassSampler.num_classes": ("num_classes", 2, lambda v: BatchBalanceClassSampler(LABELS, v, 2, **W)),
    "BatchBalanceClassSampler.num_samples": ("num_samples", 2, lambda v: BatchBalanceClassSampler(LABELS, 2, v, **W)),
    "BatchBalanceClassSampler.num_batches": ("num_batches", 2, lambda v: BatchBalanceClassSampler(LABELS, 2, 2, num_batches=v, **W)),
    "BatchBalanceClassSampler.seed": ("seed", 3, lambda v: BatchBalanceClassSampler(LABELS, 2, 2, seed=v, **W)),
    "GroupedBatchSampler.batch_size": ("batch_size", 2, lambda v: GroupedBatchSampler(range(4), [0, 1, 0, 1], v)),
    "IterationBasedBatchSampler.num_iterations": ("num_iterations", 3, lambda v: IterationBasedBatchSampler([[0], [1]], v)),
    "IterationBasedBatchSampler.start_iter": ("start_iter", 1, lambda v: IterationBasedBatchSampler([[0], [1]], 3, v)),
    "make_data_sampler.seed": ("seed", 3, lambda v: make_data_sampler(range(10), True, True, v, **W)),
    "make_data_sampler.num_replicas": ("num_replicas", 2, lambda v: make_data_sampler(range(10), True, True, num_replicas=v, rank=0)),
    "make_batch_data_sampler.batch_size": ("batch_size", 2, lambda v: make_batch_data_sampler([1.0, 2.0, 0.5], range(3), [1.0], v)),
    "make_batch_data_sampler.num_iters": ("num_iters", 3, lambda v: make_batch_data_sampler([1.0, 2.0, 0.5], range(3), None, 2, v)),
    "merge_by_index.size": ("size", 2, lambda v: merge_by_index([([0, 1], ["a", "b"])], v)),
}  # fmt: skip

past_int64 = st.one_of(st.integers(2**63, 2**200), st.integers(-(2**200), -(2**63) - 1))
NUMPY_INTEGERS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("case", sorted(CASES))
@settings(settings.get_profile("costly"))  # a test per argument: each hole shows at once
@given(value=past_int64)
def test_an_integer_past_int64_is_taken_or_refused_by_name_never_overflowing(case, value):
    """Invariant: an integer of any size, as any integer argument, either works (Python ints
    never overflow: a range, a count) or is refused with a ValueError or TypeError naming the
    argument and the value; never an OverflowError or an error from inside numpy or torch."""
    name, _, call = CASES[case]
    try:
        run(call(value))
    except (ValueError, TypeError) as err:
        assert f"{name}=" in str(err) and str(value) in str(err), str(err)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_numpy_integer_of_any_type_gives_what_the_python_int_gives(case):
    """Invariant: numpy's integer types, unsigned ones too, are integers as torch takes them
    (``operator.index``): each gives the same result as the Python int of its value."""
    _, valid, call = CASES[case]
    expected = run(call(valid))
    for kind in NUMPY_INTEGERS:
        assert run(call(kind(valid))) == expected, kind


READERS = {"None": lambda shard: None, "an int": lambda shard: 5}
CALLBACKS: dict[str, tuple[str, Callable[[Callable], object]]] = {
    "ShardedIterableDataset.read": ("read", lambda bad: list(_sharded(read=bad))),
    "ShardedIterableDataset.read seekable": ("read", lambda bad: list(_sharded(read=lambda s, a: bad(s), seekable=True))),
    "prefetch_epochs.make_loader": ("make_loader", lambda bad: [list(b) for _, b in prefetch_epochs(bad, range(2))]),
    "aspect_ratios.get_img_info": ("get_img_info", lambda bad: aspect_ratios(type("D", (), {"__len__": lambda self: 1, "get_img_info": lambda self, i: bad(i)})())),
}  # fmt: skip


@pytest.mark.parametrize("returns", sorted(READERS))
@pytest.mark.parametrize("case", sorted(CALLBACKS))
def test_a_callback_returning_no_samples_is_named_with_what_it_returned(case, returns):
    """Invariant: a user's callback that returns ``None`` (a missing ``return``) or a
    non-iterable is refused by the callback's name and the value it returned."""
    name, call = CALLBACKS[case]
    bad = READERS[returns]
    with pytest.raises((TypeError, ValueError)) as err:
        call(bad)
    assert name in str(err.value) and repr(bad(0)) in str(err.value), str(err.value)


# --- the holes issue 34 found, each pinned to its message ---------------------------------------


@given(
    data=st.data(),
    n=st.integers(1, 50),
    shape=st.lists(st.integers(1, 4), min_size=0, max_size=3),
)
def test_index_shuffle_names_the_first_position_out_of_range_in_c_order(data, n, shape):
    """Invariant: with several positions outside ``[0, n)``, the error names the first one in
    C order (row by row), with its place and value, not the last or the largest: the one a
    reader meets first when printing the tensor. Unsigned positions (numpy's uint64) too."""
    size = int(np.prod(shape))
    values = data.draw(st.lists(st.integers(-5, n + 5), min_size=size, max_size=size))
    flat = np.array(values, dtype=np.int64)
    outside = np.flatnonzero((flat < 0) | (flat >= n))
    if len(outside) < 2:  # several offenders: the order of the search shows
        flat[: 2 - len(outside)] = n
        outside = np.flatnonzero((flat < 0) | (flat >= n))
    positions = torch.from_numpy(flat.reshape(shape))
    first = np.unravel_index(outside[0], shape)
    at = f"[{', '.join(map(str, first))}]" if shape else ""
    message = f"positions should be in [0, n) = [0, {n}), but got positions{at}={flat[outside[0]]} for n={n}"
    with pytest.raises(ValueError) as err:
        index_shuffle(positions, n, 0)
    assert str(err.value) == message
    if flat.min() >= 0:  # the same, as numpy's unsigned array
        with pytest.raises(ValueError) as err:
            index_shuffle(flat.reshape(shape).astype(np.uint64), n, 0)
        assert str(err.value) == message


def test_a_read_that_returns_none_is_named_with_the_shard_and_the_value():
    """Example: a ``read`` missing its ``return`` is named with the call, the shard and what it
    returned, where its first sample is drawn (not 'NoneType' object is not iterable)."""
    with pytest.raises(TypeError) as err:
        list(_sharded(shards=["a.tar", "b.tar"], read=lambda shard: None))
    assert str(err.value) == (
        "read should return an iterable of the shard's samples, but got read('a.tar')=None for "
        "shard 'a.tar' (shards[0])"
    )
    with pytest.raises(TypeError) as err:
        list(_sharded(shards=["a.tar", "b.tar"], read=lambda shard, start: 7, seekable=True))
    assert "but got read('a.tar', 0)=7 for shard 'a.tar' (shards[0])" in str(err.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [("max_tokens", 2**63), ("num_buckets", 2**70), ("max_batch_size", 2**64)],
)
def test_a_token_budget_past_int64_is_a_value_error_naming_it(name, value):
    """Example: numpy would raise OverflowError at the first ``iter()``; the constructor names
    the argument and the value instead."""
    with pytest.raises(ValueError) as err:
        TokenBudgetBatchSampler([2, 7, 3], **{"max_tokens": 12, name: value}, **W)
    assert str(err.value) == f"{name} should be < 2**63 (stored as int64), but got {name}={value}"


@given(num_buckets=st.integers(1, 2**63 - 1), lengths=st.lists(st.integers(1, 9), max_size=30))
def test_more_buckets_than_tokens_plan_as_one_bucket_per_token(num_buckets, lengths):
    """Invariant: buckets cut the tokens no finer than one a token, so any ``num_buckets``
    above the total plans the epoch as ``num_buckets=total`` does (up to ``2**63 - 1``, where
    the bucket arithmetic would overflow int64)."""
    total = max(sum(lengths), 1)
    many = TokenBudgetBatchSampler(lengths, 9, num_buckets=num_buckets, **W)
    capped = TokenBudgetBatchSampler(lengths, 9, num_buckets=min(num_buckets, total), **W)
    assert list(many) == list(capped)
