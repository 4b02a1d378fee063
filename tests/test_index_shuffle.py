"""Properties of IndexShuffleSampler: without shuffle torch's DistributedSampler index for index;
with it, each rank reads the epoch's order (the cipher's, tests/test_cipher.py) at torch's
positions, padded by its head; blocks walked together are each block's index_shuffle; the
blocks from any step are the rest of the share; bad input named."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from distsampling.scale.index_shuffle import (
    IndexShuffleSampler,
    _shuffle_blocks,
    epoch_key,
    index_shuffle,
)
from strategies import (
    dataset_lengths,
    epochs,
    sample_seeds,
    sampler_args,
)

# --- IndexShuffleSampler: DistributedSampler's contract, the order a function of position ----


def idx_torch_positions(n: int, args: dict) -> list[int]:
    """The positions of the epoch order torch gives this rank: its unshuffled sampler's indices
    (padding reads position ``p % n``, the head of the order, as torch pads)."""
    plain = {**args, "shuffle": False}
    return list(torch.utils.data.DistributedSampler(range(n), **plain))


@given(n=dataset_lengths, args=sampler_args(), epoch=epochs)
def test_without_shuffle_it_is_torchs_distributed_sampler_index_for_index(n, args, epoch):
    """Invariant: shuffle=False yields torch's DistributedSampler's indices, in its order, for
    every world, rank, seed, drop_last and epoch."""
    args = {**args, "shuffle": False}
    ours = IndexShuffleSampler(range(n), **args)
    theirs = torch.utils.data.DistributedSampler(range(n), **args)
    ours.set_epoch(epoch)
    theirs.set_epoch(epoch)
    idx_ours, idx_torch = list(ours), list(theirs)
    assert idx_ours == idx_torch and len(ours) == len(theirs)
    assert (ours.num_samples, ours.total_size) == (theirs.num_samples, theirs.total_size)


@given(n=dataset_lengths, args=sampler_args(), epoch=epochs)
def test_each_rank_reads_the_epochs_order_at_torchs_positions_padded_by_its_head(n, args, epoch):
    """Invariant: rank r reads order[p] for torch's positions p of rank r (p % n past the end:
    the head of the order pads), where order = index_shuffle(0..n-1, n, epoch_key(seed, epoch));
    the ranks together read the epoch once plus that padding (or cut by drop_last)."""
    s = IndexShuffleSampler(range(n), **args)
    s.set_epoch(epoch)
    key = epoch_key(args["seed"], epoch)
    order = index_shuffle(torch.arange(n), n, key).tolist() if args["shuffle"] else list(range(n))
    assert list(s) == [order[p] for p in idx_torch_positions(n, args)]
    assert s.indices().tolist() == list(s) and s.epoch_order().tolist() == order
    everyone = []
    for r in range(args["num_replicas"]):
        rank_r = IndexShuffleSampler(range(n), **{**args, "rank": r})
        rank_r.set_epoch(epoch)
        everyone += list(rank_r)
    if not args["drop_last"]:  # each index once, and the first total_size - n again
        extra = [order[p % n] for p in range(n, s.total_size)] if n else []
        assert sorted(everyone) == sorted(list(range(n)) + extra)
    else:  # distinct indices, the tail cut
        assert len(set(everyone)) == len(everyone) == s.total_size


@given(args=sampler_args(), epoch=epochs)
def test_an_epoch_is_reproducible_and_neighbouring_epochs_differ(args, epoch):
    """Invariant: the same (seed, epoch) gives the same share, in a new sampler and after other
    epochs; the next epoch gives another order (n = 64: equal orders are a 1 in 64! event)."""
    args = {**args, "shuffle": True}
    s = IndexShuffleSampler(range(64), **args)
    s.set_epoch(epoch)
    first = list(s)
    s.set_epoch(epoch + 1)
    other = s.epoch_order().tolist()
    s.set_epoch(epoch)
    again = IndexShuffleSampler(range(64), **args)
    again.set_epoch(epoch)
    assert list(s) == list(again) == first
    assert other != s.epoch_order().tolist()


def test_a_share_longer_than_a_block_is_yielded_block_by_block_as_the_whole():
    """Invariant: iterating (32 positions first, then blocks of 2**14 whose walks ride along with
    the next block's) yields exactly indices(), the share computed at once, across block
    boundaries and through the padding."""
    s = IndexShuffleSampler(range(100_003), num_replicas=3, rank=2, seed=5)
    s.set_epoch(2)
    assert list(s) == s.indices().tolist()
    assert len(list(s)) == len(s) == 33_335


@given(
    n=st.one_of(
        st.integers(1, 5000),
        st.sampled_from([2**40 + 7, 5_850_000_000, 2**63 - 1]),
        st.integers(6, 62).map(lambda k: 2**k + 1),  # one past a power of two: one bit more
    ),
    seed=sample_seeds,
    data=st.data(),
)
def test_blocks_walked_together_are_each_blocks_index_shuffle(n, seed, data):
    """Invariant: the pipelined walk (one cipher call a block, the values still walking carried
    into the next call) gives every block, in order and at its length, exactly its
    index_shuffle, whatever the cut into blocks (empty ones too) and however long a walk lasts."""
    sizes = data.draw(st.lists(st.integers(0, 3000), max_size=8), label="sizes")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="positions"))
    blocks = [torch.from_numpy(rng.integers(0, n, size, dtype=np.int64)) for size in sizes]
    walked = list(_shuffle_blocks(iter(blocks), n, seed))
    assert [len(b) for b in walked] == sizes
    assert all(b.dtype == torch.int64 for b in walked)
    assert all(torch.equal(w, index_shuffle(b, n, seed)) for w, b in zip(walked, blocks))


@pytest.mark.parametrize("begin", [0, 1, 31, 32, 33, 5000, 16_416, 33_334, 33_335])
def test_the_blocks_from_any_step_are_the_rest_of_the_share(begin):
    """Invariant: the blocks of the order from step `begin` on (where a resumed iter() starts)
    are exactly the share's indices from `begin` on: the first 32 steps, then blocks of 2**14."""
    s = IndexShuffleSampler(range(100_003), num_replicas=3, rank=2, seed=5)
    s.set_epoch(2)
    blocks = list(s._order_blocks(begin))
    assert torch.cat(blocks).tolist() == s.indices()[begin:].tolist()
    assert len(blocks[0]) == min(32, max(len(s) - begin, 0))


@pytest.mark.parametrize("world", [2, 3, 8])
def test_a_single_sample_is_every_ranks_padding(world):
    """Invariant: with one sample and more ranks, every rank reads it, as ints (padding from the
    head of an order of length 1)."""
    idx_ours = [list(IndexShuffleSampler(range(1), world, r, seed=4)) for r in range(world)]
    idx_torch = [
        list(torch.utils.data.DistributedSampler(range(1), world, r, seed=4)) for r in range(world)
    ]
    assert idx_ours == idx_torch == [[0]] * world
    assert all(type(i) is int for share in idx_ours for i in share)


def test_a_dataset_of_billions_gives_its_first_index_without_building_the_epoch():
    """Invariant: with N = 5.85e9 on 1024 ranks, len() is torch's ceil(N / W) and the first
    indices are the order at positions rank, rank + W, ... (nothing of size N is built: the
    epoch alone would be 47 GB)."""
    n, W, rank = 5_850_000_000, 1024, 7
    s = IndexShuffleSampler(range(n), num_replicas=W, rank=rank, seed=1)
    s.set_epoch(3)
    head = [next(it) for it in [iter(s)] for _ in range(5)]
    positions = torch.arange(rank, rank + 5 * W, W)
    assert head == index_shuffle(positions, n, epoch_key(1, 3)).tolist()
    assert len(s) == -(-n // W)


def test_a_negative_epoch_and_a_changed_length_are_errors_naming_them():
    """Invariant: an epoch below 0 has no key: iter() refuses it naming the epoch; a dataset
    whose length changed since construction is refused as DistributedSampler refuses it."""
    s = IndexShuffleSampler(range(10), num_replicas=2, rank=0)
    s.set_epoch(-1)
    with pytest.raises(ValueError, match=r"epoch should be in the interval \[0, .* epoch=-1$"):
        next(iter(s))
    data = list(range(10))
    s = IndexShuffleSampler(data, num_replicas=2, rank=0)
    data.append(10)
    with pytest.raises(RuntimeError, match=r"built from 10, but got len\(dataset\)=11"):
        list(s)


def test_a_state_from_another_sampler_or_length_is_refused_naming_the_field():
    """Invariant: the resumable form's state names its class and the dataset length: a state of
    ResumableDistributedSampler, or of another N, is refused naming the field."""
    from distsampling import ResumableDistributedSampler, ResumableIndexShuffleSampler

    other = ResumableDistributedSampler(range(10), 2, 0).state_dict()
    with pytest.raises(ValueError, match=r"kind was 'ResumableDistributedSampler' when saved"):
        ResumableIndexShuffleSampler(range(10), 2, 0).load_state_dict(other)
    state = ResumableIndexShuffleSampler(range(11), 2, 0).state_dict()
    with pytest.raises(ValueError, match=r"dataset_len was 11 when saved, but is 10 now"):
        ResumableIndexShuffleSampler(range(10), 2, 0).load_state_dict(state)


class _Sized:
    """A dataset of ``n`` samples, only its length known (any n below 2**63)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def test_a_padded_epoch_of_2_63_positions_is_refused_and_2_63_minus_1_is_read():
    """Invariant: positions are int64: a padded epoch of 2**63 positions (n = 2**63 - 1 on 2
    ranks) is refused naming num_replicas, n and total_size; one of 2**63 - 1 (1 rank) is read
    as the order at its positions."""
    n = 2**63 - 1
    with pytest.raises(
        ValueError,
        match=rf"^num_replicas should leave a padded epoch below 2\*\*63 positions, but got "
        rf"num_replicas=2 for n={n}: total_size={2**63}$",
    ):
        next(iter(IndexShuffleSampler(_Sized(n), num_replicas=2, rank=1)))
    s = IndexShuffleSampler(_Sized(n), num_replicas=1, rank=0, seed=4)
    assert next(iter(s)) == index_shuffle([0], n, epoch_key(4, 0)).item()


def test_the_order_at_any_integer_positions_is_int64():
    """Invariant: order_at returns int64 indices whatever the positions' integer dtype, with
    shuffle (the bijection's) and without (the positions themselves)."""
    for shuffle in (True, False):
        s = IndexShuffleSampler(range(10), num_replicas=1, rank=0, shuffle=shuffle)
        at = s.order_at(torch.tensor([3, 1], dtype=torch.int32))
        assert at.dtype == torch.int64 and at.tolist() == s.epoch_order()[[3, 1]].tolist()


@pytest.mark.parametrize("cls", ["IndexShuffleSampler", "ResumableIndexShuffleSampler"])
def test_a_set_epoch_while_an_iterator_runs_changes_the_next_iter_not_this_one(cls):
    """Invariant: the epoch (and a loaded position) an iterator reads is fixed at its first
    ``next``: ``set_epoch(1)`` after the first index (a loop that calls it after the first
    batch) leaves the running iterator on epoch 0, whole and once, past the first block of 32
    and every block of 2**14 after it; the next ``iter()`` reads epoch 1."""
    import distsampling

    cls = getattr(distsampling, cls)
    n = 3 * 2**14
    s = cls(range(n), 1, 0, seed=4)
    whole = list(cls(range(n), 1, 0, seed=4))
    it = iter(s)
    first = next(it)
    s.set_epoch(1)
    assert [first, *it] == whole
    nxt = cls(range(n), 1, 0, seed=4)
    nxt.set_epoch(1)
    assert list(s) == list(nxt)
