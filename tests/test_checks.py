"""Single-process properties of the rank-consistency digest (the collective runs in test_multiprocess)."""

from __future__ import annotations

import pytest
import torch.utils.data.distributed as torch_distributed
from hypothesis import given
from hypothesis import strategies as st

from distsampling import (
    BatchSampler,
    DistributedSampler,
    DistributedSamplerWrapper,
    RankMismatchError,
    UnpaddedDistributedSampler,
    epoch_digest,
)
from distsampling.checks import _CAUSES, _raise_if_ranks_differ
from strategies import dataset_lengths, epochs, seeds, world_sizes


@given(n=dataset_lengths, world=world_sizes, seed=seeds, epoch=epochs)
def test_every_rank_of_a_correct_setup_has_the_same_digest(n, world, seed, epoch):
    """Invariant: ranks built alike (only the rank differs) produce equal digests."""
    digests = []
    for rank in range(world):
        s = DistributedSampler(range(n), world, rank, seed=seed)
        s.set_epoch(epoch)
        digests.append(epoch_digest(s))
    assert all(d == digests[0] for d in digests)


@given(n=dataset_lengths, seed=seeds, epoch=epochs)
def test_the_digest_is_the_same_for_torchs_sampler_and_ours(n, seed, epoch):
    """Invariant: the digest reads torch's DistributedSampler too, and sees the same epoch (type aside)."""
    ours = DistributedSampler(range(n), 2, 0, seed=seed)
    theirs = torch_distributed.DistributedSampler(range(n), 2, 0, seed=seed)
    ours.set_epoch(epoch)
    theirs.set_epoch(epoch)
    assert epoch_digest(ours) == epoch_digest(theirs)


def test_the_digest_sees_a_forgotten_set_epoch_through_a_batch_sampler():
    """Invariant: the epoch of the sampler inside a BatchSampler is part of the digest, and the order with it."""
    a, b = DistributedSampler(range(30), 2, 0), DistributedSampler(range(30), 2, 1)
    a.set_epoch(1)
    da, db = epoch_digest(BatchSampler(a, 4, False)), epoch_digest(BatchSampler(b, 4, False))
    assert (da["epoch"], db["epoch"]) == (1, 0)
    assert da["order"] != db["order"]


#: what a rank can get wrong, each a field of the digest
faults = st.sampled_from(["dataset_len", "epoch", "seed", "num_replicas", "order"])


def rank_sampler(n, world, rank, seed, epoch, fault, faulty):
    """This rank's sampler, built right, or (``faulty``) with the mistake ``fault`` on this rank."""
    if fault == "order":  # only the order differs: a wrapper whose inner epoch is reversed here
        inner = list(range(n))[::-1] if faulty else list(range(n))
        s = DistributedSamplerWrapper(inner, world, rank, seed=seed)
    else:
        wrong = fault if faulty else None
        n_here = n + 1 if wrong == "dataset_len" else n
        world_here = world + 1 if wrong == "num_replicas" else world
        seed_here = seed + 1 if wrong == "seed" else seed
        s = DistributedSampler(range(n_here), world_here, rank, seed=seed_here)
    if not (faulty and fault == "epoch"):  # the faulty rank forgot set_epoch
        s.set_epoch(epoch)
    return s


@given(
    n=st.integers(2, 60),
    world=st.integers(2, 5),
    seed=seeds,
    epoch=st.integers(1, 1000),
    fault=st.none() | faults,
    data=st.data(),
)
def test_a_mistake_on_one_rank_is_named_with_every_ranks_value_and_its_cause(
    n, world, seed, epoch, fault, data
):
    """Invariant: ranks built alike pass; one rank's mistake raises on every rank, naming the field,
    which ranks hold which value, and the likely cause of that mistake."""
    odd = data.draw(st.integers(0, world - 1), label="rank with the mistake")
    digests = [
        epoch_digest(rank_sampler(n, world, r, seed, epoch, fault, faulty=r == odd))
        for r in range(world)
    ]
    for mine in digests:
        if fault is None:
            assert _raise_if_ranks_differ(digests, mine) is None
            continue
        with pytest.raises(RankMismatchError) as error:
            _raise_if_ranks_differ(digests, mine)
        lines = str(error.value).splitlines()
        assert lines[0] == "ranks disagree about the epoch:"
        right = [r for r in range(world) if r != odd]
        groups = [([odd], digests[odd][fault]), (right, digests[right[0]][fault])]
        shown = "; ".join(f"ranks {ranks} have {v!r}" for ranks, v in sorted(groups))
        assert f"  {fault}: {shown}" in lines
        assert lines[-1] == f"likely cause: {_CAUSES[fault]}"


def test_samplers_that_differ_only_in_type_are_reported_as_different_samplers():
    """Invariant: a difference no cause explains (another sampler class on one rank) is still
    reported, field by field, with the generic cause."""
    digests = [
        epoch_digest(DistributedSampler(range(10), 2, 0)),
        epoch_digest(UnpaddedDistributedSampler(range(10), 2, 1)),
    ]
    for mine in digests:
        with pytest.raises(RankMismatchError) as error:
            _raise_if_ranks_differ(digests, mine)
        assert str(error.value) == (
            "ranks disagree about the epoch:\n"
            "  type: ranks [0] have 'DistributedSampler'; ranks [1] have 'UnpaddedDistributedSampler'\n"
            "likely cause: ranks built different samplers"
        )


@given(n=dataset_lengths, world=world_sizes, seed=seeds, epoch=epochs, data=st.data())
def test_the_order_of_any_sampler_is_the_hash_of_the_epoch_it_yields(n, world, seed, epoch, data):
    """Invariant: a plain sampler's digest is its type, len and the hash of its epoch; a
    DistributedSampler's order hash is that of the whole epoch all ranks take shares of."""
    rank = data.draw(st.integers(0, world - 1), label="rank")
    s = DistributedSampler(range(n), world, rank, seed=seed)
    s.set_epoch(epoch)
    whole = DistributedSampler(range(n), 1, 0, seed=seed)
    whole.set_epoch(epoch)
    plain = epoch_digest(list(whole))
    assert plain == {"type": "list", "len": n, "order": plain["order"]}
    assert epoch_digest(s)["order"] == plain["order"]
    if n >= 2:  # another order, another hash
        assert epoch_digest(list(whole)[::-1])["order"] != plain["order"]
