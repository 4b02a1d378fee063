"""Properties of the rank-consistency digest, and the collective check on one rank and over a subgroup (more worlds in test_multiprocess)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.utils.data.distributed as torch_distributed
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import RandomSampler

from distsampling import (
    BatchSampler,
    DistributedSampler,
    DistributedSamplerWrapper,
    InferenceSampler,
    IterationBasedBatchSampler,
    OrderAhead,
    RankMismatchError,
    ResumableBatchSampler,
    ResumableDistributedSampler,
    TokenBudgetBatchSampler,
    UnpaddedDistributedSampler,
    WeightedBalanceClassSampler,
    assert_rank_consistent,
    epoch_digest,
    run_world,
)
from distsampling.tools.checks import _CAUSES, _raise_if_ranks_differ
from strategies import dataset_lengths, epochs, seeds, world_sizes
from worlds import GlobalRNGSampler


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
    """Invariant: the digest reads torch's DistributedSampler too, and sees the same epoch.

    (Neither torch's nor our plain sampler has a position; our resumable one, fresh, is at the
    start and otherwise digests alike.)
    """
    ours = DistributedSampler(range(n), 2, 0, seed=seed)
    resumable = ResumableDistributedSampler(range(n), 2, 0, seed=seed)
    theirs = torch_distributed.DistributedSampler(range(n), 2, 0, seed=seed)
    for s in (ours, resumable, theirs):
        s.set_epoch(epoch)
    digest_ours, digest_torch = epoch_digest(ours), epoch_digest(theirs)
    assert digest_ours == digest_torch and digest_torch["position"] is None
    digest_resumable = epoch_digest(resumable)
    assert digest_resumable.pop("position") == {"start": 0, "position": 0}
    assert digest_resumable.pop("type") == "ResumableDistributedSampler"
    assert digest_resumable == {
        k: v for k, v in digest_ours.items() if k not in ("type", "position")
    }


def test_the_digest_sees_a_forgotten_set_epoch_through_a_batch_sampler():
    """Invariant: the epoch of the sampler inside a BatchSampler is part of the digest, and the order with it."""
    a, b = DistributedSampler(range(30), 2, 0), DistributedSampler(range(30), 2, 1)
    a.set_epoch(1)
    da, db = epoch_digest(BatchSampler(a, 4, False)), epoch_digest(BatchSampler(b, 4, False))
    assert (da["epoch"], db["epoch"]) == (1, 0)
    assert da["order"] != db["order"]


@given(n=dataset_lengths, world=world_sizes, seed=seeds, epoch=epochs)
def test_unpadded_ranks_agree_though_their_lengths_differ_by_design(n, world, seed, epoch):
    """Invariant: UnpaddedDistributedSampler's ranks read ceil((N - rank) / W) samples each, so
    their lengths may differ; the digest compares what must agree, and every rank's is equal."""
    digests = []
    for rank in range(world):
        s = UnpaddedDistributedSampler(range(n), world, rank, seed=seed)
        s.set_epoch(epoch)
        digests.append(epoch_digest(BatchSampler(s, 4, False)))
    assert all(d == digests[0] for d in digests)


def test_eleven_samples_on_two_unpadded_ranks_pass_the_check():
    """Invariant: the audit's case, 6 and 5 samples on 2 ranks, is no mismatch."""
    a, b = (UnpaddedDistributedSampler(range(11), 2, r) for r in (0, 1))
    assert (len(a), len(b)) == (6, 5)
    assert epoch_digest(a) == epoch_digest(b)


@given(n=dataset_lengths, world=world_sizes, epoch=epochs)
def test_inference_ranks_agree_though_their_lengths_differ_by_design(n, world, epoch):
    """Invariant: InferenceSampler gives each rank a contiguous slice, of unequal lengths by
    design (detectron2's split): the digest leaves ``len`` and ``position`` out, so every
    rank's is equal; an epoch set otherwise on one rank still differs."""
    ranks = [InferenceSampler(range(n), world, rank) for rank in range(world)]
    for s in ranks:
        s.set_epoch(epoch)
    digests = [epoch_digest(s) for s in ranks]
    assert all(d == digests[0] for d in digests) and "len" not in digests[0]
    ranks[-1].set_epoch(epoch + 1)
    assert epoch_digest(ranks[-1])["epoch"] != digests[0]["epoch"]


@given(n=dataset_lengths, world=world_sizes, seed=seeds, epoch=epochs)
def test_a_wrapper_that_yields_its_inner_share_is_checked_by_the_inner_epoch(n, world, seed, epoch):
    """Invariant: OrderAhead hands out its inner sampler's share (its ``indices()`` are a
    rank's): the order hashed is the inner sampler's global epoch, equal on every rank, the one
    a DistributedSampler alone gives."""
    ranks = [
        OrderAhead(DistributedSampler(range(n), world, rank, seed=seed)) for rank in range(world)
    ]
    for s in ranks:
        s.set_epoch(epoch)
    alone = DistributedSampler(range(n), world, 0, seed=seed)
    alone.set_epoch(epoch)
    assert {epoch_digest(s)["order"] for s in ranks} == {epoch_digest(alone)["order"]}


@given(n=st.integers(min_value=1, max_value=60), seed=seeds, epoch=epochs)
def test_the_check_never_changes_the_epoch_it_checks(n, seed, epoch):
    """Invariant: over DistributedSamplerWrapper(RandomSampler(generator=...)), taking the
    digest after set_epoch leaves the epoch training reads, and the next, as they were."""

    def run(check: bool) -> list[list[int]]:
        inner = RandomSampler(range(n), generator=torch.Generator().manual_seed(seed))
        wrapper = DistributedSamplerWrapper(inner, 2, 0, seed=seed)
        epochs_read = []
        for e in (epoch, epoch + 1):
            wrapper.set_epoch(e)
            if check:
                epoch_digest(wrapper)
            epochs_read.append(list(wrapper))
        return epochs_read

    idx_checked, idx_unchecked = run(True), run(False)
    assert idx_checked == idx_unchecked


def test_the_check_does_not_iterate_a_sampler_it_cannot_read():
    """Invariant: a sampler without epoch_order() (its order from the global RNG) is not
    iterated: the global RNG is where it was, and the order is reported unchecked."""
    np.random.seed(0)
    before = np.random.get_state()[1].copy()
    digest = epoch_digest(BatchSampler(GlobalRNGSampler(20), 4, False))
    assert (np.random.get_state()[1] == before).all()
    assert digest["order"] is None


def test_a_rank_that_loaded_another_checkpoint_has_another_position():
    """Invariant: the digest carries the resumed position, so ranks resumed from different
    checkpoints disagree on it (and only on it)."""
    digests = []
    for rank, k in ((0, 2), (1, 3)):
        s = ResumableDistributedSampler(range(20), 2, rank, seed=1)
        s.set_epoch(1)
        it = iter(s)
        for _ in range(k):
            next(it)
        fresh = ResumableDistributedSampler(range(20), 2, rank, seed=1)
        fresh.load_state_dict(s.state_dict())
        fresh.set_epoch(1)  # as the training loop does on resume: the position survives
        digests.append(epoch_digest(fresh))
    differing = [key for key in digests[0] if digests[0][key] != digests[1][key]]
    assert differing == ["position"]
    assert [d["position"]["position"] for d in digests] == [2, 3]


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

    class SubclassedSampler(DistributedSampler):
        """The same sampler under another class name."""

    digests = [
        epoch_digest(DistributedSampler(range(10), 2, 0)),
        epoch_digest(SubclassedSampler(range(10), 2, 1)),
    ]
    for mine in digests:
        with pytest.raises(RankMismatchError) as error:
            _raise_if_ranks_differ(digests, mine)
        assert str(error.value) == (
            "ranks disagree about the epoch:\n"
            "  type: ranks [0] have 'DistributedSampler'; ranks [1] have 'SubclassedSampler'\n"
            "likely cause: ranks built different samplers"
        )


@given(n=dataset_lengths, world=world_sizes, seed=seeds, epoch=epochs, data=st.data())
def test_the_order_of_any_sampler_is_the_hash_of_the_epoch_it_yields(n, world, seed, epoch, data):
    """Invariant: a plain sampler's digest is its type, len, no position and the hash of its epoch; a
    DistributedSampler's order hash is that of the whole epoch all ranks take shares of."""
    rank = data.draw(st.integers(0, world - 1), label="rank")
    s = DistributedSampler(range(n), world, rank, seed=seed)
    s.set_epoch(epoch)
    whole = DistributedSampler(range(n), 1, 0, seed=seed)
    whole.set_epoch(epoch)
    plain = epoch_digest(list(whole))
    assert plain == {"type": "list", "len": n, "position": None, "order": plain["order"]}
    # the order's hash: the first 16 hex digits of SHA-1 over the epoch as int64 bytes, so any
    # index dtype (int32 here, int64 in a list) hashes alike
    as_bytes = np.asarray(list(whole), dtype=np.int64).tobytes()
    assert plain["order"] == hashlib.sha1(as_bytes).hexdigest()[:16]
    assert epoch_digest(s)["order"] == plain["order"]
    if n >= 2:  # another order, another hash
        assert epoch_digest(list(whole)[::-1])["order"] != plain["order"]


def test_a_token_budget_samplers_order_is_the_hash_of_its_whole_plan():
    """Invariant: every rank of a token-budget sampler hashes the same plan (its steps, batch
    bounds and order, the same on every rank), and another seed gives another plan's hash."""
    lengths = [5, 1, 3, 8, 2, 2, 7, 4, 6, 1]
    ranks = [TokenBudgetBatchSampler(lengths, 8, num_replicas=3, rank=r, seed=4) for r in range(3)]
    plan = ranks[0].epoch_plan()
    expected = hashlib.sha1(plan.numpy().astype(np.int64).tobytes()).hexdigest()[:16]
    assert [epoch_digest(s)["order"] for s in ranks] == [expected] * 3
    other = TokenBudgetBatchSampler(lengths, 8, num_replicas=3, rank=0, seed=5)
    assert epoch_digest(other)["order"] != expected


def test_the_check_on_a_one_rank_group_returns_this_ranks_digest():
    """Invariant: in a one-process group, assert_rank_consistent agrees with itself and returns
    exactly epoch_digest(sampler), for a plain, an unpadded and a batched sampler."""
    samplers = [
        DistributedSampler(range(10), 1, 0, seed=3),
        UnpaddedDistributedSampler(range(7), 1, 0, seed=1),
        BatchSampler(DistributedSampler(range(5), 1, 0), 2, drop_last=False),
    ]
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        for sampler in samplers:
            assert assert_rank_consistent(sampler) == epoch_digest(sampler)
    finally:
        dist.destroy_process_group()


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
@pytest.mark.parametrize("world", [2, 3])
def test_the_check_over_a_subgroup_compares_exactly_its_ranks(world):
    """Invariant: assert_rank_consistent(group=g) gathers over g alone: ranks 1..W-1 of a W-rank
    world, splitting the data among themselves, agree; rank 0, outside g, takes no part. (The
    one-rank check first, in this process, is the same call.)"""
    test_the_check_on_a_one_rank_group_returns_this_ranks_digest()
    tests = str(Path(__file__).parent)
    results = run_world("worlds:check_in_a_subgroup", world, 11, timeout=90, pythonpath=[tests])
    assert results[0] is None
    for member, digest in enumerate(results[1:]):
        sampler = DistributedSampler(range(11), world - 1, member, seed=4)
        sampler.set_epoch(2)
        assert digest == epoch_digest(sampler)


def _order_hash(indices: list[int]) -> str:
    """The digest's order: SHA-1 of the indices as int64 bytes, 16 hex digits."""
    return hashlib.sha1(np.asarray(indices, dtype=np.int64).tobytes()).hexdigest()[:16]


@given(n=dataset_lengths, seed=seeds, epoch=epochs, shuffle=st.booleans(), k=st.integers(0, 3))
def test_the_digest_reads_through_batch_samplers_and_iteration_runs(n, seed, epoch, shuffle, k):
    """Invariant: through a BatchSampler (``.sampler``) and an IterationBasedBatchSampler
    (``.batch_sampler``) the digest sees the DistributedSampler inside: its seed, epoch, the
    hash of its epoch order (unshuffled too) and its resume position (nested in the state)."""
    ds = ResumableDistributedSampler(range(n), 1, 0, shuffle=shuffle, seed=seed)
    ds.set_epoch(epoch)
    batches = ResumableBatchSampler(ds, 2, drop_last=False)
    k = min(k, len(batches))
    take = iter(batches)
    for _ in range(k):
        next(take)
    run = IterationBasedBatchSampler(batches, 5)
    same = DistributedSampler(range(n), 1, 0, shuffle=shuffle, seed=seed)
    same.set_epoch(epoch)
    order = _order_hash(list(same))  # the whole epoch: one rank
    for outer in (batches, run):
        digest = epoch_digest(outer)
        assert (digest["seed"], digest["epoch"], digest["shuffle"]) == (seed, epoch, shuffle)
        assert digest["order"] == order
    assert epoch_digest(batches)["position"] == {"start": 0, "position": min(2 * k, n)}


def test_the_digest_reads_the_indices_of_any_sampler():
    """Invariant: a sampler that is not a DistributedSampler but yields indices() (the weighted
    sampler) is digested by the hash of the epoch it yields."""
    s = WeightedBalanceClassSampler([0, 0, 1, 1, 1, 2], [1, 2, 3], length=9, seed=4)
    assert epoch_digest(s)["order"] == _order_hash(list(s))


class _Link:
    """A sampler-like link of a chain: ``.sampler`` is the next one."""

    def __init__(self, inner: object) -> None:
        self.sampler = inner

    def __len__(self) -> int:
        return 0


def test_the_digest_follows_a_chain_sixteen_samplers_deep_and_no_deeper():
    """Invariant: the digest follows .sampler through 16 samplers (the outer one included), so
    a chain that loops back on itself still ends; a field 17 deep is not read."""
    loop = _Link(None)
    loop.sampler = loop
    assert epoch_digest(loop)["type"] == "_Link"  # ends
    for depth, seen in ((15, True), (16, False)):
        outer: object = DistributedSampler(range(4), 1, 0, seed=9)
        for _ in range(depth):
            outer = _Link(outer)
        assert ("seed" in epoch_digest(outer)) is seen
