"""Properties of InferenceSampler: contiguous blocks that concatenate to the dataset, sizes
within one (the first N % W ranks one more), index-exact against detectron2's arithmetic built
here, gathering reproduces dataset order (as it does for the strided unpadded split), resume,
bad input."""

from __future__ import annotations

import json
from itertools import islice

import pytest
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import DistributedSampler

from distsampling import (
    InferenceSampler,
    UnpaddedDistributedSampler,
    inference_shard,
    merge_by_index,
)
from strategies import dataset_lengths, epochs, flags, ranks_for, seeds, world_sizes


def shard_detectron2(total_size: int, world_size: int, rank: int) -> range:
    """detectron2's current InferenceSampler arithmetic: a list of shard sizes, summed."""
    shard_size = total_size // world_size
    left = total_size % world_size
    shard_sizes = [shard_size + int(r < left) for r in range(world_size)]
    begin = sum(shard_sizes[:rank])
    end = min(sum(shard_sizes[: rank + 1]), total_size)
    return range(begin, end)


@given(n=dataset_lengths, world=world_sizes, data=st.data())
def test_each_rank_reads_detectron2s_contiguous_block(n, world, data):
    """Invariant: index-exact against detectron2's block of rank r (sizes N // W, plus one for
    the first N % W ranks)."""
    rank = data.draw(ranks_for(world))
    idx_ours = list(InferenceSampler(range(n), world, rank))
    idx_torch = list(shard_detectron2(n, world, rank))
    assert idx_ours == idx_torch
    assert len(InferenceSampler(range(n), world, rank)) == len(idx_torch)


@given(n=dataset_lengths, world=world_sizes)
def test_the_blocks_in_rank_order_are_the_dataset_in_order(n, world):
    """Invariant: every index exactly once, no padding; concatenating the ranks' blocks in rank
    order gives 0..N-1, so gathered results need no reordering."""
    blocks = [list(InferenceSampler(range(n), world, r)) for r in range(world)]
    assert [i for b in blocks for i in b] == list(range(n))
    assert all(b == list(range(b[0], b[-1] + 1)) for b in blocks if b)  # each one contiguous


@given(n=dataset_lengths, world=world_sizes)
def test_block_sizes_differ_by_at_most_one_the_first_ranks_get_the_extra(n, world):
    """Invariant: sizes are N // W or N // W + 1, the larger ones on the first N % W ranks."""
    sizes = [len(InferenceSampler(range(n), world, r)) for r in range(world)]
    assert sizes == [n // world + (r < n % world) for r in range(world)]


@given(n=dataset_lengths, world=world_sizes, epoch=epochs, data=st.data())
def test_is_a_torch_distributed_sampler_whose_attributes_describe_its_block(n, world, epoch, data):
    """Invariant: an instance of torch's DistributedSampler (frameworks that leave torch's alone
    leave it alone) holding every attribute torch's holds, each true of the blocks: dataset and
    world as given, num_samples this block's len() and what it yields, total_size N (the
    blocks' sum, nothing padded), shuffle and drop_last False, seed 0; set_epoch records the
    epoch and moves no block."""
    rank = data.draw(ranks_for(world), label="rank")
    dataset = range(n)
    ours = InferenceSampler(dataset, world, rank)
    before, first = list(ours), ours.epoch  # torch's first epoch is 0
    ours.set_epoch(epoch)
    assert isinstance(ours, DistributedSampler) and first == 0
    assert set(dir(ours)) >= set(vars(DistributedSampler(dataset, world, rank)))
    assert (ours.dataset, ours.num_replicas, ours.rank, ours.epoch) == (dataset, world, rank, epoch)
    assert ours.num_samples == len(ours) == len(before) and list(ours) == before
    shares = [InferenceSampler(dataset, world, r).num_samples for r in range(world)]
    assert ours.total_size == sum(shares) == n
    assert (ours.shuffle, ours.drop_last, ours.seed) == (False, False, 0)


@given(n=dataset_lengths, world=world_sizes, shuffle=flags, seed=seeds)
def test_gathering_either_split_by_index_reproduces_the_dataset_order(n, world, shuffle, seed):
    """Invariant: per-sample results gathered by index are in dataset order whichever split ran:
    contiguous blocks, or the strided (shuffled) unpadded split."""
    for make in (
        lambda r: InferenceSampler(range(n), world, r),
        lambda r: UnpaddedDistributedSampler(range(n), world, r, shuffle=shuffle, seed=seed),
    ):
        per_rank = [(idx := list(make(r)), [f"result {i}" for i in idx]) for r in range(world)]
        assert merge_by_index(per_rank, n) == [f"result {i}" for i in range(n)]


@given(n=dataset_lengths, world=world_sizes, data=st.data())
def test_resume_from_a_saved_state_yields_the_rest_of_the_block(n, world, data):
    """Invariant: save after k indices (through JSON), load: every later iter() yields the rest
    of this rank's block (a loaded position is where every iter() starts)."""
    rank = data.draw(ranks_for(world))
    s = InferenceSampler(range(n), world, rank)
    block = list(s.indices)
    k = data.draw(st.integers(0, len(block)))
    it = iter(s)
    head = [next(it) for _ in range(k)]
    assert s.position == k
    resumed = InferenceSampler(range(n), world, rank)
    resumed.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert resumed.position == k
    assert head + list(resumed) == block
    assert list(resumed) == block[k:]


def test_inference_shard_is_a_range_computed_without_lists():
    """Invariant: the block is an O(1) range even for a dataset of 2**62 samples."""
    n, world = 2**62 + 3, 4
    assert [len(inference_shard(n, world, r)) for r in range(world)] == [2**60 + 1] * 3 + [2**60]
    assert inference_shard(n, world, 3).stop == n


# bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"dataset": 5}, TypeError, r"dataset should have __len__.*but got dataset=5"),
        (
            {"rank": 3},
            ValueError,
            r"Invalid rank 3, rank should be in the interval \[0, 2\], but got rank=3 for num_replicas=",
        ),
        (
            {"rank": -1},
            ValueError,
            r"Invalid rank -1, rank should be in the interval \[0, 2\], but got rank=-1 for num_replicas=",
        ),
        (
            {"num_replicas": 0, "rank": 0},
            ValueError,
            r"num_replicas should be >= 1, but got num_replicas=0$",
        ),
        (
            {"num_replicas": 2.0},
            TypeError,
            r"num_replicas should be an integer, but got num_replicas=2.0",
        ),
        (
            {"num_replicas": None},
            ValueError,
            r"Default process group has not been initialized.* but got num_replicas=None",
        ),
    ],
)
def test_bad_arguments_are_rejected_naming_the_value(kwargs, error, message):
    """Invariant: an unsized dataset, a rank or world out of range, or no process group to
    default from, fails at construction naming the argument and value."""
    with pytest.raises(error, match=message):
        InferenceSampler(**{"dataset": range(4), "num_replicas": 3, "rank": 0, **kwargs})


def test_a_changed_dataset_length_is_an_error_at_iter():
    """Invariant: a dataset that grew or shrank since the sampler was built is not half-read."""
    data = list(range(10))
    s = InferenceSampler(data, 2, 1)
    data.append(10)
    with pytest.raises(RuntimeError, match=r"built from 10, but got len\(dataset\)=11"):
        iter(s)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"size": 11}, ValueError, r"size was 11 when saved, but is 10 now"),
        (
            {"num_replicas": 3},
            ValueError,
            r"^state was saved on num_replicas=3 ranks, but this sampler has num_replicas=2: an "
            r"InferenceSampler resumes on the saved number of ranks only \(its blocks depend on "
            r"it\); build it with that num_replicas, or evaluate from the start$",
        ),
        ({"num_replicas": None}, ValueError, r"num_replicas=None ranks"),
        ({"version": 1}, ValueError, r"format version=1"),
        (
            {"kind": "UnpaddedDistributedSampler"},
            ValueError,
            r"kind was 'UnpaddedDistributedSampler'",
        ),
        (
            {"position": 6},
            ValueError,
            r"position should be in the interval \[0, 5\], but got position=6$",
        ),
        ({"position": -1}, ValueError, r"but got position=-1$"),
        ({"position": 1.0}, TypeError, r"position should be an integer, but got position=1.0"),
    ],
)
def test_a_bad_state_is_rejected_naming_the_field(change, error, message):
    """Invariant: a state of another dataset, world, class or format, or a position past the
    longest block, is refused naming the field, and nothing is loaded."""
    s = InferenceSampler(range(10), 2, 1)
    state = {**s.state_dict(), **change}
    with pytest.raises(error, match=message):
        s.load_state_dict(state)
    assert list(s) == [5, 6, 7, 8, 9]


@pytest.mark.parametrize("field", ["num_replicas", "position"])
def test_a_state_without_its_world_or_position_is_refused_naming_the_field(field):
    """Invariant: the world and the position are required: a state without one is refused with
    a KeyError naming it, never read as a default."""
    s = InferenceSampler(range(10), 2, 1)
    state = s.state_dict()
    del state[field]
    with pytest.raises(KeyError, match=rf"state has no '{field}': it is not a InferenceSampler"):
        s.load_state_dict(state)


@pytest.mark.parametrize(
    ("n", "error", "message"),
    [
        (-1, ValueError, r"^n should be >= 0, but got n=-1$"),
        ("3", TypeError, r"^n should be an integer, but got n='3'"),
    ],
)
def test_inference_shard_refuses_a_bad_length_naming_n(n, error, message):
    """Invariant: the dataset length n is an integer >= 0; the error names n and the value."""
    with pytest.raises(error, match=message):
        inference_shard(n, 2, 0)


def test_the_state_names_its_class_and_format_version_2():
    """Invariant: a checkpoint says which sampler wrote it and in which format (kind
    'InferenceSampler', version 2), so other samplers and later versions can refuse or read it."""
    state = InferenceSampler(range(5), 2, 1).state_dict()
    assert (state["kind"], state["version"]) == ("InferenceSampler", 2)


@given(n=dataset_lengths, world=world_sizes, data=st.data())
def test_a_state_from_rank_0_resumes_every_rank_of_its_world_with_each_index_read_once(
    n, world, data
):
    """Invariant: after k steps in step (each rank read k indices, or its whole block if
    shorter), rank 0's state (the longest block) loaded on every rank of that world reads the
    rest of each block: with the reads before, every index once. Before the shortest block
    ends, every rank saves that same state."""
    k = data.draw(st.integers(0, -(-n // world)), label="k")
    states, read = [], []
    for r in range(world):
        s = InferenceSampler(range(n), world, r)
        read += list(islice(s, k))
        states.append(json.loads(json.dumps(s.state_dict())))
    if k <= n // world:
        assert all(state == states[0] for state in states)
    for r in range(world):
        s = InferenceSampler(range(n), world, r)
        s.load_state_dict(states[0])
        read += list(s)
    assert sorted(read) == list(range(n))


def test_a_fresh_sampler_saves_position_zero_and_reads_its_whole_block():
    """Invariant: before any iter(), the state is at the start of this rank's block."""
    s = InferenceSampler(range(7), 2, 1)
    assert s.state_dict()["position"] == 0 and s.position == 0
    assert list(s) == list(range(4, 7))


@given(dataset_lengths, world_sizes, st.data())
def test_consumed_saves_where_the_loop_stopped_and_a_new_epoch_reads_the_whole_block(n, w, data):
    """Invariant: ``state_dict(consumed=k)`` after more was handed out (workers prefetch) is
    the state after ``k``, counted from where the latest ``iter()`` began (a loaded position);
    ``set_epoch`` to another epoch drops a loaded position, the same epoch keeps it."""
    rank = data.draw(ranks_for(w))
    s = InferenceSampler(range(n), w, rank)
    block = list(s)
    start = data.draw(st.integers(0, len(block)))
    s.load_state_dict({**s.state_dict(), "position": start})
    it = iter(s)
    handed = data.draw(st.integers(0, len(block) - start))
    for _ in range(handed):
        next(it)
    k = data.draw(st.integers(0, handed))
    state = json.loads(json.dumps(s.state_dict(consumed=k)))
    assert state["position"] == start + k
    resumed = InferenceSampler(range(n), w, rank)
    resumed.load_state_dict(state)
    resumed.set_epoch(0)  # the saved epoch: kept
    assert list(resumed) == block[start + k :] and len(resumed) == len(block)
    resumed.set_epoch(1)  # the next evaluation: the whole block
    assert list(resumed) == block and resumed.state_dict()["epoch"] == 1


def test_consumed_past_the_latest_iter_and_a_bad_epoch_are_refused_naming_them():
    """Invariant: after a load at position 2 and 3 indices handed out, ``consumed=4`` is refused
    with the count the latest ``iter()`` handed out (not the position); an epoch that is not an
    integer, set or loaded, is refused naming ``epoch``."""
    s = InferenceSampler(range(20), 2, 0)
    state = s.state_dict()
    s.load_state_dict({**state, "position": 2})
    it = iter(s)
    next(it), next(it), next(it)
    message = (
        r"^consumed should be <= 3 \(samples handed out\): the latest iter\(\) handed out 3, "
        r"but got consumed=4$"
    )
    with pytest.raises(ValueError, match=message):
        s.state_dict(consumed=4)
    with pytest.raises(TypeError, match=r"^epoch should be an integer, but got epoch='a'"):
        s.set_epoch("a")
    with pytest.raises(TypeError, match=r"^epoch should be an integer, but got epoch='x'"):
        InferenceSampler(range(20), 2, 0).load_state_dict({**state, "epoch": "x"})
