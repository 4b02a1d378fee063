"""Properties of distsampling.BatchSampler, each checked against torch's own class."""

from __future__ import annotations

import pytest
import torch.utils.data as tud
from hypothesis import given
from hypothesis import strategies as st

from distsampling import BatchSampler, DistributedSampler
from strategies import (
    argument_values,
    batch_sizes,
    dataset_lengths,
    epochs,
    flags,
    sampler_args,
    world_sizes,
)


@given(n=dataset_lengths, batch_size=batch_sizes, drop_last=flags)
def test_matches_torch_batches_and_len_over_a_sequential_sampler(n, batch_size, drop_last):
    """Invariant: same batches, same order, same len as torch.utils.data.BatchSampler."""
    sampler = tud.SequentialSampler(range(n))
    idx_ours = BatchSampler(sampler, batch_size, drop_last)
    idx_torch = tud.BatchSampler(sampler, batch_size, drop_last)
    assert list(idx_ours) == list(idx_torch)
    assert len(idx_ours) == len(idx_torch) == len(list(idx_ours))


@given(
    n=dataset_lengths, args=sampler_args(), epoch=epochs, batch_size=batch_sizes, drop_last=flags
)
def test_matches_torch_over_our_and_torchs_distributed_samplers(
    n, args, epoch, batch_size, drop_last
):
    """Invariant: batching our DistributedSampler equals torch's BatchSampler over torch's sampler."""
    ours = DistributedSampler(range(n), **args)
    theirs = tud.DistributedSampler(range(n), **args)
    ours.set_epoch(epoch)
    theirs.set_epoch(epoch)
    idx_ours = list(BatchSampler(ours, batch_size, drop_last))
    idx_torch = list(tud.BatchSampler(theirs, batch_size, drop_last))
    assert idx_ours == idx_torch
    assert len(BatchSampler(ours, batch_size, drop_last)) == len(idx_torch)


@given(
    indices=st.lists(st.integers(0, 10**6), max_size=60), batch_size=batch_sizes, drop_last=flags
)
def test_concatenated_batches_are_the_sampler_in_order(indices, batch_size, drop_last):
    """Invariant: batches are consecutive runs of the sampler; only a short last batch may go."""
    batches = list(BatchSampler(indices, batch_size, drop_last))
    flat = [i for b in batches for i in b]
    kept = len(indices) - (len(indices) % batch_size if drop_last else 0)
    assert flat == indices[:kept]
    assert all(len(b) == batch_size for b in batches[:-1])
    assert all(0 < len(b) <= batch_size for b in batches)


@given(n=dataset_lengths, world=world_sizes, batch_size=batch_sizes, shuffle=flags, data=st.data())
def test_every_rank_yields_the_same_number_of_batches(n, world, batch_size, shuffle, data):
    """Invariant: DistributedSampler -> BatchSampler gives every rank equal batch counts (DDP never waits)."""
    drop_last = data.draw(flags, label="drop_last")
    counts = {
        len(
            list(
                BatchSampler(
                    DistributedSampler(range(n), world, r, shuffle=shuffle, drop_last=drop_last),
                    batch_size,
                    drop_last,
                )
            )
        )
        for r in range(world)
    }
    assert len(counts) == 1


@pytest.mark.parametrize("batch_size", [0, -1, 2.0, True, "3", None])
def test_bad_batch_size_raises_torchs_error_naming_the_value(batch_size):
    """Invariant: the same ValueError, word for word, as torch for any non-positive-int batch_size."""
    with pytest.raises(ValueError) as ours:
        BatchSampler(range(4), batch_size, False)
    with pytest.raises(ValueError) as theirs:
        tud.BatchSampler(range(4), batch_size, False)
    assert (
        str(ours.value)
        == str(theirs.value)
        == f"batch_size should be a positive integer value, but got batch_size={batch_size}"
    )


@pytest.mark.parametrize("drop_last", [0, 1, "yes", None])
def test_non_bool_drop_last_raises_torchs_error_naming_the_value(drop_last):
    """Invariant: drop_last must be a bool; the same message as torch."""
    with pytest.raises(ValueError) as ours:
        BatchSampler(range(4), 2, drop_last)
    with pytest.raises(ValueError) as theirs:
        tud.BatchSampler(range(4), 2, drop_last)
    assert (
        str(ours.value)
        == str(theirs.value)
        == f"drop_last should be a boolean value, but got drop_last={drop_last}"
    )


def outcome(build) -> list | Exception:
    """The batches ``build()`` yields, or the error it raises."""
    try:
        return list(build())
    except (TypeError, ValueError) as err:
        return err


@given(name=st.sampled_from(["batch_size", "drop_last"]), value=argument_values)
def test_every_argument_value_is_taken_or_refused_exactly_as_torch_does(name, value):
    """Invariant: for a value of any type (numpy's and torch's ints and bools included), ours
    yields torch's batches where torch takes it, and raises torch's error, word for word,
    where torch refuses it (``batch_size=np.int64(2)`` too: torch checks ``isinstance(int)``)."""
    kwargs = {"batch_size": 2, "drop_last": False, name: value}
    idx_ours = outcome(lambda: BatchSampler(range(5), **kwargs))
    idx_torch = outcome(lambda: tud.BatchSampler(range(5), **kwargs))
    if isinstance(idx_torch, Exception):
        assert (type(idx_ours), str(idx_ours)) == (type(idx_torch), str(idx_torch))
    else:
        assert idx_ours == idx_torch


def test_lightnings_rebuild_of_a_users_batch_sampler_with_ours_inside_and_no_sampler_is_allowed():
    """Invariant: the refusal of Lightning's rebuild looks only at a share the rebuilt batch
    sampler holds as its ``sampler``: a user's batch sampler that batches through ours but keeps
    no ``sampler`` attribute (nothing of a rank's share to drop) is rebuilt by Lightning's own
    ``_update_dataloader`` without a word, and reads Lightning's split, batched."""
    pytest.importorskip("pytorch_lightning")
    from pytorch_lightning.trainer.connectors.data_connector import _get_distributed_sampler
    from pytorch_lightning.utilities.data import _update_dataloader

    class UsersBatches(tud.Sampler):  # batch_size and drop_last: Lightning rebuilds it
        def __init__(self, sampler, batch_size, drop_last):
            self._batches = BatchSampler(sampler, batch_size, drop_last)  # no .sampler kept
            self.batch_size, self.drop_last = batch_size, drop_last

        def __iter__(self):
            return iter(self._batches)

        def __len__(self):
            return len(self._batches)

    loader = tud.DataLoader(range(13), batch_sampler=UsersBatches(range(13), 2, False))
    split = _get_distributed_sampler(loader, True, 0, num_replicas=2, rank=0)
    rebuilt = _update_dataloader(loader, split)
    lightnings = tud.DistributedSampler(range(13), 2, 0, shuffle=True, seed=0)
    assert [i for b in rebuilt for i in b.tolist()] == list(lightnings)
