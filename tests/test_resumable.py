"""Properties of distsampling.resume.resumable: each resumable form is its plain class plus a state.

The resume arithmetic itself (resume == uninterrupted, elastic, the DataLoader rule) is proven
in tests/test_resume.py over these classes; here: the resume layer changes nothing a fresh
epoch reads, a sampler composed with ``Resumable`` in a user's project resumes (what the
tutorial tells a reader to write), and each class names what its state must match.
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import RandomSampler, SubsetRandomSampler, WeightedRandomSampler

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
from strategies import (
    elastic_world_sizes,
    epochs,
    flags,
    ranks_for,
    seeds,
    stop_points,
    torch_sampler_args,
    world_sizes,
)

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
    if kind == "DistributedSamplerWrapper(RandomSampler)":  # torch's, with a seeded generator
        rest = (world, rank, shuffle, seed, drop_last)
        plain, resumable = (
            RandomSampler(range(n + 1), generator=torch.Generator().manual_seed(seed))
            for _ in range(2)
        )
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
        "DistributedSamplerWrapper(RandomSampler)",
        "BatchSampler",
    ]
)


def set_epoch(sampler: Any, epoch: int) -> None:
    (sampler if hasattr(sampler, "set_epoch") else sampler.sampler).set_epoch(epoch)


def take(sampler: Any, k: int) -> list[int]:
    """The first ``k`` indices of a new ``iter()``: what a loop read before it was interrupted."""
    it = iter(sampler)
    return [next(it) for _ in range(k)]


def roundtrip(state: dict) -> dict:
    return json.loads(json.dumps(state))


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
    """Invariant: over a sampler with no state, no generator of its own and no fixed order (the
    plain weighted sampler) state_dict() says what the inner sampler needs, naming it; over a
    list it saves ``sampler: None``; over torch's RandomSampler with a generator, that
    generator's state before the epoch's draw, as base64 text under the sampler's kind."""
    inner = WeightedBalanceClassSampler(LABELS, [1, 2, 3], 5)
    with pytest.raises(TypeError) as error:
        ResumableDistributedSamplerWrapper(inner, 2, 0).state_dict()
    assert str(error.value) == (
        "DistributedSamplerWrapper can save its position only if its epoch can be drawn again: "
        "the inner sampler needs state_dict()/load_state_dict() (this package's Resumable* "
        "samplers have them), a generator of its own (torch's RandomSampler, "
        "WeightedRandomSampler and SubsetRandomSampler with generator=torch.Generator()"
        ".manual_seed(seed)) or a fixed order (SequentialSampler, a list), but got "
        f"sampler={inner!r} of type WeightedBalanceClassSampler"
    )
    assert ResumableDistributedSamplerWrapper([3, 1, 2], 2, 0).state_dict()["sampler"] is None
    g = torch.Generator().manual_seed(0)
    before = base64.b64encode(g.get_state().numpy().tobytes()).decode("ascii")
    wrapper = ResumableDistributedSamplerWrapper(RandomSampler(range(5), generator=g), 2, 0)
    take(wrapper, 2)  # the draw moves the generator on; the state keeps where it started
    saved = {"kind": "RandomSampler", "version": 1, "generator": before}
    assert wrapper.state_dict()["sampler"] == saved


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


# --- the wrapper over torch's samplers: the generator's state is the inner epoch's ----------


def torch_sampler(kind: str, args: dict, seed: int) -> Any:
    """torch's sampler of ``kind`` with a new generator seeded by ``seed``: what every rank
    builds, in the first run and in the resumed one."""
    return getattr(torch.utils.data, kind)(**args, generator=torch.Generator().manual_seed(seed))


@given(
    spec=torch_sampler_args(),
    world=world_sizes,
    seed=seeds,
    shuffle=flags,
    drop_last=flags,
    done=st.integers(0, 2),
    data=st.data(),
)
def test_a_wrapper_over_a_seeded_torch_sampler_resumes_its_epoch_and_the_next_as_uninterrupted(
    spec, world, seed, shuffle, drop_last, done, data
):
    """Invariant: over torch's RandomSampler, WeightedRandomSampler or SubsetRandomSampler with a
    seeded generator, after ``done`` whole epochs and k indices of the next one (or no iter() of
    it at all), the state through JSON, loaded into a new wrapper over a new sampler of the
    same seed, reads the rest: first k + rest == the uninterrupted epoch. The next epoch is the
    uninterrupted next one, and the generator ends where the uninterrupted run's does."""
    rank = data.draw(ranks_for(world))

    def build() -> ResumableDistributedSamplerWrapper:
        inner = torch_sampler(*spec, seed)
        return ResumableDistributedSamplerWrapper(inner, world, rank, shuffle, seed, drop_last)

    uninterrupted, whole = build(), []
    for epoch in range(done + 2):
        uninterrupted.set_epoch(epoch)
        whole.append(list(uninterrupted))
    interrupted = build()
    for epoch in range(done):
        interrupted.set_epoch(epoch)
        list(interrupted)
    interrupted.set_epoch(done)
    if data.draw(st.booleans(), label="saved before any iter() of the epoch"):
        first = []
    else:
        first = take(interrupted, data.draw(stop_points(len(whole[done])), label="k"))
    state = roundtrip(interrupted.state_dict())

    resumed = build()  # a new run: its generator back at the seed
    resumed.load_state_dict(state)
    resumed.set_epoch(done)  # as a loop does on resume: the loaded position stays
    assert first + list(resumed) == whole[done]
    resumed.set_epoch(done + 1)
    assert list(resumed) == whole[done + 1]
    g, g_uninterrupted = resumed.sampler.generator, uninterrupted.sampler.generator
    assert torch.equal(g.get_state(), g_uninterrupted.get_state())


@given(spec=torch_sampler_args(), world=world_sizes, seed=seeds, data=st.data())
def test_every_iter_of_a_loaded_epoch_over_a_torch_sampler_yields_the_same_rest(
    spec, world, seed, data
):
    """Invariant: after a load, every iter() of the loaded epoch (one never read, a second one,
    one after set_epoch of the same epoch, which torch's sampler never hears of) yields the
    same rest of the epoch drawn from the saved generator state; state_dict() after j more
    indices equals the uninterrupted run's after k + j; the next epoch is the uninterrupted one."""
    rank = data.draw(ranks_for(world))

    def build() -> ResumableDistributedSamplerWrapper:
        return ResumableDistributedSamplerWrapper(
            torch_sampler(*spec, seed), world, rank, seed=seed
        )

    uninterrupted = build()
    whole = list(uninterrupted)
    uninterrupted.set_epoch(1)
    next_epoch = list(uninterrupted)
    k = data.draw(stop_points(len(whole)), label="k")
    interrupted = build()
    take(interrupted, k)
    state = roundtrip(interrupted.state_dict())

    resumed = build()
    resumed.load_state_dict(state)
    iter(resumed)  # an iter() never read (a DataLoader's first one): it takes nothing
    assert list(resumed) == whole[k:]
    assert list(resumed) == whole[k:]  # read whole, and again
    resumed.set_epoch(0)  # the same epoch: the loaded draw stays
    assert list(resumed) == whole[k:]
    j = data.draw(st.integers(0, len(whole) - k), label="j")
    take(resumed, j)
    read_on = build()
    take(read_on, k + j)
    assert roundtrip(resumed.state_dict()) == roundtrip(read_on.state_dict())
    resumed.set_epoch(0)
    resumed.set_epoch(1)
    assert list(resumed) == next_epoch


@given(
    spec=torch_sampler_args(),
    w1=elastic_world_sizes,
    w2=elastic_world_sizes,
    seed=seeds,
    shuffle=flags,
    drop_last=flags,
    epoch=epochs,
    data=st.data(),
)
def test_a_wrapper_over_a_seeded_torch_sampler_resumed_on_another_world_reads_its_epoch_once(
    spec, w1, w2, seed, shuffle, drop_last, epoch, data
):
    """Invariant: W1 ranks, each building its torch sampler with the same seed, read m indices
    each; rank 0's state through JSON is loaded on W2 ranks built alike. Over the whole epoch
    the reads are the epoch's stream order[p % N] for p < total (each position of the inner
    epoch once, the only repeats padding, the head of the order), every new rank reads the
    same count, and N - max(W1, W2) < total < N + max(W1, W2) bounds padding and drop_last."""

    def build(world: int, rank: int) -> ResumableDistributedSamplerWrapper:
        inner = torch_sampler(*spec, seed)
        s = ResumableDistributedSamplerWrapper(inner, world, rank, shuffle, seed, drop_last)
        s.set_epoch(epoch)
        return s

    order = build(1, 0).epoch_order().tolist()  # the inner epoch in the order ranks split it
    n = len(order)
    ranks = [build(w1, r) for r in range(w1)]
    m = data.draw(st.integers(0, len(ranks[0])), label="m")
    before = [i for s in ranks for i in take(s, m)]
    state = roundtrip(ranks[0].state_dict())
    after = []
    for r in range(w2):
        s = build(w2, r)
        s.load_state_dict(state)
        s.set_epoch(epoch)  # a loop does this on resume: the position survives it
        after.append(list(s))
    assert len({len(a) for a in after}) <= 1
    total = len(before) + sum(map(len, after))
    stream = [order[q % n] for q in range(total)] if n else []
    assert Counter(before + [i for a in after for i in a]) == Counter(stream)
    if drop_last:
        assert n - max(w1, w2) < total <= n
    else:
        assert n <= total < n + max(w1, w2)


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomSampler(range(5)),
        lambda: WeightedRandomSampler([1.0, 2.0, 3.0], 4),
        lambda: SubsetRandomSampler([4, 2, 0]),
    ],
    ids=["RandomSampler", "WeightedRandomSampler", "SubsetRandomSampler"],
)
def test_a_wrapper_over_a_torch_sampler_without_a_generator_refuses_to_save_naming_it(make):
    """Invariant: with generator=None torch draws each epoch from its global RNG, which differs
    per rank and is not saved: state_dict() refuses, naming the sampler and saying to pass
    generator=torch.Generator().manual_seed(seed), the same seed on every rank. torch's global
    RNG is left as it was."""
    sampler = make()
    wrapper = ResumableDistributedSamplerWrapper(sampler, 2, 0)
    rng = torch.get_rng_state()
    with pytest.raises(TypeError) as error:
        wrapper.state_dict()
    name = type(sampler).__name__
    assert str(error.value) == (
        f"DistributedSamplerWrapper can save its position over {name} only if it draws from a "
        "generator of its own: build it with generator=torch.Generator().manual_seed(seed), the "
        "same seed on every rank (with generator=None each epoch comes from torch's global RNG, "
        f"which differs per rank and is not saved), but got sampler={sampler!r} with "
        "generator=None"
    )
    assert torch.equal(torch.get_rng_state(), rng)


_MISSING = object()  # a field left out of a state


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (
            {"kind": "WeightedRandomSampler"},
            ValueError,
            r"^state comes from another sampler: kind was 'WeightedRandomSampler' when saved, "
            r"but this is a RandomSampler$",
        ),
        (
            {"generator": "bm90IGEgc3RhdGU="},
            ValueError,
            r"^generator should be the base64 text of a 5056-byte torch\.Generator state, but got "
            r"generator='bm90IGEgc3RhdGU='$",
        ),
        ({"generator": _MISSING}, KeyError, r"^\"state has no 'generator': it is not a Random"),
        (None, TypeError, r"^state should be a dict from state_dict\(\), but got state=None "),
    ],
    ids=["kind", "generator", "no generator", "no inner state"],
)
def test_a_wrapper_over_a_torch_sampler_refuses_a_bad_inner_state_and_stays_as_it_was(
    change, error, match
):
    """Invariant: the inner state of another torch sampler, a generator field that is not the
    base64 text of this generator's state, a missing field or no inner state at all is refused
    naming it, before anything changes: the epoch, the position and the generator stay."""
    saved = ResumableDistributedSamplerWrapper(
        torch_sampler("RandomSampler", {"data_source": range(9)}, 1), 2, 0
    )
    saved.set_epoch(3)
    take(saved, 2)
    state = roundtrip(saved.state_dict())
    inner = None if change is None else {**state["sampler"], **change}
    if isinstance(inner, dict):
        inner = {key: value for key, value in inner.items() if value is not _MISSING}
    wrapper = ResumableDistributedSamplerWrapper(
        torch_sampler("RandomSampler", {"data_source": range(9)}, 1), 2, 0
    )
    before = (wrapper.state_dict(), wrapper.sampler.generator.get_state())
    with pytest.raises(error, match=match):
        wrapper.load_state_dict({**state, "sampler": inner})
    assert wrapper.state_dict() == before[0]
    assert torch.equal(wrapper.sampler.generator.get_state(), before[1])


class _SavesItself:
    """An inner sampler with its own state (a rotation of ``range(n)``) and, beside it, a
    ``torch.Generator`` that it never draws from."""

    def __init__(self, n: int, shift: int = 0) -> None:
        self.n, self.shift, self.generator = n, shift, torch.Generator().manual_seed(0)

    def __iter__(self):
        return iter([(i + self.shift) % self.n for i in range(self.n)])

    def __len__(self) -> int:
        return self.n

    def state_dict(self) -> dict:
        return {"shift": self.shift}

    def load_state_dict(self, state: dict) -> None:
        self.shift = state["shift"]


def test_an_inner_sampler_with_its_own_state_is_saved_by_it_even_beside_a_generator():
    """Invariant: an inner sampler with state_dict() saves itself, whatever generator it also
    holds: the wrapper's state holds that state, and loading it reads the rest of the epoch."""
    saved = ResumableDistributedSamplerWrapper(_SavesItself(9, shift=4), 2, 1, seed=3)
    head = take(saved, 2)
    state = roundtrip(saved.state_dict())
    assert state["sampler"] == {"shift": 4}
    resumed = ResumableDistributedSamplerWrapper(_SavesItself(9), 2, 1, seed=3)
    resumed.load_state_dict(state)
    assert head + list(resumed) == list(
        ResumableDistributedSamplerWrapper(_SavesItself(9, 4), 2, 1, seed=3)
    )


def test_an_inner_sampler_whose_generator_is_not_torchs_cannot_be_saved():
    """Invariant: only a torch.Generator's state is saved: an inner sampler that draws from
    another generator (numpy's) is built fine, and state_dict() refuses it, naming it."""
    with pytest.raises(TypeError, match=r"can save its position only if its epoch can be drawn"):
        ResumableDistributedSamplerWrapper(_NoState(), 2, 0).state_dict()


class _NoState:
    """An inner sampler with a numpy generator and no state of its own."""

    generator = np.random.default_rng(0)

    def __iter__(self):
        return iter(self.generator.permutation(6).tolist())

    def __len__(self) -> int:
        return 6


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("QUJD" * 10, "'(QUJD){10}'"),  # 40 characters: shown whole
        ("QUJD" * 10 + "QUJ=", r"'(QUJD){10}\.\.\.'"),  # 44: cut after 40
        ("QUJD" * 10 + "Q", r"'(QUJD){10}\.\.\.'"),  # 41: cut after 40
        ("QUJD!" + "QUJD" * 2, "'QUJD!QUJDQUJD'"),  # a character outside base64: not skipped
        ("abc", "'abc'"),  # not base64 at all
    ],
)
def test_a_generator_text_that_is_no_state_is_refused_showing_at_most_40_characters(text, shown):
    """Invariant: the inner generator field must decode, strictly, to a whole generator state;
    otherwise a ValueError shows the text, whole up to 40 characters and cut with '...' past."""
    make = lambda: ResumableDistributedSamplerWrapper(  # noqa: E731
        torch_sampler("RandomSampler", {"data_source": range(9)}, 1), 2, 0
    )
    state = roundtrip(make().state_dict())
    state["sampler"]["generator"] = text
    with pytest.raises(
        ValueError, match=rf"^generator should be the base64 text .*, but got generator={shown}$"
    ):
        make().load_state_dict(state)


def test_a_saved_generator_with_a_character_outside_base64_is_refused_not_skipped():
    """Invariant: the generator text is strict base64: a stray character in a valid state's
    text is an error, not skipped (skipping it would load the state as if it were whole)."""
    make = lambda: ResumableDistributedSamplerWrapper(  # noqa: E731
        torch_sampler("RandomSampler", {"data_source": range(9)}, 1), 2, 0
    )
    state = roundtrip(make().state_dict())
    text = state["sampler"]["generator"]
    state["sampler"]["generator"] = text[:8] + "!" + text[8:]
    with pytest.raises(ValueError, match=r"^generator should be the base64 text of a \d+-byte"):
        make().load_state_dict(state)


def test_an_inner_state_for_a_sampler_that_cannot_load_one_is_refused_saying_what_to_build():
    """Invariant: a state holding an inner sampler's state, loaded around a sampler without
    load_state_dict() or a generator, is refused with a TypeError that says what to build."""
    state = roundtrip(ResumableDistributedSamplerWrapper(_SavesItself(6), 2, 0).state_dict())
    with pytest.raises(
        TypeError,
        match=r"^state holds an inner sampler state, but sampler=\[.*\] has no load_state_dict\(\) "
        r"\(nor a generator\): build the wrapper around the same kind of sampler$",
    ):
        ResumableDistributedSamplerWrapper(list(range(6)), 2, 0).load_state_dict(state)


def test_set_epoch_of_a_loaded_epoch_refuses_a_non_integer_naming_it():
    """Invariant: over a torch sampler, set_epoch right after a load checks its argument as
    every set_epoch does: a non-integer epoch is refused naming it."""
    make = lambda: ResumableDistributedSamplerWrapper(  # noqa: E731
        torch_sampler("RandomSampler", {"data_source": range(9)}, 1), 2, 0
    )
    s = make()
    s.load_state_dict(roundtrip(make().state_dict()))
    with pytest.raises(TypeError, match=r"^epoch should be an integer, but got epoch='0'"):
        s.set_epoch("0")


def test_every_set_epoch_outside_a_loaded_epoch_draws_the_next_inner_epoch():
    """Invariant: over a torch sampler, each set_epoch (but the first, of a loaded epoch) starts
    a new draw from the generator, as torch's sampler draws anew at every iter(): setting the
    same epoch twice reads two different inner epochs (32 samples: equal is a 1 in 32! event)."""
    s = ResumableDistributedSamplerWrapper(
        torch_sampler("RandomSampler", {"data_source": range(32)}, 1), 1, 0
    )
    s.set_epoch(1)
    first = list(s)
    s.set_epoch(1)
    assert sorted(list(s)) == sorted(first) and list(s) != first


def test_a_batch_samplers_consumed_counts_batches_the_last_one_short():
    """Invariant: ``ResumableBatchSampler.state_dict(consumed=k)`` saves the sampler after the
    samples of ``k`` batches of the latest ``iter()`` (a short last batch counts its own size),
    and at most the batches handed out."""
    from distsampling import ResumableBatchSampler, ResumableDistributedSampler

    make = lambda: ResumableBatchSampler(ResumableDistributedSampler(range(11), 1, 0), 4, False)  # noqa: E731
    whole = list(make())  # batches of 4, 4, 3
    for k in range(len(whole) + 1):
        s = make()
        list(s)  # all three handed out
        state = s.state_dict(consumed=k)
        assert state["sampler"]["position"] == sum(map(len, whole[:k]))
        resumed = make()
        resumed.load_state_dict(state)
        assert list(resumed) == whole[k:]
    words = ("consumed should be <= 3 (batches handed out): the latest iter() handed out 3 "
             "batches, but got consumed=4")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
        s.state_dict(consumed=4)
    assert make().state_dict(consumed=0)["sampler"]["position"] == 0  # nothing handed out yet
    one = ResumableBatchSampler(ResumableDistributedSampler(range(3), 1, 0), 4, False)
    assert [len(b) for b in one] == [3]  # one short batch: consumed=1 is its 3 samples
    assert one.state_dict(consumed=1)["sampler"]["position"] == 3
