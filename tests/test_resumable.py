"""Properties of distsampling.resumable: each resumable form is its plain class plus a state.

The resume arithmetic itself (resume == uninterrupted, elastic, the DataLoader rule) is proven
in tests/test_resume.py over these classes; here: the resume layer changes nothing a fresh
epoch reads, a sampler composed with ``Resumable`` in a user's project resumes (what the
tutorial tells a reader to write), and each class names what its state must match.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from distsampling import (
    BatchSampler,
    DistributedSampler,
    DistributedSamplerWrapper,
    Resumable,
    ResumableBatchSampler,
    ResumableDistributedSampler,
    ResumableDistributedSamplerWrapper,
    ResumableUnpaddedDistributedSampler,
    ResumableWeightedBalanceClassSampler,
    UnpaddedDistributedSampler,
    WeightedBalanceClassSampler,
)
from strategies import epochs, flags, ranks_for, seeds, world_sizes

LABELS = [0] * 7 + [1] * 3 + [2] * 2  # 12 samples in 3 classes


def pair(kind: str, n: int, world: int, rank: int, seed: int, shuffle: bool, drop_last: bool):
    """The plain sampler of ``kind`` and its resumable form, built alike."""
    if kind == "DistributedSampler":
        args = (range(n), world, rank, shuffle, seed, drop_last)
        return DistributedSampler(*args), ResumableDistributedSampler(*args)
    if kind == "UnpaddedDistributedSampler":
        args = (range(n), world, rank, shuffle, seed)
        return UnpaddedDistributedSampler(*args), ResumableUnpaddedDistributedSampler(*args)
    if kind == "WeightedBalanceClassSampler":
        args = (LABELS, [1, 2, 3], n, seed)
        return WeightedBalanceClassSampler(*args), ResumableWeightedBalanceClassSampler(*args)
    if kind == "DistributedSamplerWrapper":
        plain = WeightedBalanceClassSampler(LABELS, [1, 2, 3], n, seed)
        resumable = ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], n, seed)
        rest = (world, rank, shuffle, seed, drop_last)
        return (
            DistributedSamplerWrapper(plain, *rest),
            ResumableDistributedSamplerWrapper(resumable, *rest),
        )
    if kind == "BatchSampler":
        inner = pair("DistributedSampler", n, world, rank, seed, shuffle, drop_last)
        return BatchSampler(inner[0], 3, drop_last), ResumableBatchSampler(inner[1], 3, drop_last)
    raise AssertionError(kind)


KINDS = st.sampled_from(
    [
        "DistributedSampler",
        "UnpaddedDistributedSampler",
        "WeightedBalanceClassSampler",
        "DistributedSamplerWrapper",
        "BatchSampler",
    ]
)


def set_epoch(sampler: Any, epoch: int) -> None:
    (sampler if hasattr(sampler, "set_epoch") else sampler.sampler).set_epoch(epoch)


@given(
    kind=KINDS,
    n=st.integers(0, 30),
    world=world_sizes,
    seed=seeds,
    shuffle=flags,
    drop_last=flags,
    epoch_list=st.lists(epochs, min_size=1, max_size=3),
    data=st.data(),
)
def test_each_resumable_sampler_yields_exactly_its_plain_samplers_epochs(
    kind, n, world, seed, shuffle, drop_last, epoch_list, data
):
    """Invariant: the resume layer changes nothing a fresh epoch reads: for any sequence of
    set_epoch calls, the resumable form yields its plain class's indices in order, its
    indices() too, and the same len."""
    rank = data.draw(ranks_for(world))
    plain, resumable = pair(kind, n, world, rank, seed, shuffle, drop_last)
    for epoch in epoch_list:
        set_epoch(plain, epoch)
        set_epoch(resumable, epoch)
        idx_plain = list(plain)
        assert list(resumable) == idx_plain and len(resumable) == len(plain)
        if hasattr(plain, "indices"):
            assert resumable.indices().tolist() == plain.indices().tolist() == idx_plain


class ComposedSampler(Resumable, DistributedSampler):
    """What the resume tutorial tells a reader to write in their own project."""

    def _identity(self) -> dict[str, Any]:
        return {"dataset_len": self.dataset_len, "seed": self.seed, "shuffle": self.shuffle}


@given(
    n=st.integers(0, 40),
    world=world_sizes,
    new_world=world_sizes,
    seed=seeds,
    epoch=epochs,
    data=st.data(),
)
def test_a_sampler_composed_with_resumable_reads_the_rest_of_its_epoch_once(
    n, world, new_world, seed, epoch, data
):
    """Invariant: ``class S(Resumable, DistributedSampler)`` with its ``_identity`` resumes: after
    every rank of ``world`` read m indices and rank 0's state (through JSON) is loaded on
    ``new_world`` ranks, the reads before and after are each sample of the epoch exactly once,
    beyond padding (fewer repeats than ranks), every new rank reading the same count."""
    ranks = [ComposedSampler(range(n), world, r, seed=seed) for r in range(world)]
    for s in ranks:
        s.set_epoch(epoch)
    m = data.draw(st.integers(0, len(ranks[0])), label="m")
    iterators = [iter(s) for s in ranks]
    before = [i for it in iterators for i in (next(it) for _ in range(m))]
    state = json.loads(json.dumps(ranks[0].state_dict()))
    after = []
    for r in range(new_world):
        s = ComposedSampler(range(n), new_world, r, seed=seed)
        s.load_state_dict(state)
        s.set_epoch(state["epoch"])  # a loop does this on resume: the position survives it
        after.append(list(s))
    assert len({len(a) for a in after}) <= 1
    read = before + [i for a in after for i in a]
    assert set(read) == set(range(n))
    assert len(read) - n < max(world, new_world)


@pytest.mark.parametrize(
    ("kind", "other", "field"),
    [
        ("DistributedSampler", {"n": 11}, "dataset_len"),
        ("DistributedSampler", {"seed": 1}, "seed"),
        ("DistributedSampler", {"shuffle": False}, "shuffle"),
        ("DistributedSampler", {"drop_last": True}, "drop_last"),
        ("UnpaddedDistributedSampler", {"n": 11}, "dataset_len"),
        ("WeightedBalanceClassSampler", {"n": 11}, "length"),
        ("WeightedBalanceClassSampler", {"seed": 1}, "seed"),
        ("DistributedSamplerWrapper", {"n": 11}, "sampler_len"),
        ("DistributedSamplerWrapper", {"drop_last": True}, "drop_last"),
        ("BatchSampler", {"drop_last": True}, "drop_last"),
    ],
)
def test_a_state_saved_over_other_data_or_settings_is_refused_naming_the_field(kind, other, field):
    """Invariant: each resumable form names what its state must match; a state saved with
    another length, seed or flag is refused with that field, its saved and its current value."""
    args = {"n": 10, "world": 2, "rank": 0, "seed": 0, "shuffle": True, "drop_last": False}
    saved = pair(kind, **args)[1].state_dict()
    resumable = pair(kind, **{**args, **other})[1]
    with pytest.raises(ValueError, match=rf"^state does not match this sampler: {field} was "):
        resumable.load_state_dict(saved)


def test_the_weighted_state_names_its_classes_by_a_digest_of_their_sizes_and_draws():
    """Invariant: other labels of the same length, or other weights, change ``classes``: a state
    saved over them is refused, naming the field."""
    saved = ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], 10).state_dict()
    for labels, weight in (([0] * 6 + [1] * 4 + [2] * 2, [1, 2, 3]), (LABELS, [3, 2, 1])):
        other = ResumableWeightedBalanceClassSampler(labels, weight, 10)
        with pytest.raises(ValueError, match=r"^state does not match this sampler: classes was "):
            other.load_state_dict(saved)


def test_the_resumable_wrapper_refuses_to_save_an_inner_epoch_it_cannot_draw_again():
    """Invariant: over torch's RandomSampler (no state, a generator of its own) state_dict()
    says what the inner sampler needs, naming it; over a list it saves ``sampler: None``."""
    inner = torch.utils.data.RandomSampler(range(5), generator=torch.Generator().manual_seed(0))
    with pytest.raises(TypeError, match=r"^DistributedSamplerWrapper can save its position only"):
        ResumableDistributedSamplerWrapper(inner, 2, 0).state_dict()
    assert ResumableDistributedSamplerWrapper([3, 1, 2], 2, 0).state_dict()["sampler"] is None


@given(n=st.integers(0, 30), world=world_sizes, data=st.data())
def test_the_resumable_wrapper_saves_what_the_loop_consumed_with_its_inner_state(n, world, data):
    """Invariant: state_dict(consumed=j) of the resumable wrapper is its position j of the
    latest iter() (what a plain DataLoader's loop used, not what the workers fetched), with the
    inner sampler's state beside it; it resumes at exactly that point."""
    rank = data.draw(ranks_for(world))

    def make() -> ResumableDistributedSamplerWrapper:
        inner = ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], n, seed=1)
        return ResumableDistributedSamplerWrapper(inner, world, rank, seed=2)

    whole = list(make())
    wrapper = make()
    it = iter(wrapper)
    handed_out = data.draw(st.integers(0, len(whole)), label="handed out")
    for _ in range(handed_out):
        next(it)
    j = data.draw(st.integers(0, handed_out), label="consumed")
    state = json.loads(json.dumps(wrapper.state_dict(consumed=j)))
    assert state["position"] == j and state["sampler"] == make().sampler.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    assert list(resumed) == whole[j:]
