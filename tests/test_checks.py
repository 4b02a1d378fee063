"""Single-process properties of the rank-consistency digest (the collective runs in test_multiprocess)."""

from __future__ import annotations

import torch.utils.data.distributed as torch_distributed
from hypothesis import given

from distsampling import BatchSampler, DistributedSampler, epoch_digest
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
