"""MixtureSampler and MixtureBatchSampler under Lightning's real ``Trainer`` (one CPU process):
epochs of changing length, every step of every epoch reaching ``training_step``.

An epoch of a mixture is the steps that start in its ``epoch_length`` global positions, so
epochs differ by a step. Lightning counts the loader's batches once, before the first epoch it
runs, and ends every epoch at that count; the samplers' ``len()`` under such a fit is the most
any epoch holds, so a shorter epoch ends early (StopIteration) and a longer one is read whole.
From its first position a sampler's epoch 0 is a longest one; the fits here count a shorter
one first: after an elastic resume (the Trainer's epoch 0 is the rest of a resumed epoch), and
in a fit resumed from Lightning's checkpoint at a short epoch.

References:
    lightning/pytorch/loops/fit_loop.py (setup_data: the count; on_advance_start: set_epoch)
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from torch.utils.data import DataLoader

from distsampling import MixtureBatchSampler, MixtureSampler

pytest.importorskip("pytorch_lightning")

from loops_frameworks import _recorder
from test_validate import _fit

SIZES, WEIGHTS = [7, 6], [0.5, 0.5]
#: how a sampler is handed to the loader: its own batch sampler, or the loader's batch_size
FORMS = ("batch_sampler", "sampler")
#: Lightning's default (one count) and a count each epoch
SETTINGS = {"counted once": {}, "recounted": {"reload_dataloaders_every_n_epochs": 1}}


def _loader(sampler: MixtureSampler, form: str) -> DataLoader:
    """A loader of one micro-batch a batch over ``ConcatDataset``'s indices themselves."""
    data = list(range(sum(SIZES)))
    if form == "batch_sampler":
        return DataLoader(data, batch_sampler=MixtureBatchSampler(sampler))
    return DataLoader(data, batch_size=sampler.batch_size, sampler=sampler)


def _plans(make: Any, form: str, epochs: range) -> tuple[dict[int, list[list[int]]], dict]:
    """Each epoch's batches as a loop that sets the epoch first reads them, and its loader's
    ``len()`` (torch's: the epoch's, with any steps read on an earlier grid), from a fresh
    sampler (``make()``) per epoch, outside Lightning."""
    plans, lens = {}, {}
    for e in epochs:
        sampler = make()
        sampler.set_epoch(e)
        loader = _loader(sampler, form)
        plans[e], lens[e] = [batch.tolist() for batch in loader], len(loader)
    return plans, lens


def _check_counts(model: Any, plans: dict, lens: dict, setting: str) -> None:
    """Lightning's count each epoch: counted once, the most batches any epoch holds; counted
    each epoch, that epoch's own ``len()``, as torch gives it."""
    if setting == "recounted":
        assert model.lens == lens
    else:
        assert model.lens == dict.fromkeys(plans, max(map(len, plans.values())))


def _elastic() -> MixtureSampler:
    """A sampler resumed on another grid (micro-batch 4 -> 2, one rank) after one step of
    epoch 0: its origin is 4, so the rest of epoch 0 is 3 steps and each later epoch 5."""
    old = MixtureSampler(SIZES, WEIGHTS, batch_size=4, num_replicas=1, rank=0, epoch_length=10)
    read = iter(old)
    [next(read) for _ in range(4)]  # one step of epoch 0
    new = MixtureSampler(SIZES, WEIGHTS, batch_size=2, num_replicas=1, rank=0, epoch_length=10)
    new.load_state_dict(old.state_dict())
    return new


@pytest.mark.parametrize("setting", SETTINGS)
def test_every_step_of_a_longer_later_epoch_reaches_the_model_after_an_elastic_resume(setting):
    """Invariant: a ``MixtureBatchSampler`` resumed on another grid, whose later epochs hold more
    steps than the Trainer's epoch 0 (checked first), trains every batch of every epoch,
    in order, under a real ``Trainer``, counted once (the most an epoch holds) or each epoch
    (that epoch's, exact)."""
    epochs = range(3)
    plans, lens = _plans(_elastic, "batch_sampler", epochs)
    lengths = [len(plans[e]) for e in epochs]
    assert max(lengths[1:]) > lengths[0], lengths  # a later epoch is longer than epoch 0

    model = _recorder(None, epoch_hook=False)
    _fit(model, _loader(_elastic(), "batch_sampler"), max_epochs=len(epochs), **SETTINGS[setting])
    assert model.epochs == plans
    _check_counts(model, plans, lens, setting)


def _save_at_end(path: str) -> Any:
    """A Lightning callback that saves the fit's checkpoint at ``path`` when the fit ends."""
    import pytorch_lightning as pl

    class SaveAtEnd(pl.Callback):
        def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
            trainer.save_checkpoint(path)

    return SaveAtEnd()


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("form", FORMS)
def test_a_fit_resumed_at_a_short_epoch_trains_every_step_of_each_longer_one(
    form, setting, tmp_path
):
    """Invariant: a fit resumed from Lightning's checkpoint at epoch 1, the sampler at that
    epoch too (the user's own resume), where epoch 2 holds more steps than epoch 1 (checked
    first): every batch of epochs 1, 2 and 3 reaches ``training_step``, in order, whether the
    sampler is the loader's or its batch sampler's, counted once (the most an epoch holds) or
    each epoch (that epoch's, exact)."""

    def make() -> MixtureSampler:  # two ranks' global batch of 4 over 10 positions an epoch
        return MixtureSampler(SIZES, WEIGHTS, batch_size=2, num_replicas=2, rank=0,
                              epoch_length=10)  # fmt: skip

    epochs = range(1, 4)
    plans, lens = _plans(make, form, epochs)
    assert len(plans[2]) > len(plans[1]), plans  # the epoch after the resumed one is longer

    path = os.fspath(tmp_path / "epoch0.ckpt")
    _fit(_recorder(None, epoch_hook=False), _loader(make(), form), max_epochs=1,
         callbacks=[_save_at_end(path)])  # fmt: skip
    sampler = make()
    sampler.set_epoch(1)  # as the user's own resume of the sampler left it
    model = _recorder(None, epoch_hook=False)
    _fit(model, _loader(sampler, form), max_epochs=4, ckpt_path=path, **SETTINGS[setting])
    assert model.epochs == plans
    _check_counts(model, plans, lens, setting)


@pytest.mark.parametrize("form", FORMS)
def test_len_outside_lightning_is_this_epochs_length(form):
    """Invariant: with Lightning imported but no fit counting, ``len()`` is this epoch's length
    (torch's ``len()``), epoch by epoch: the batches a loader yields."""
    for e in range(4):
        sampler = MixtureSampler(SIZES, WEIGHTS, batch_size=2, num_replicas=2, rank=0,
                                 epoch_length=10)  # fmt: skip
        sampler.set_epoch(e)
        loader = _loader(sampler, form)
        assert len(loader) == len(list(loader))
