"""Single-process properties of the rank-consistency digest (the collective runs in test_multiprocess)."""

from __future__ import annotations

import numpy as np
import torch
import torch.utils.data.distributed as torch_distributed
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import RandomSampler

from distsampling import (
    BatchSampler,
    DistributedSampler,
    DistributedSamplerWrapper,
    UnpaddedDistributedSampler,
    epoch_digest,
)
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

    (torch's cannot resume: it has no position; ours, fresh, is at the start.)
    """
    ours = DistributedSampler(range(n), 2, 0, seed=seed)
    theirs = torch_distributed.DistributedSampler(range(n), 2, 0, seed=seed)
    ours.set_epoch(epoch)
    theirs.set_epoch(epoch)
    digest_ours, digest_torch = epoch_digest(ours), epoch_digest(theirs)
    assert digest_ours.pop("position") == {"start": 0, "position": 0}
    assert digest_torch.pop("position") is None
    assert digest_ours == digest_torch


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
        s = DistributedSampler(range(20), 2, rank, seed=1)
        s.set_epoch(1)
        it = iter(s)
        for _ in range(k):
            next(it)
        fresh = DistributedSampler(range(20), 2, rank, seed=1)
        fresh.load_state_dict(s.state_dict())
        fresh.set_epoch(1)  # as the training loop does on resume: the position survives
        digests.append(epoch_digest(fresh))
    differing = [key for key in digests[0] if digests[0][key] != digests[1][key]]
    assert differing == ["position"]
    assert [d["position"]["position"] for d in digests] == [2, 3]
