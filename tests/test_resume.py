"""Resume anywhere, on any number of ranks: state_dict()/load_state_dict() of every sampler.

The properties: a run interrupted after ``k`` items and resumed from its state reads exactly
the uninterrupted epoch (and the next ones); a loaded position is where every ``iter()`` of its
epoch starts, until ``set_epoch`` moves to another epoch, so a DataLoader that calls ``iter()``
twice (workers, a peek, persistent workers, torchdata's StatefulDataLoader) reads the rest of
the epoch once; the state survives JSON and a fresh process; a state taken on ``W1`` ranks after
each read ``m`` samples, loaded on ``W2`` ranks, reads every sample of the epoch exactly once
over the whole epoch beyond torch-style padding, with equal counts per new rank; bad states are
refused with errors that name the field. The gloo tests (2 -> 3 and 3 -> 2 ranks) are at the end.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import DataLoader, RandomSampler, SubsetRandomSampler, WeightedRandomSampler
from torch.utils.data import DistributedSampler as TorchDistributedSampler
from torchdata.stateful_dataloader import StatefulDataLoader

from distsampling import (
    BatchBalanceClassSampler,
    BatchSampler,
    DistributedSampler,
    DistributedSamplerWrapper,
    GroupedBatchSampler,
    InferenceSampler,
    InfiniteSampler,
    IterationBasedBatchSampler,
    OrderAhead,
    RepeatFactorSampler,
    Resumable,
    ResumableBatchSampler,
    ResumableDistributedSampler,
    ResumableDistributedSamplerWrapper,
    ResumableIndexShuffleSampler,
    ResumableUnpaddedDistributedSampler,
    ResumableWeightedBalanceClassSampler,
    SequentialWindowedDataset,
    UnpaddedDistributedSampler,
    WeightedBalanceClassSampler,
    check_state,
    epoch_permutation,
    resumed_positions,
    run_world,
)
from distsampling.resume.state import CountingIterator, EpochHandle, generator_state, generator_text
from distsampling.wrapper import yields_indices
from strategies import (
    elastic_kinds,
    elastic_world_sizes,
    epochs,
    flags,
    labelled_datasets,
    ranks_for,
    resumable_kinds,
    seeds,
    stop_points,
    world_sizes,
)

ROOT = Path(__file__).resolve().parent.parent
TESTS = str(Path(__file__).parent)
LABELS = [0] * 7 + [1] * 3 + [2] * 2  # 12 samples in 3 classes, for the weighted sampler
_MISSING = object()  # a field left out of a state

DS = "ResumableDistributedSampler"
UNPADDED = "ResumableUnpaddedDistributedSampler"
WRAPPED_WEIGHTED = "ResumableDistributedSamplerWrapper(ResumableWeightedBalanceClassSampler)"
WRAPPED_LIST = "ResumableDistributedSamplerWrapper(list)"
WEIGHTED = "ResumableWeightedBalanceClassSampler"
BATCHED = "ResumableBatchSampler(ResumableDistributedSampler)"
GROUPED = "GroupedBatchSampler(ResumableDistributedSampler)"
ITERATION = "IterationBasedBatchSampler(ResumableBatchSampler(ResumableDistributedSampler))"
WINDOWED = "ResumableDistributedSampler(SequentialWindowedDataset)"
SHUFFLED = "ResumableIndexShuffleSampler"


class WindowedReading:
    """A loop over windows: DistributedSampler picks window numbers, the dataset maps them to
    window starts. The epoch goes to both; the state is the sampler's alone (the dataset's
    state is its epoch, which the sampler's state holds)."""

    def __init__(self, n: int, world: int, rank: int, seed: int, drop_last: bool) -> None:
        self.dataset = SequentialWindowedDataset(max(n, 1) * 3, window=3, seed=abs(seed))
        self.sampler = ResumableDistributedSampler(
            self.dataset, world, rank, seed=seed, drop_last=drop_last
        )

    def set_epoch(self, epoch: int) -> None:
        self.dataset.set_epoch(epoch)
        self.sampler.set_epoch(epoch)

    def __iter__(self):
        return map(self.dataset.__getitem__, self.sampler)

    def state_dict(self) -> dict:
        return {"sampler": self.sampler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.sampler.load_state_dict(state["sampler"])
        self.dataset.set_epoch(state["sampler"]["epoch"])  # the dataset's state: its epoch


def build(kind: str, world: int, rank: int, p: dict) -> Any:
    """A sampler of ``kind`` for ``rank`` of ``world``, built alike on every call."""
    n, seed, drop_last = p["n"], p["seed"], p["drop_last"]

    def distributed() -> ResumableDistributedSampler:
        return ResumableDistributedSampler(range(n), world, rank, p["shuffle"], seed, drop_last)

    if kind == DS:
        return distributed()
    if kind == UNPADDED:
        return ResumableUnpaddedDistributedSampler(range(n), world, rank, p["shuffle"], seed)
    if kind == WRAPPED_WEIGHTED:
        inner = ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], length=n, seed=seed)
        return ResumableDistributedSamplerWrapper(inner, world, rank, p["shuffle"], seed, drop_last)
    if kind == WRAPPED_LIST:
        inner = [(7 * i) % 11 for i in range(n)]  # a fixed inner epoch, repeats included
        return ResumableDistributedSamplerWrapper(inner, world, rank, p["shuffle"], seed, drop_last)
    if kind == WEIGHTED:
        return ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], length=n, seed=seed)
    if kind == BATCHED:
        return ResumableBatchSampler(distributed(), p["batch_size"], drop_last)
    if kind == GROUPED:
        return GroupedBatchSampler(distributed(), [i % 3 for i in range(n)], p["batch_size"])
    if kind == ITERATION:
        return IterationBasedBatchSampler(
            ResumableBatchSampler(distributed(), p["batch_size"], False), 7
        )
    if kind == WINDOWED:
        return WindowedReading(n, world, rank, seed, drop_last)
    if kind == SHUFFLED:
        return ResumableIndexShuffleSampler(range(n), world, rank, p["shuffle"], seed, drop_last)
    raise AssertionError(kind)


def set_epoch(sampler: Any, epoch: int) -> None:
    """The epoch goes where a training loop sends it (a batch sampler: the sampler inside)."""
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)
    elif hasattr(getattr(sampler, "sampler", None), "set_epoch"):
        sampler.sampler.set_epoch(epoch)


def take(sampler: Any, k: int) -> list:
    """The first ``k`` items of a new ``iter()``: what a loop read before it was interrupted."""
    it = iter(sampler)
    return [next(it) for _ in range(k)]


def state_after(kind: str, world: int, rank: int, p: dict, epoch: int, k: int) -> dict:
    """The state a sampler of ``kind`` saves after reading ``k`` items of ``epoch`` (via JSON)."""
    interrupted = build(kind, world, rank, p)
    set_epoch(interrupted, epoch)
    take(interrupted, k)
    return roundtrip(interrupted.state_dict())


def flat(items: list) -> list[int]:
    return [i for b in items for i in b] if items and isinstance(items[0], list) else list(items)


def roundtrip(state: dict) -> dict:
    return json.loads(json.dumps(state))


@st.composite
def params(draw: st.DrawFn) -> dict:
    """The arguments every kind is built from."""
    return {
        "n": draw(st.integers(min_value=0, max_value=40)),
        "seed": draw(seeds),
        "shuffle": draw(flags),
        "drop_last": draw(flags),
        "batch_size": draw(st.integers(min_value=1, max_value=5)),
    }


# --- resume == uninterrupted -------------------------------------------------------------------


@given(kind=resumable_kinds, p=params(), world=world_sizes, epoch=epochs, data=st.data())
def test_first_k_then_the_resumed_rest_is_the_uninterrupted_epoch(kind, p, world, epoch, data):
    """Invariant: for every sampler, epoch and stop point k (0, the end, mid-batch included),
    first k + the rest read after load_state_dict(json round trip) == the uninterrupted epoch,
    element for element (indices() names that rest before it is read, and state_dict()
    saves the loaded place again); the next epoch is the uninterrupted next epoch too."""
    rank = data.draw(ranks_for(world))
    if kind == ITERATION and p["n"] < world:
        p["n"] = world  # a rank with no sample can never reach num_iterations (tested elsewhere)
    if kind == WEIGHTED:
        world, rank = 1, 0
    uninterrupted = build(kind, world, rank, p)
    set_epoch(uninterrupted, epoch)
    idx_epoch = list(uninterrupted)
    set_epoch(uninterrupted, epoch + 1)
    idx_next = list(uninterrupted)

    k = data.draw(stop_points(len(idx_epoch)), label="k")
    interrupted = build(kind, world, rank, p)
    set_epoch(interrupted, epoch)
    first = take(interrupted, k)
    state = roundtrip(interrupted.state_dict())

    resumed = build(kind, world, rank, p)
    resumed.load_state_dict(state)
    assert roundtrip(resumed.state_dict()) == state  # loaded, not read yet: the same place
    set_epoch(resumed, epoch)  # as a training loop does on resume: the position survives it
    if hasattr(resumed, "indices"):  # what the next iter() yields: the rest, nothing else
        assert resumed.indices().tolist() == idx_epoch[k:]
    idx_resumed = first + list(resumed)
    set_epoch(resumed, epoch + 1)
    assert idx_resumed == idx_epoch
    if not kind.startswith("IterationBased"):  # one run, no next epoch: it keeps start_iter
        assert list(resumed) == idx_next


@given(kind=resumable_kinds, p=params(), epoch=epochs, data=st.data())
def test_a_fresh_sampler_or_one_moved_to_another_epoch_saves_the_start_of_its_epoch(
    kind, p, epoch, data
):
    """Invariant: a sampler never iterated saves the start of its epoch, and set_epoch to another
    epoch in the middle of one forgets the position read: either state resumes the whole epoch
    (the iteration sampler, one run with no epochs of its own, is left out)."""
    if kind == ITERATION:
        return
    fresh = build(kind, 3, 1, p)  # at epoch 0, never iterated
    resumed = build(kind, 3, 1, p)
    resumed.load_state_dict(roundtrip(fresh.state_dict()))
    assert list(resumed) == list(fresh)

    moved = build(kind, 3, 1, p)
    set_epoch(moved, epoch)
    take(moved, data.draw(stop_points(len(list(moved))), label="k"))
    set_epoch(moved, epoch + 1)
    resumed = build(kind, 3, 1, p)
    resumed.load_state_dict(roundtrip(moved.state_dict()))
    set_epoch(resumed, epoch + 1)
    uninterrupted = build(kind, 3, 1, p)
    set_epoch(uninterrupted, epoch + 1)
    assert list(resumed) == list(uninterrupted)


@given(kind=resumable_kinds, p=params(), epoch=epochs, data=st.data())
def test_every_iter_of_the_loaded_epoch_starts_at_the_loaded_position(kind, p, epoch, data):
    """Invariant: after load_state_dict of a state taken at k items, every iter() of that epoch
    (a second one, one after a partial read, one after set_epoch of the same epoch) yields the
    rest of the epoch, never its first k items again; state_dict() counts the latest iter()
    from the loaded position."""
    if kind == ITERATION and p["n"] < 3:
        p["n"] = 3  # a rank with no sample can never reach num_iterations (tested elsewhere)
    world, rank = (1, 0) if kind == WEIGHTED else (3, 1)
    uninterrupted = build(kind, world, rank, p)
    set_epoch(uninterrupted, epoch)
    idx_epoch = list(uninterrupted)
    k = data.draw(stop_points(len(idx_epoch)), label="k")
    state = state_after(kind, world, rank, p, epoch, k)

    resumed = build(kind, world, rank, p)
    resumed.load_state_dict(state)
    iter(resumed)  # an iter() never read (a DataLoader's first one): it takes nothing
    assert list(resumed) == idx_epoch[k:]
    assert list(resumed) == idx_epoch[k:]  # read whole, and again: the rest once more
    # a partial read (a peek): the state counts it from the loaded position (at least one
    # item: a batch sampler's iter() is a generator, which starts at its first batch)
    j = data.draw(st.integers(min(1, len(idx_epoch) - k), len(idx_epoch) - k), label="j")
    take(resumed, j)
    read_on = build(kind, world, rank, p)
    set_epoch(read_on, epoch)
    take(read_on, k + j)
    assert roundtrip(resumed.state_dict()) == roundtrip(read_on.state_dict())
    set_epoch(resumed, epoch)  # the loop's call of the same epoch keeps the loaded position
    assert list(resumed) == idx_epoch[k:]


@given(kind=resumable_kinds, p=params(), epoch=epochs, data=st.data())
def test_set_epoch_of_another_epoch_drops_a_loaded_position_and_of_the_same_keeps_it(
    kind, p, epoch, data
):
    """Invariant: after load_state_dict of a state taken at k items of epoch e, set_epoch(e)
    keeps the position (iter() yields the rest), while set_epoch(e') of any other epoch reads
    e' whole, and going back to e then reads e whole too (a position belongs to its epoch)."""
    if kind == ITERATION:
        return  # no set_epoch: its passes are set by itself
    world, rank = (1, 0) if kind == WEIGHTED else (2, 1)
    other = data.draw(epochs.filter(lambda e: e != epoch), label="other epoch")
    uninterrupted = build(kind, world, rank, p)
    whole = {}
    for e in (epoch, other):
        set_epoch(uninterrupted, e)
        whole[e] = list(uninterrupted)
    k = data.draw(stop_points(len(whole[epoch])), label="k")
    state = state_after(kind, world, rank, p, epoch, k)

    kept = build(kind, world, rank, p)
    kept.load_state_dict(state)
    set_epoch(kept, epoch)
    set_epoch(kept, epoch)  # any number of times
    assert list(kept) == whole[epoch][k:]

    dropped = build(kind, world, rank, p)
    dropped.load_state_dict(state)
    set_epoch(dropped, other)
    assert list(dropped) == whole[other]
    set_epoch(dropped, epoch)
    assert list(dropped) == whole[epoch]


@given(args=labelled_datasets(), seed=seeds, epoch=epochs, data=st.data())
def test_the_weighted_sampler_resumed_anywhere_yields_the_rest_of_its_epoch(
    args, seed, epoch, data
):
    """Invariant: a weighted sampler stopped after k indices saves position k; one loaded from that
    state saves it again, names the rest in indices(), and yields it, also after set_epoch of
    the same epoch."""
    sampler = ResumableWeightedBalanceClassSampler(**args, seed=seed)
    sampler.set_epoch(epoch)
    whole = list(sampler)
    k = data.draw(stop_points(len(whole)), label="k")
    first = take(sampler, k)
    state = roundtrip(sampler.state_dict())
    assert (state["epoch"], state["position"]) == (epoch, k)
    resumed = ResumableWeightedBalanceClassSampler(**args, seed=seed)
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state
    assert resumed.indices().tolist() == whole[k:]
    resumed.set_epoch(epoch)
    assert first + list(resumed) == whole


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"position": 11}, ValueError, r"position should be in the interval \[0, 10\], but got "),
        ({"epoch": "1"}, TypeError, r"^epoch should be an integer, but got epoch='1'"),
        ({"position": _MISSING}, KeyError, r"state has no 'position': it is not a ResumableWei"),
        ({"epoch": _MISSING}, KeyError, r"state has no 'epoch': it is not a ResumableWeighted"),
    ],
)
def test_the_weighted_sampler_refuses_a_bad_position_or_epoch_naming_it(change, error, match):
    """Invariant: a position past the epoch's length, a non-integer epoch or a missing field
    fails, naming the field and its value."""
    state = {**_state(WEIGHTED), **change}  # length 10
    state = {key: value for key, value in state.items() if value is not _MISSING}
    with pytest.raises(error, match=match):
        ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], length=10, seed=0).load_state_dict(
            state
        )


@given(kind=resumable_kinds, p=params(), epoch=epochs)
def test_indices_is_what_iter_yields_and_consumes_nothing(kind, p, epoch):
    """Invariant: indices().tolist() == list(sampler), and calling it changes nothing that
    iter() yields afterwards (no generator advanced, no position consumed)."""
    sampler = build(kind, 3, 1, p)
    if not hasattr(sampler, "indices"):
        sampler = getattr(sampler, "sampler", None)  # a batch sampler: the sampler inside
    if not hasattr(sampler, "indices"):
        return  # the windowed reading and the iteration sampler: no single index tensor
    set_epoch(sampler, epoch)
    order = sampler.indices().tolist()
    assert sampler.indices().tolist() == order
    assert list(sampler) == order


@given(n=st.integers(0, 60), world=world_sizes, drop_last=flags)
def test_resuming_at_zero_is_torchs_split(n, world, drop_last):
    """Invariant: resumed_positions at start 0 are the indices torch's own DistributedSampler
    gives each rank of an unshuffled dataset of n (its padding and its drop_last)."""
    for rank in range(world):
        ours = resumed_positions(n, world, rank, 0, drop_last=drop_last).tolist()
        torchs = list(TorchDistributedSampler(range(n), world, rank, False, drop_last=drop_last))
        assert ours == torchs


def test_the_rank_check_over_a_wrapped_random_sampler_indices_draws_once():
    """Invariant: indices() (and epoch_order()) of a wrapper over a seeded RandomSampler read
    the draw that iter() then yields: calling them leaves the training order as it was."""

    def wrapper() -> DistributedSamplerWrapper:
        return DistributedSamplerWrapper(
            RandomSampler(range(20), generator=torch.Generator().manual_seed(3)), 2, 0
        )

    plain, looked_at = wrapper(), wrapper()
    looked_at.indices()
    looked_at.epoch_order()
    assert list(looked_at) == list(plain)


@given(kind=resumable_kinds, p=params(), world=world_sizes, epoch=epochs, data=st.data())
def test_a_loaded_state_is_saved_back_unchanged_and_indices_shows_the_rest(
    kind, p, world, epoch, data
):
    """Invariant: on the world it was saved on, a loaded state is what state_dict() returns
    before the next iter() (a checkpoint of a checkpoint is the same checkpoint), and
    indices() after the load is exactly what the resumed iter() yields."""
    rank = data.draw(ranks_for(world))
    if kind == ITERATION and p["n"] < world:
        p["n"] = world  # a rank with no sample can never reach num_iterations (tested elsewhere)
    if kind == WEIGHTED:
        world, rank = 1, 0
    interrupted = build(kind, world, rank, p)
    set_epoch(interrupted, epoch)
    k = data.draw(stop_points(len(list(interrupted))), label="k")
    set_epoch(interrupted, epoch)
    take(interrupted, k)
    state = roundtrip(interrupted.state_dict())
    resumed = build(kind, world, rank, p)
    resumed.load_state_dict(state)
    assert roundtrip(resumed.state_dict()) == state
    sampler = resumed if hasattr(resumed, "indices") else getattr(resumed, "sampler", None)
    if hasattr(sampler, "indices"):
        assert sampler.indices().tolist() == list(sampler)


@given(n=st.integers(0, 12), world=world_sizes, data=st.data())
def test_resumed_positions_defaults_are_torchs_padded_split(n, world, data):
    """Invariant: drop_last and pad left out are torch's defaults (pad, keep the tail): from
    stream 0 every rank's positions are torch's own DistributedSampler's unshuffled indices,
    padding wrapped mod n (one sample on many ranks included), and from any start the same as
    passing drop_last=False, pad=True."""
    start = data.draw(st.integers(0, n), label="start")
    for rank in range(world):
        theirs = list(TorchDistributedSampler(range(n), world, rank, shuffle=False))
        assert resumed_positions(n, world, rank, 0).tolist() == theirs
        assert torch.equal(
            resumed_positions(n, world, rank, start),
            resumed_positions(n, world, rank, start, drop_last=False, pad=True),
        )


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("n", -1, ValueError),
        ("n", 2.0, TypeError),
        ("num_replicas", 0, ValueError),
        ("num_replicas", "2", TypeError),
        ("rank", 2, ValueError),
        ("start", -1, ValueError),
        ("start", 11, ValueError),
        ("start", 1.5, TypeError),
        ("drop_last", 1, TypeError),
        ("pad", 1, TypeError),
    ],
)
def test_resumed_positions_refuses_bad_arguments_naming_the_value(name, value, error):
    """Invariant: each argument of resumed_positions is checked in the sampler's words: the
    error names the argument and the value (start in [0, n], at least one rank)."""
    args = {"n": 10, "num_replicas": 2, "rank": 1, "start": 4, "drop_last": False, "pad": True}
    args[name] = value
    with pytest.raises(error, match=rf"\b{name} should be .*but got {name}={value!r}"):
        resumed_positions(**args)


@given(
    n=st.integers(0, 30),
    world=world_sizes,
    drop_last=flags,
    unpadded=st.booleans(),
    data=st.data(),
)
def test_a_loaded_position_is_accepted_exactly_up_to_rank_zeros_count_from_its_start(
    n, world, drop_last, unpadded, data
):
    """Invariant: a state's position is at most what rank 0 reads from its stream start
    (resumed_positions' count: floor with drop_last, no padding when unpadded); one more is
    refused naming the position."""
    start = data.draw(st.integers(0, n), label="start")
    position = data.draw(st.integers(0, n + 1), label="position")
    if unpadded:
        drop_last = False
        sampler = ResumableUnpaddedDistributedSampler(range(n), world, 0)
    else:
        sampler = ResumableDistributedSampler(range(n), world, 0, drop_last=drop_last)
    state = {**sampler.state_dict(), "start": start, "position": position}
    most = len(resumed_positions(n, world, 0, start, drop_last=drop_last, pad=not unpadded))
    if position <= most:
        sampler.load_state_dict(state)
        assert sampler.state_dict()["position"] == position
    else:
        with pytest.raises(
            ValueError, match=rf"^position should be .*but got position={position}$"
        ):
            sampler.load_state_dict(state)


@given(n=st.integers(0, 30), world=world_sizes, data=st.data())
def test_state_dict_takes_a_consumed_count_exactly_up_to_what_was_handed_out(n, world, data):
    """Invariant: state_dict(consumed=c) accepts c in [0, handed out] and saves position c; a
    fresh sampler or one just loaded has handed out nothing (only 0, which keeps the loaded
    position); anything else is refused naming consumed."""
    rank = data.draw(ranks_for(world), label="rank")
    s = ResumableDistributedSampler(range(n), world, rank, seed=1)

    def accepts(sampler: ResumableDistributedSampler, handed_out: int, position: int) -> None:
        for c in (-1, 0, handed_out, handed_out + 1):
            if 0 <= c <= handed_out:
                assert sampler.state_dict(consumed=c)["position"] == position + c
            else:
                with pytest.raises(
                    ValueError, match=rf"^consumed should be .*but got consumed={c}$"
                ):
                    sampler.state_dict(consumed=c)

    accepts(s, 0, 0)  # no iter() yet
    k = data.draw(stop_points(len(s)), label="k")
    take(s, k)
    accepts(s, k, 0)
    loaded = ResumableDistributedSampler(range(n), world, rank, seed=1)
    loaded.load_state_dict(s.state_dict())
    accepts(loaded, 0, k)  # loaded, not yet read: the loaded position, nothing consumed
    j = data.draw(st.integers(0, len(s) - k), label="j")
    take(loaded, j)
    accepts(loaded, j, k)  # consumed counts the latest iter(), from the loaded position


@given(epoch=epochs, other=epochs, loaded=st.booleans(), consumed=st.integers(1, 5))
def test_consumed_before_any_iter_of_the_epoch_is_refused_saying_so(epoch, other, loaded, consumed):
    """Invariant: state_dict(consumed=c > 0) right after set_epoch (or load_state_dict), with
    no iter() of that epoch yet, is a ValueError that says why: nothing was handed out, no
    iter() of the epoch has run since it was set or loaded."""
    s = ResumableDistributedSampler(range(20), 2, 1, seed=3)
    if loaded:
        s.load_state_dict({**s.state_dict(), "epoch": other, "position": 2})
    else:  # an epoch read from, then another one set
        s.set_epoch(other)
        take(s, 3)
    s.set_epoch(epoch)
    if epoch == other:  # the same epoch: an iter() of it ran (or none since the load)
        handed_out = 0 if loaded else 3
    else:
        handed_out = 0
    if consumed <= handed_out:
        assert s.state_dict(consumed=consumed)["position"] == consumed
        return
    if handed_out:
        why = f"the latest iter() handed out {handed_out}"
    else:
        why = f"no iter() of epoch {epoch} has run since it was set or loaded"
    with pytest.raises(ValueError) as error:
        s.state_dict(consumed=consumed)
    assert str(error.value) == (
        f"consumed should be <= {handed_out} (samples handed out): {why}, but got "
        f"consumed={consumed}"
    )


def test_consumed_4_right_after_set_epoch_says_no_iter_has_run():
    """Invariant: the plain-DataLoader recipe's state_dict(consumed=...) called before the
    epoch's iter() (a checkpoint hook placed too early) is refused, naming the epoch and why."""
    s = ResumableDistributedSampler(range(20), 2, 0, seed=1)
    s.set_epoch(7)
    with pytest.raises(ValueError) as error:
        s.state_dict(consumed=4)
    assert str(error.value) == (
        "consumed should be <= 0 (samples handed out): no iter() of epoch 7 has run since it "
        "was set or loaded, but got consumed=4"
    )


@pytest.mark.parametrize("k", [0, 65535, 65536, 65537, 131072, 131073, 2 * 65536 + 11])
def test_the_position_counts_every_sample_handed_out_across_long_epochs(k):
    """Invariant: state_dict()'s position is the number of samples the iterator handed out,
    however long the share (indices become Python ints in chunks of 65,536) and after the
    iterator is exhausted."""
    n = 2 * 65536 + 11
    s = ResumableDistributedSampler(range(n), 1, 0, shuffle=False)
    it = iter(s)
    assert list(islice(it, k)) == list(range(k))
    if k == n:
        assert next(it, None) is None  # exhausted: the count stays the whole share
    assert s.state_dict()["position"] == k


def test_indices_are_trusted_only_where_the_iterating_class_defines_them():
    """Invariant: a sampler's indices() stand for its epoch only if the class that defines
    __iter__ defines indices too: a subclass that iterates otherwise, or an object that does
    not iterate at all, yields no trusted indices."""

    class Reversed(ResumableDistributedSampler):
        def __iter__(self):
            return reversed(list(super().__iter__()))

    class NotIterable:
        def indices(self) -> torch.Tensor:
            return torch.arange(3)

    for plain in (
        DistributedSampler(range(7), 2, 1, seed=3),
        ResumableDistributedSampler(range(7), 2, 1, seed=3),
    ):
        assert yields_indices(plain)
        assert plain.indices().tolist() == list(plain)
    assert not yields_indices(Reversed(range(7), 2, 1, seed=3))
    assert not yields_indices(NotIterable())
    assert not yields_indices([3, 1, 2])


def test_the_plain_samplers_have_no_state():
    """Invariant: the plain samplers are torch's features and nothing else: no state_dict or
    load_state_dict (their Resumable* forms have them), so no one saves a position by mistake."""
    plain = [
        DistributedSampler(range(5), 1, 0),
        UnpaddedDistributedSampler(range(5), 1, 0),
        DistributedSamplerWrapper([0, 1], 1, 0),
        WeightedBalanceClassSampler(LABELS, [1, 2, 3], length=5),
        BatchSampler(range(5), 2, False),
        SequentialWindowedDataset(6, 3),
    ]
    for sampler in plain:
        assert not hasattr(sampler, "state_dict"), type(sampler).__name__
        assert not hasattr(sampler, "load_state_dict"), type(sampler).__name__


# --- elastic -----------------------------------------------------------------------------------


@given(
    kind=elastic_kinds, p=params(), w1=elastic_world_sizes, w2=elastic_world_sizes, data=st.data()
)
def test_an_elastic_resume_reads_every_sample_of_the_epoch_once_beyond_padding(
    kind, p, w1, w2, data
):
    """Invariant: W1 ranks each read m items, rank 0's state is loaded on W2 ranks; over the
    whole epoch the reads are the epoch's stream order[p % N] for p < total (each sample once,
    the only repeats are padding, the head of the order); every new rank reads the same count
    (padded kinds), and N - W2 < total < N + max(W1, W2) bounds padding and drop_last's cut."""
    epoch = data.draw(epochs, label="epoch")
    one = build(kind, 1, 0, {**p, "drop_last": False})
    set_epoch(one, epoch)
    order = flat(list(one))  # the epoch's order, unpadded: what one rank would read
    n = len(order)

    firsts = []
    for rank in range(w1):
        s = build(kind, w1, rank, p)
        set_epoch(s, epoch)
        firsts.append(list(s))
    unpadded = kind == UNPADDED
    # lockstep: every rank read m items (unpadded ranks differ by one at the end)
    m = data.draw(st.integers(0, min(map(len, firsts))), label="m")
    before, state = [], None
    for rank in range(w1):
        s = build(kind, w1, rank, p)
        set_epoch(s, epoch)
        before += flat(take(s, m))
        if rank == 0:
            state = roundtrip(s.state_dict())
    after = []
    for rank in range(w2):
        s = build(kind, w2, rank, p)
        s.load_state_dict(state)
        set_epoch(s, epoch)
        after.append(flat(list(s)))
    counts = {len(a) for a in after}
    total = len(before) + sum(map(len, after))
    if unpadded:
        assert sorted(before + [i for a in after for i in a]) == sorted(order)
        assert max(counts, default=0) - min(counts, default=0) <= 1
        return
    assert len(counts) <= 1  # equal per-rank counts after the resume
    stream = [order[q % n] for q in range(total)] if n else []
    assert Counter(before + [i for a in after for i in a]) == Counter(stream)
    if p["drop_last"]:
        # the batch sampler's drop_last cuts each new rank's short last batch on top
        cut = w2 * (p["batch_size"] - 1) if kind == BATCHED else 0
        assert n - max(w1, w2) - cut < total <= n
    else:
        assert n <= total < n + max(w1, w2)


# --- torchdata's StatefulDataLoader, and a plain DataLoader ---------------------------------


def _loader(how: str, workers: int, epoch: int) -> StatefulDataLoader:
    sampler = ResumableDistributedSampler(range(23), num_replicas=2, rank=1, seed=4)
    sampler.set_epoch(epoch)
    if how == "sampler":
        return StatefulDataLoader(
            list(range(23)), batch_size=3, sampler=sampler, num_workers=workers
        )
    if how == "batch_sampler":
        batches = ResumableBatchSampler(sampler, 3, drop_last=False)
    else:  # grouped batches (two groups): a batch sampler that counts batches, not samples
        batches = GroupedBatchSampler(sampler, [i % 2 for i in range(23)], 3)
    return StatefulDataLoader(list(range(23)), batch_sampler=batches, num_workers=workers)


def _epoch_of(loader: StatefulDataLoader, epoch: int) -> list[list[int]]:
    sampler = loader.sampler if loader.batch_sampler is None else loader.batch_sampler.sampler
    sampler.set_epoch(epoch)
    return [b.tolist() for b in loader]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("how", ["sampler", "batch_sampler", "grouped"])
def test_stateful_dataloader_resumes_with_exactly_the_remaining_batches(how, workers):
    """Invariant: StatefulDataLoader's state after k batches (it snapshots the sampler's
    state_dict when it hands out each batch's indices, so worker prefetch does not count),
    saved while the run goes on and loaded into a new loader, gives the uninterrupted batches
    k.. and then the next epoch, for every k."""
    idx_epoch = _epoch_of(_loader(how, workers, 2), 2)
    idx_next = _epoch_of(_loader(how, workers, 3), 3)
    assert len(idx_epoch) == 4

    running = _loader(how, workers, 2)
    saved, it = [], iter(running)
    for _ in range(len(idx_epoch)):  # a checkpoint before each batch, and one after the last
        saved.append(copy.deepcopy(running.state_dict()))
        next(it)
    saved.append(copy.deepcopy(running.state_dict()))
    del it

    for k, state in enumerate(saved):
        resumed = _loader(how, workers, 0)  # a new run: its epoch comes from the state
        resumed.load_state_dict(state)
        assert idx_epoch[:k] + [b.tolist() for b in resumed] == idx_epoch
        assert _epoch_of(resumed, 3) == idx_next


def test_the_plain_dataloader_pattern_resumes_exactly_despite_prefetching():
    """Invariant: with a plain DataLoader and 2 workers (which prefetch ahead of the loop),
    state_dict(consumed=batches_done * batch_size) resumes at the loop's batch, not the workers'."""

    def loader(sampler: ResumableDistributedSampler) -> DataLoader:
        return DataLoader(list(range(40)), batch_size=4, sampler=sampler, num_workers=2)

    sampler = ResumableDistributedSampler(range(40), 2, 0, seed=1)
    sampler.set_epoch(5)
    idx_epoch = [b.tolist() for b in loader(sampler)]
    first = []
    for b in loader(sampler):
        first.append(b.tolist())
        if len(first) == 2:
            state = sampler.state_dict(consumed=len(first) * 4)
            break
    resumed = ResumableDistributedSampler(range(40), 2, 0, seed=1)
    resumed.load_state_dict(roundtrip(state))
    resumed.set_epoch(5)
    assert first + [b.tolist() for b in loader(resumed)] == idx_epoch


def test_the_plain_dataloader_recipe_survives_two_preemptions_in_one_epoch():
    """Invariant: docs/tutorials/resume.md's plain-DataLoader recipe (2 workers, which prefetch)
    followed through two preemptions of one epoch: the loop counts the samples it took from
    this iter(), saves state_dict(consumed=taken), and a new sampler resumes with
    load_state_dict + set_epoch(the same epoch). What the loop trained on, run after run, is
    exactly the uninterrupted epoch: nothing prefetched is lost, nothing is read twice."""
    data, batch, epoch = list(range(50)), 4, 5

    def sampler() -> ResumableDistributedSampler:
        return ResumableDistributedSampler(data, num_replicas=2, rank=0, seed=1)

    def loader(s: ResumableDistributedSampler) -> DataLoader:
        return DataLoader(data, batch_size=batch, sampler=s, num_workers=2)

    uninterrupted = sampler()
    uninterrupted.set_epoch(epoch)
    whole = list(uninterrupted)  # 25 samples: this rank's share of the epoch

    trained: list[int] = []
    saved: str | None = None
    for preempt_after in (2, 3, None):  # steps of each run before it is preempted
        s = sampler()
        if saved is not None:
            s.load_state_dict(json.loads(saved))
        s.set_epoch(epoch)  # the loop's call: the loaded position survives its own epoch
        taken = 0
        for step, b in enumerate(loader(s), start=1):
            trained += b.tolist()  # the training step
            taken += len(b)
            if step == preempt_after:
                state = s.state_dict(consumed=taken)
                assert s.state_dict()["position"] > state["position"]  # the workers ran ahead
                saved = json.dumps(state)
                break
    assert trained == whole


def test_a_dataloader_that_calls_iter_twice_reads_only_the_rest_after_a_load():
    """Invariant: DataLoader(batch_size=None, num_workers=2) calls iter(sampler) twice before
    it reads; after loading a state taken at 8 of a rank's 12 samples it reads the 4 left,
    not all 12 (the loaded position is where every iter() of the epoch starts)."""
    whole = list(ResumableDistributedSampler(range(24), 2, 0, seed=0))
    assert len(whole) == 12
    interrupted = ResumableDistributedSampler(range(24), 2, 0, seed=0)
    take(interrupted, 8)
    resumed = ResumableDistributedSampler(range(24), 2, 0, seed=0)
    resumed.load_state_dict(roundtrip(interrupted.state_dict()))
    loader = DataLoader(list(range(24)), batch_size=None, sampler=resumed, num_workers=2)
    assert list(loader) == whole[8:]


# --- every stateful sampler under every loader: the rest of the epoch, read once --------------

#: the data every kind below indexes: item i is i, so a loader yields the indices themselves
DATA = list(range(25))
EPOCH = 3  # the epoch a state is taken in (kinds with set_epoch)
ENDLESS_READ = 3  # loader items read from an endless stream


def _share() -> ResumableDistributedSampler:
    return ResumableDistributedSampler(range(25), 2, 1, seed=4)  # 13 indices


def _over_torch(sampler: type, *args: Any, **kwargs: Any) -> Callable[[], Any]:
    """A factory of wrappers over torch's ``sampler(*args, **kwargs)``, each with a new generator
    seeded alike (what every rank and every run builds)."""

    def make() -> ResumableDistributedSamplerWrapper:
        inner = sampler(*args, **kwargs, generator=torch.Generator().manual_seed(4))
        return ResumableDistributedSamplerWrapper(inner, 2, 1, seed=4)

    return make


#: name: (factory, yields batches (batch_sampler=), endless, k: items read before the state)
STATEFUL_KINDS: dict[str, tuple[Callable[[], Any], bool, bool, int]] = {
    "ResumableDistributedSampler": (_share, False, False, 7),
    "ResumableIndexShuffleSampler": (
        lambda: ResumableIndexShuffleSampler(range(25), 2, 1, seed=4), False, False, 7
    ),
    "ResumableUnpaddedDistributedSampler": (
        lambda: ResumableUnpaddedDistributedSampler(range(25), 2, 1, seed=4), False, False, 7
    ),
    "ResumableDistributedSamplerWrapper": (
        lambda: ResumableDistributedSamplerWrapper(
            ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], length=25, seed=4), 2, 1,
            seed=4,
        ),
        False, False, 7,
    ),
    "ResumableWeightedBalanceClassSampler": (
        lambda: ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], length=13, seed=4),
        False, False, 7,
    ),
    # torch's samplers, their generator's state saved: 30 of 25 (two permutations), 25 weighted
    # draws with replacement, a subset of 22
    "ResumableDistributedSamplerWrapper(RandomSampler)": (
        _over_torch(RandomSampler, range(25), num_samples=30), False, False, 7
    ),
    "ResumableDistributedSamplerWrapper(WeightedRandomSampler)": (
        _over_torch(WeightedRandomSampler, [1.0] * 20 + [5.0] * 5, 25), False, False, 7
    ),
    "ResumableDistributedSamplerWrapper(SubsetRandomSampler)": (
        _over_torch(SubsetRandomSampler, list(range(3, 25))), False, False, 7
    ),
    "ResumableBatchSampler": (lambda: ResumableBatchSampler(_share(), 3, False), True, False, 2),
    "GroupedBatchSampler": (
        lambda: GroupedBatchSampler(_share(), [i % 2 for i in range(25)], 3), True, False, 2
    ),
    "IterationBasedBatchSampler": (  # 5 batches a pass: k = 6 lies in the second pass
        lambda: IterationBasedBatchSampler(ResumableBatchSampler(_share(), 3, False), 8),
        True, False, 6,
    ),
    "OrderAhead": (lambda: OrderAhead(_share()), False, False, 7),
    "InfiniteSampler": (lambda: InfiniteSampler(range(7), 2, 1, seed=4), False, True, 9),
    "RepeatFactorSampler": (
        lambda: RepeatFactorSampler([1, 2.5, 0.5, 1, 3], 2, 1, seed=4), False, True, 9
    ),
    "InferenceSampler": (lambda: InferenceSampler(range(25), 2, 1), False, False, 7),
    "BatchBalanceClassSampler": (
        lambda: BatchBalanceClassSampler(
            LABELS, 2, 2, num_batches=5, num_replicas=2, rank=1, seed=4
        ),
        True, False, 2,
    ),
}  # fmt: skip


def _items(sampler: Any, endless: bool, k: int) -> list:
    """The uninterrupted epoch's items (an endless stream: enough of it to read on)."""
    it = iter(sampler)
    return list(islice(it, k + 4 * ENDLESS_READ)) if endless else list(it)


def _resumed(name: str) -> tuple[Any, list]:
    """A sampler of kind ``name`` loaded from a state taken at its k items (JSON round trip),
    set to the state's epoch as a training loop does, and the rest it should read."""
    make, _, endless, k = STATEFUL_KINDS[name]
    uninterrupted = make()
    set_epoch(uninterrupted, EPOCH)
    whole = _items(uninterrupted, endless, k)
    interrupted = make()
    set_epoch(interrupted, EPOCH)
    assert take(interrupted, k) == whole[:k]
    state = roundtrip(interrupted.state_dict())
    resumed = make()
    resumed.load_state_dict(state)
    set_epoch(resumed, EPOCH)  # the same epoch: the loaded position stays
    return resumed, whole[k:]


def _as_lists(items: list) -> list:
    return [b.tolist() if isinstance(b, torch.Tensor) else b for b in items]


#: (DataLoader class, batch_size, num_workers, persistent_workers, peek first)
LOADERS = {
    "None-0": (DataLoader, None, 0, False, False),
    "None-2": (DataLoader, None, 2, False, False),
    "4-0-peek": (DataLoader, 4, 0, False, True),
    "4-2-peek": (DataLoader, 4, 2, False, True),
    "4-2-persistent": (DataLoader, 4, 2, True, False),
    "None-2-persistent-peek": (DataLoader, None, 2, True, True),
    "Stateful-4-2": (StatefulDataLoader, 4, 2, False, False),
}


@pytest.mark.parametrize("how", list(LOADERS))
@pytest.mark.parametrize("name", list(STATEFUL_KINDS))
def test_after_a_load_every_loader_reads_the_rest_of_the_epoch_once(name, how):
    """Invariant: for every stateful sampler, a state taken at k items and loaded into a new
    sampler makes a DataLoader (batch_size None or 4, 0 or 2 workers, persistent workers, a
    peek of one batch before the epoch's loop) or torchdata's StatefulDataLoader read exactly
    the rest of the epoch, once: no replay of the first k, however many times the loader
    calls iter(sampler). A peeked batch is the first of the rest, and the loop after it yields
    the whole rest. Batch samplers go in as batch_sampler=; endless streams are read on."""
    _, batches, endless, _ = STATEFUL_KINDS[name]
    cls, batch_size, workers, persistent, peek = LOADERS[how]
    if batches and batch_size is not None:
        batch_size = None  # a batch sampler batches: the loader's batch_size must stay unset
    resumed, rest = _resumed(name)
    kwargs: dict[str, Any] = {"num_workers": workers, "persistent_workers": persistent}
    if batches:
        kwargs["batch_sampler"] = resumed
    else:
        kwargs.update(sampler=resumed, batch_size=batch_size)
    loader = cls(DATA, **kwargs)
    per_item = 1 if batches or batch_size is None else batch_size

    def epoch() -> list:
        """One loop over the loader: the whole epoch, or ENDLESS_READ items of a stream."""
        it = iter(loader)
        got = _as_lists(list(islice(it, ENDLESS_READ) if endless else it))
        del it  # non-persistent workers end here
        return got

    peeked = _as_lists([next(iter(loader))]) if peek else None
    got = epoch()
    flat_got = got if batches or batch_size is None else [i for b in got for i in b]
    if endless:
        assert len(flat_got) == ENDLESS_READ * per_item
        rest = rest[: len(flat_got)]
    assert flat_got == rest
    if peek:
        assert peeked == got[:1]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("name", list(STATEFUL_KINDS))
def test_a_stateful_dataloaders_own_state_resumes_every_stateful_sampler(name, workers):
    """Invariant: for every stateful sampler, StatefulDataLoader's state_dict() after k loader
    items (it asks the sampler for its state), loaded into a new loader over a new sampler,
    reads exactly the rest: first k + the rest == the uninterrupted epoch (for an endless
    stream, its next items)."""
    make, batches, endless, k = STATEFUL_KINDS[name]

    def loader() -> StatefulDataLoader:
        sampler = make()
        set_epoch(sampler, EPOCH)
        if batches:
            return StatefulDataLoader(DATA, batch_sampler=sampler, num_workers=workers)
        return StatefulDataLoader(DATA, batch_size=None, sampler=sampler, num_workers=workers)

    def read(it: Any, count: int | None) -> list:
        return _as_lists(list(islice(it, count)))

    more = ENDLESS_READ if endless else None
    whole = read(iter(loader()), k + ENDLESS_READ if endless else None)
    interrupted = loader()
    it = iter(interrupted)
    first = read(it, k)
    state = interrupted.state_dict()
    del it
    resumed = loader()
    resumed.load_state_dict(state)
    assert first + read(iter(resumed), more) == whole


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("name", [n for n in STATEFUL_KINDS if n.endswith("RandomSampler)")])
def test_a_stateful_dataloader_over_torchs_samplers_resumes_a_later_epoch_and_the_next(
    name, workers
):
    """Invariant: over torch's samplers, whose epochs follow their generator's draws, a
    StatefulDataLoader stopped after 2 batches of epoch 2 (epochs 0 and 1 read whole) saves
    the generator's state where epoch 2 was drawn; a new loader over a new sampler seeded alike
    loads it, reads the rest of epoch 2 and then the uninterrupted epoch 3."""
    make = STATEFUL_KINDS[name][0]

    def loader() -> StatefulDataLoader:
        return StatefulDataLoader(DATA, batch_size=4, sampler=make(), num_workers=workers)

    uninterrupted = loader()
    whole = [_epoch_of(uninterrupted, epoch) for epoch in range(4)]
    interrupted = loader()
    for epoch in (0, 1):
        _epoch_of(interrupted, epoch)
    interrupted.sampler.set_epoch(2)
    it = iter(interrupted)
    first = [next(it).tolist() for _ in range(2)]
    state = interrupted.state_dict()
    del it
    resumed = loader()  # a new run: its generator back at the seed
    resumed.load_state_dict(state)
    assert first + _epoch_of(resumed, 2) == whole[2]  # set_epoch of the saved epoch, as a loop
    assert _epoch_of(resumed, 3) == whole[3]


# --- JSON and a fresh process --------------------------------------------------------------

FRESH = """
import json, sys
from distsampling import ResumableDistributedSamplerWrapper, ResumableWeightedBalanceClassSampler
state = json.loads(sys.argv[1])
inner = ResumableWeightedBalanceClassSampler([0] * 7 + [1] * 3 + [2] * 2, [1, 2, 3], length=30, seed=9)
s = ResumableDistributedSamplerWrapper(inner, num_replicas=3, rank=2, seed=9)
s.load_state_dict(state)
print(json.dumps(list(s)))
"""


def test_the_state_survives_json_and_a_fresh_process():
    """Invariant: a state written as JSON resumes in a fresh interpreter (other global RNG state,
    nothing shared) at exactly the rest of the epoch."""
    inner = ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], length=30, seed=9)
    s = ResumableDistributedSamplerWrapper(inner, num_replicas=3, rank=2, seed=9)
    s.set_epoch(4)
    idx_epoch = list(s)
    first = take(s, 4)
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", FRESH, json.dumps(s.state_dict())],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert first + json.loads(out.stdout) == idx_epoch


# --- bad input -----------------------------------------------------------------------------


def _state(kind: str = DS) -> dict:
    s = build(
        kind, 2, 0, {"n": 10, "seed": 0, "shuffle": True, "drop_last": False, "batch_size": 2}
    )
    take(s, 2)
    return s.state_dict()


def _fresh(**kw: Any) -> ResumableDistributedSampler:
    return ResumableDistributedSampler(range(kw.get("n", 10)), 2, 0, seed=kw.get("seed", 0))


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (
            {"kind": UNPADDED},
            ValueError,
            "kind was 'ResumableUnpaddedDistributedSampler'",
        ),
        ({"version": 2}, ValueError, "format version=2"),
        ({"seed": 1}, ValueError, "seed was 1 when saved, but is 0 now"),
        ({"dataset_len": 11}, ValueError, "dataset_len was 11 when saved, but is 10 now"),
        ({"position": -1}, ValueError, "position=-1"),
        ({"position": 6}, ValueError, "position=6"),
        ({"start": 11}, ValueError, "start=11"),
        ({"start": -2}, ValueError, "start=-2"),
        ({"num_replicas": 0}, ValueError, "num_replicas=0"),
        ({"num_replicas": 0, "start": 11}, ValueError, "num_replicas=0"),  # the first bad field
        ({"num_replicas": "2"}, TypeError, "num_replicas='2'"),
        ({"start": 4, "position": 4}, ValueError, "position=4"),  # 6 left on 2 ranks: 3 each
        ({"start": 10, "position": 1}, ValueError, "position=1"),  # nothing left to read
        ({"epoch": "1"}, TypeError, "epoch='1'"),
    ],
)
def test_a_bad_state_is_refused_naming_the_field(change, error, match):
    """Invariant: a state from another class, version, seed or length, or with a position out
    of range, raises an error naming the field, the saved and the current value."""
    with pytest.raises(error, match=match):
        _fresh().load_state_dict({**_state(), **change})


@pytest.mark.parametrize(
    "key", ["kind", "version", "seed", "dataset_len", "epoch", "start", "position"]
)
def test_a_state_missing_a_key_is_refused_naming_it(key):
    """Invariant: every field the sampler reads is required, by name."""
    state = _state()
    del state[key]
    with pytest.raises(
        KeyError, match=f"state has no {key!r}: it is not a ResumableDistributedSampler"
    ):
        _fresh().load_state_dict(state)


@pytest.mark.parametrize(
    "kind",
    [
        UNPADDED,
        WRAPPED_WEIGHTED,
        WEIGHTED,
        BATCHED,
        GROUPED,
        ITERATION,
    ],
)
def test_every_sampler_refuses_another_samplers_state_and_a_negative_position(kind):
    """Invariant: each sampler checks the kind and its position field."""
    p = {"n": 10, "seed": 0, "shuffle": True, "drop_last": False, "batch_size": 2}
    with pytest.raises(ValueError, match="kind was 'ResumableDistributedSampler'"):
        build(kind, 2, 0, p).load_state_dict(_state())
    state = _state(kind)
    field = "iteration" if "Iteration" in kind else "position"
    holder = state["sampler"] if kind == BATCHED else state
    holder[field] = -1
    with pytest.raises(ValueError, match=f"{field}=-1"):
        build(kind, 2, 0, p).load_state_dict(state)


@pytest.mark.parametrize(
    ("inner", "n", "change", "error", "match"),
    [
        (WEIGHTED, 10, {}, TypeError, r"=\[0, 7, .*\] has no load_state_dict"),
        ("list", 11, {}, ValueError, r"sampler_len was 10 when saved, but is 11 now$"),
        ("list", 10, {"epoch": "1"}, TypeError, r"^epoch should be an integer, but got epoch='1'"),
        ("list", 10, {"sampler_len": _MISSING}, KeyError, r"state has no 'sampler_len': it is not"),
        ("list", 10, {"sampler": _MISSING}, KeyError, r"state has no 'sampler': it is not a"),
        ("list", 10, {"start": _MISSING}, KeyError, r"state has no 'start': it is not a"),
    ],
)
def test_the_wrapper_refuses_a_state_it_cannot_resume_naming_why(inner, n, change, error, match):
    """Invariant: a wrapper over a list (of n indices) refuses an inner sampler's state, another
    length, a non-integer epoch and a state missing a field; each error names field and value."""
    state = _state(f"ResumableDistributedSamplerWrapper({inner})")  # saved over 10 indices
    state.update(change)
    state = {key: value for key, value in state.items() if value is not _MISSING}
    p = {"n": n, "seed": 0, "shuffle": True, "drop_last": False, "batch_size": 2}
    with pytest.raises(error, match=match):
        build(WRAPPED_LIST, 2, 0, p).load_state_dict(state)


@given(
    groups=st.lists(st.integers(0, 2), max_size=30), batch_size=st.integers(1, 4), data=st.data()
)
def test_a_grouped_sampler_over_a_plain_list_resumes_after_any_batch(groups, batch_size, data):
    """Invariant: over a list of indices (no state_dict, no epoch) the grouped sampler saves only
    its batch count (its sampler state is None) and resumes the rest of its batches exactly."""
    order = data.draw(st.permutations(range(len(groups))), label="the inner list")
    whole = list(GroupedBatchSampler(order, groups, batch_size))
    assert GroupedBatchSampler(order, groups, batch_size).state_dict()["position"] == 0  # fresh
    k = data.draw(stop_points(len(whole)), label="k")
    sampler = GroupedBatchSampler(order, groups, batch_size)
    first = take(sampler, k)
    state = roundtrip(sampler.state_dict())
    assert (state["sampler"], state["position"]) == (None, k)
    resumed = GroupedBatchSampler(order, groups, batch_size)
    resumed.load_state_dict(state)
    assert roundtrip(resumed.state_dict()) == state  # loaded, not read yet: the same place
    assert first + list(resumed) == whole


@pytest.mark.parametrize(
    ("change", "world", "error", "match"),
    [
        ({"position": -1}, 3, ValueError, r"position should be .*but got position=-1"),
        ({"position": 4}, 2, ValueError, r"^position should be in the interval \[0, 3\], but got "),
        ({"sampler": _MISSING}, 2, KeyError, r"state has no 'sampler': it is not a GroupedBatch"),
        ({"position": _MISSING}, 2, KeyError, r"state has no 'position': it is not a Grouped"),
    ],
)
def test_the_grouped_sampler_refuses_a_bad_position_naming_it(change, world, error, match):
    """Invariant: a negative position is refused as such, on any world (not as another world's
    state), and so is a state without its sampler or position field."""
    kind = GROUPED
    state = {**_state(kind), **change}
    state = {key: value for key, value in state.items() if value is not _MISSING}
    p = {"n": 10, "seed": 0, "shuffle": True, "drop_last": False, "batch_size": 2}
    with pytest.raises(error, match=match):
        build(kind, world, 0, p).load_state_dict(state)


GROUPED_OTHER_WORLD = (
    r"^GroupedBatchSampler resumes mid-pass only on the number of ranks it was saved on: "
    r"num_replicas was 2 when saved, but is 3 now \(position=2 batches\)\. Resume on 2 ranks, "
    r"or from the start of a pass \(a state saved at position 0 loads on any number of ranks\)\.$"
)


def test_grouped_and_iteration_samplers_refuse_another_world_mid_pass():
    """Invariant: a grouped pass or an iteration count cannot be split over another world: the
    error says what is supported (same world, or a grouped pass boundary)."""
    p = {"n": 20, "seed": 0, "shuffle": True, "drop_last": False, "batch_size": 2}
    grouped = build(GROUPED, 2, 0, p)
    take(grouped, 2)
    with pytest.raises(ValueError, match=GROUPED_OTHER_WORLD):
        build(GROUPED, 3, 0, p).load_state_dict(grouped.state_dict())
    at_start = build(GROUPED, 2, 0, p).state_dict()
    build(GROUPED, 3, 0, p).load_state_dict(at_start)
    iteration = build(ITERATION, 2, 0, p)
    with pytest.raises(ValueError, match="num_replicas was 2 when saved, but is 3 now"):
        build(ITERATION, 3, 0, p).load_state_dict(iteration.state_dict())


WRAPPER_CANNOT_SAVE = (
    r"^DistributedSamplerWrapper can save its position only if its epoch can be drawn again: "
    r"the inner sampler needs state_dict\(\)/load_state_dict\(\) \(this package's Resumable\* "
    r"samplers have them\), a generator of its own \(torch's RandomSampler, "
    r"WeightedRandomSampler and SubsetRandomSampler with generator=torch\.Generator\(\)"
    r"\.manual_seed\(seed\)\) or a fixed order \(SequentialSampler, a list\), but got "
    r"sampler=<distsampling\.weighted\.WeightedBalanceClassSampler object at 0x\w+> of type "
    r"WeightedBalanceClassSampler$"
)
WRAPPER_WITHOUT_GENERATOR = (
    r"^DistributedSamplerWrapper can save its position over RandomSampler only if it draws from "
    r"a generator of its own: build it with generator=torch\.Generator\(\)\.manual_seed\(seed\), "
    r"the same seed on every rank .* with generator=None$"
)


def test_a_wrapper_refuses_a_state_whose_inner_sampler_was_built_otherwise():
    """Invariant: the wrapper's state carries its inner sampler's state, so a wrapper around an
    inner sampler of another seed refuses it (naming the inner seed), though its own seed matches."""

    def wrapper(inner_seed: int) -> ResumableDistributedSamplerWrapper:
        inner = ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], length=10, seed=inner_seed)
        return ResumableDistributedSamplerWrapper(inner, 2, 0, seed=5)

    saved = wrapper(1)
    take(saved, 2)
    with pytest.raises(ValueError, match="seed was 1 when saved, but is 2 now"):
        wrapper(2).load_state_dict(roundtrip(saved.state_dict()))


def test_samplers_that_cannot_be_drawn_again_refuse_to_save():
    """Invariant: a position that could not be resumed exactly is never written."""
    plain_inner = WeightedBalanceClassSampler(LABELS, [1, 2, 3], length=5)
    with pytest.raises(TypeError, match=WRAPPER_CANNOT_SAVE):
        ResumableDistributedSamplerWrapper(plain_inner, 2, 0).state_dict()
    with pytest.raises(TypeError, match=WRAPPER_WITHOUT_GENERATOR):  # torch's global RNG
        ResumableDistributedSamplerWrapper(RandomSampler(range(5)), 2, 0).state_dict()
    with pytest.raises(TypeError, match="through its sampler's state_dict"):
        ResumableBatchSampler([1, 2, 3], 2, False).state_dict()
    with pytest.raises(TypeError, match="state should be a dict"):
        _fresh().load_state_dict([("position", 1)])


@given(batch_size=st.integers(1, 4), drop_last=flags, k=st.integers(0, 2))
def test_a_batch_samplers_state_is_its_sampler_state_and_must_match_its_batching(
    batch_size, drop_last, k
):
    """Invariant: ResumableBatchSampler's state is the inner sampler's, under its own kind,
    version, batch_size and drop_last; a state of other batching is refused naming the field,
    and a batch sampler over a plain iterable refuses to save or resume, naming the iterable."""
    inner = ResumableDistributedSampler(range(20), 2, 1, seed=2)
    batches = ResumableBatchSampler(inner, batch_size, drop_last)
    take(batches, k)
    state = batches.state_dict()
    assert state == {"kind": "ResumableBatchSampler", "version": 1, "batch_size": batch_size,
                     "drop_last": drop_last, "sampler": inner.state_dict()}  # fmt: skip
    for field, other in (("batch_size", batch_size + 1), ("drop_last", not drop_last)):
        changed = ResumableBatchSampler(
            ResumableDistributedSampler(range(20), 2, 1, seed=2), batch_size, drop_last
        )
        with pytest.raises(ValueError) as error:
            changed.load_state_dict({**state, field: other})
        assert str(error.value) == (
            f"state does not match this sampler: {field} was {other!r} when saved, "
            f"but is {state[field]!r} now"
        )
    plain = ResumableBatchSampler([1, 2, 3], batch_size, drop_last)
    with pytest.raises(TypeError) as error:
        plain.state_dict()
    assert str(error.value) == (
        "BatchSampler can save its position only through its sampler's state_dict(), "
        "but got sampler=[1, 2, 3] of type list"
    )
    with pytest.raises(TypeError) as error:
        plain.load_state_dict(state)
    assert str(error.value) == (
        "BatchSampler can resume only through its sampler's load_state_dict(), "
        "but got sampler=[1, 2, 3] of type list"
    )
    with pytest.raises(KeyError, match="state has no 'sampler': it is not a ResumableBatchSampler"):
        plain.load_state_dict({k: v for k, v in state.items() if k != "sampler"})


@given(world=world_sizes, num_iterations=st.integers(0, 12), data=st.data())
def test_an_iteration_samplers_state_is_its_count_on_its_world(world, num_iterations, data):
    """Invariant: IterationBasedBatchSampler's state is its kind, version, num_iterations, the
    world of the sampler inside (None for a plain iterable) and the batches done; loading it
    is building with start_iter=iteration; an iteration beyond num_iterations, or another
    world, is refused with the field and both values named."""
    rank = data.draw(ranks_for(world), label="rank")

    def build_on(w: int, r: int) -> IterationBasedBatchSampler:
        inner = ResumableBatchSampler(
            ResumableDistributedSampler(range(3 * w), w, r, seed=1), 2, False
        )
        return IterationBasedBatchSampler(inner, num_iterations)

    k = data.draw(st.integers(0, num_iterations), label="k")
    run = build_on(world, rank)
    take(run, k)
    state = roundtrip(run.state_dict())
    assert state == {"kind": "IterationBasedBatchSampler", "version": 1,
                     "num_iterations": num_iterations, "num_replicas": world, "iteration": k}  # fmt: skip
    resumed = build_on(world, rank)
    resumed.load_state_dict(state)
    fresh = IterationBasedBatchSampler(build_on(world, rank).batch_sampler, num_iterations, k)
    assert list(resumed) == list(fresh)
    for bad in (-1, num_iterations + 1):
        with pytest.raises(ValueError, match=rf"^iteration should be .*but got iteration={bad}$"):
            build_on(world, rank).load_state_dict({**state, "iteration": bad})
    with pytest.raises(ValueError) as error:
        build_on(world + 1, 0).load_state_dict(state)
    assert str(error.value) == (
        "IterationBasedBatchSampler resumes only on the number of ranks it was saved on: "
        f"num_replicas was {world!r} when saved, but is {world + 1!r} now (an iteration count "
        "means other batches on another world)"
    )
    for key in ("num_replicas", "iteration"):
        with pytest.raises(KeyError, match=f"state has no {key!r}: it is not a IterationBased"):
            build_on(world, rank).load_state_dict({k: v for k, v in state.items() if k != key})
    plain = IterationBasedBatchSampler([[0, 1], [2]], num_iterations)
    assert plain.state_dict()["num_replicas"] is None
    with pytest.raises(ValueError, match=f"num_replicas was {world!r} when saved, but is None now"):
        plain.load_state_dict(state)


def test_consumed_beyond_what_was_handed_out_is_refused():
    """Invariant: state_dict(consumed=...) cannot claim samples the iterator never gave out."""
    s = _fresh()
    take(s, 3)
    assert s.state_dict(consumed=2)["position"] == 2
    with pytest.raises(ValueError, match="consumed=4"):
        s.state_dict(consumed=4)


# --- real distribution: 2 -> 3 and 3 -> 2 ranks over gloo --------------------------------------


@pytest.mark.multiprocess
@pytest.mark.parametrize(("w1", "w2"), [(2, 3), (3, 2)])
def test_a_real_group_resumed_on_another_world_reads_each_sample_once(w1, w2, tmp_path):
    """Invariant: W1 real ranks read k batches and save; W2 real ranks load rank 0's state and
    read the rest; every index of the epoch is read exactly once, repeats are only padding
    (fewer than W2), and every new rank read the same number."""
    path = str(tmp_path / "state.json")
    n, seed, epoch, steps, batch = 50, 7, 3, 2, 4
    before = run_world("resume_worlds:read_then_save", w1, n, seed, epoch, steps, batch, path,
                       timeout=180, pythonpath=[TESTS])[0]  # fmt: skip
    after = run_world("resume_worlds:resume_and_read", w2, n, seed, path, batch,
                      timeout=180, pythonpath=[TESTS])[0]  # fmt: skip
    assert [len(b) for b in before] == [steps * batch] * w1
    assert len({len(a) for a in after}) == 1
    reads = Counter([i for b in before for i in b] + [i for a in after for i in a])
    assert set(reads) == set(range(n))
    assert sum(reads.values()) - n < w2
    order = epoch_permutation(n, True, seed, epoch).tolist()
    padding = [order[q % n] for q in range(n, sum(reads.values()))]
    assert reads == Counter(order) + Counter(padding)


# --- check_state: a saved state_dict() is refused unless it is this sampler's -------------------

FIELDS = st.dictionaries(st.sampled_from(["seed", "size", "shuffle", "epoch"]), st.integers(0, 3))


@given(
    data=st.data(),
    must_match=FIELDS,
    required=st.lists(st.sampled_from(["position", "epoch", "seed"]), unique=True, max_size=2),
)
def test_a_state_is_taken_only_whole_of_this_kind_and_version_and_matching(
    data, must_match, required
):
    """Invariant: ``check_state`` returns the very dict when it is of this kind and version,
    holds every must-match and required field, and each must-match field is equal. Otherwise
    the first failure in that order is raised, naming the field and both values."""
    saved = {
        "kind": data.draw(st.sampled_from(["S", "T"])),
        "version": data.draw(st.integers(1, 2)),
    }
    saved |= data.draw(FIELDS)
    saved |= data.draw(st.dictionaries(st.sampled_from(["position", "other"]), st.integers(0, 2)))
    for key in data.draw(st.lists(st.sampled_from(["kind", "version"]), unique=True)):
        del saved[key]

    def missing(key: str) -> str:
        return f"state has no {key!r}: it is not a S state_dict() (got {saved!r})"

    expected: tuple[type, str] | None = None
    for key in ("kind", "version"):
        if key not in saved:
            expected = (KeyError, missing(key))
            break
    else:
        if saved["kind"] != "S":
            text = f"state comes from another sampler: kind was {saved['kind']!r} when saved, but this is a S"
            expected = (ValueError, text)
        elif saved["version"] != 1:
            expected = (
                ValueError,
                f"state has format version={saved['version']!r}, but this S reads version=1",
            )
        elif absent := [k for k in [*must_match, *required] if k not in saved]:
            expected = (KeyError, missing(absent[0]))
        elif unequal := [k for k, v in must_match.items() if saved[k] != v]:
            k = unequal[0]
            expected = (
                ValueError,
                f"state does not match this sampler: {k} was {saved[k]!r} when saved, "
                f"but is {must_match[k]!r} now",
            )
    if expected is None:
        assert check_state(saved, "S", 1, must_match, required=required) is saved
        if not required:  # ``required`` may be left out: no further field is asked for
            assert check_state(saved, "S", 1, must_match) is saved
        return
    with pytest.raises(expected[0]) as err:
        check_state(saved, "S", 1, must_match, required=required)
    assert err.value.args == (expected[1],)


@pytest.mark.parametrize("state", [None, [("kind", "S")], "{}", 3])
def test_a_state_that_is_not_a_dict_is_refused_naming_its_type(state):
    """Invariant: anything but a dict (a list of pairs, a JSON string not yet parsed) is a
    TypeError naming the value and its type."""
    with pytest.raises(TypeError) as err:
        check_state(state, "S", 1, {})
    assert str(err.value) == (
        f"state should be a dict from state_dict(), but got state={state!r} "
        f"of type {type(state).__name__}"
    )


def test_the_first_failing_state_field_is_the_one_named():
    """Invariant: kind before version before the other fields, and fields in the caller's order:
    the message explains the first gap, not a later symptom of it."""
    with pytest.raises(KeyError) as err:
        check_state({"seed": 0}, "S", 1, {"seed": 0})
    assert err.value.args[0].startswith("state has no 'kind': ")
    with pytest.raises(ValueError, match=r"^state comes from another sampler"):
        check_state({"kind": "T", "version": 9}, "S", 1, {})
    with pytest.raises(ValueError, match=r"^state does not match this sampler: a was 1"):
        check_state({"kind": "S", "version": 1, "a": 1, "b": 1}, "S", 1, {"a": 0, "b": 0})


def test_a_resumable_class_without_its_identity_is_told_what_to_define():
    """Invariant: a class composed with Resumable that does not say what a state must match
    fails at its first state_dict() naming itself and _identity(), not with a bare error."""

    class Forgetful(Resumable, DistributedSampler):
        pass

    with pytest.raises(NotImplementedError) as error:
        Forgetful(range(4), num_replicas=1, rank=0).state_dict()
    assert str(error.value) == (
        "Forgetful should define _identity(): the fields a saved state must match (the data's "
        "length, the seed, the flags), as distsampling.resume.resumable does"
    )


@given(n=st.integers(0, 60), worlds=st.tuples(elastic_world_sizes, elastic_world_sizes),
       data=st.data())  # fmt: skip
def test_an_order_computed_per_position_resumes_without_building_the_whole_epoch(n, worlds, data):
    """Invariant: a sampler whose order is a function of position (order_at) reads the rest of
    its share, on the saved world or another, from its positions alone: epoch_order(), the
    whole epoch, is never called, and the rest equals what the uninterrupted ranks read."""
    W1, W2 = worlds
    saved = ResumableIndexShuffleSampler(range(n), W1, 0, seed=3)
    saved.set_epoch(2)
    k = data.draw(st.integers(0, len(saved)), label="k")
    take(saved, k)
    state = roundtrip(saved.state_dict())
    for rank in range(W2):
        resumed = ResumableIndexShuffleSampler(range(n), W2, rank, seed=3)
        resumed.load_state_dict(state)
        whole = resumed.epoch_order()

        def refuse() -> None:
            raise AssertionError("the whole epoch was built")

        resumed.epoch_order = refuse  # type: ignore[method-assign]
        expected = ResumableDistributedSampler(range(n), W2, rank, seed=3)
        expected.epoch_order = lambda whole=whole: whole  # type: ignore[method-assign]
        expected.load_state_dict({**state, "kind": "ResumableDistributedSampler"})
        assert list(resumed) == list(expected)


# --- a generator's state as text, as the endless streams and the wrapper save it ---------------


@given(seed=st.integers(0, 2**64 - 1), draws=st.integers(0, 700))
def test_a_generator_state_survives_its_text_and_json(seed, draws):
    """Invariant: generator_text -> JSON -> generator_state gives the very state back: a generator
    set to it draws what the saved one draws next."""
    g = torch.Generator().manual_seed(seed)
    torch.randperm(draws, generator=g)  # somewhere inside its stream
    text = json.loads(json.dumps(generator_text(g.get_state())))
    restored = torch.Generator()
    restored.set_state(generator_state(text, g.get_state().numel()))
    assert torch.equal(torch.randperm(50, generator=restored), torch.randperm(50, generator=g))


@pytest.mark.parametrize(
    "text, shown",
    [
        ("QUJD" * 10, "'" + "QUJD" * 10 + "'"),  # valid base64 of the wrong size, shown whole
        ("QUJD" * 11, "'" + "QUJD" * 10 + "...'"),  # longer than 40 characters: its head
        ("QUJD" * 10 + "Q", "'" + "QUJD" * 10 + "...'"),  # not base64 at all
        (None, "None"),
        (b"\x00", "b'\\\\x00'"),
        ("QUJD" * 5 + "!" + "QUJD" * 5, "'" + "QUJD" * 5 + "!" + "QUJD" * 4 + "QUJ...'"),
    ],
)
def test_a_generator_state_of_the_wrong_size_or_not_base64_is_refused(text, shown):
    """Invariant: text that is not the base64 of exactly size bytes raises, naming the size and
    showing the text (its first 40 characters when longer)."""
    size = torch.Generator().get_state().numel()
    match = rf"^generator should be the base64 text of a {size}-byte torch.Generator state, "
    with pytest.raises(ValueError, match=match + rf"but got generator={shown}$"):
        generator_state(text, size)
    ok = generator_text(torch.Generator().get_state())
    assert generator_state(ok, size).numel() == size


def test_a_valid_state_with_a_stray_character_is_refused():
    """Invariant: base64 with a character outside its alphabet is refused, even where dropping
    that character would leave a state of the right size."""
    size = torch.Generator().get_state().numel()
    ok = generator_text(torch.Generator().get_state())
    with pytest.raises(ValueError, match=rf"^generator should be the base64 text of a {size}-byte"):
        generator_state(ok[:100] + "!" + ok[100:], size)


@pytest.mark.parametrize("world", [1024, 768])
def test_a_resumed_index_shuffle_computes_its_order_a_block_at_a_time(world):
    """Invariant: after a load (on the saved world or another), the first index asks the order
    at no more than 32 positions, and the next ones at blocks of 2**14: the rest of a share of
    millions is never computed at once."""
    n = 5_850_000_000
    saver = ResumableIndexShuffleSampler(range(n), num_replicas=1024, rank=0, seed=1)
    saver.set_epoch(3)
    state = saver.state_dict() | {"position": 1000}
    s = ResumableIndexShuffleSampler(range(n), num_replicas=world, rank=5, seed=1)
    s.load_state_dict(state)
    asked: list[int] = []
    order_at = s.order_at
    s.order_at = lambda positions: (asked.append(len(positions)), order_at(positions))[1]  # type: ignore[method-assign]
    it = iter(s)
    first = [next(it) for _ in range(40)]
    assert asked == [32] and len(first) == 40
    assert (
        first[:32]
        == order_at(s._positions(range(1000 if world == 1024 else 0, 10**9))[:32]).tolist()
    )


@pytest.mark.parametrize("kind", ["index_shuffle", "distributed"])
def test_indices_after_a_resume_on_a_resumed_world_are_the_rest_of_its_share(kind):
    """Invariant: resumed on another world (start > 0), read k, saved and loaded again on that
    world (start > 0 and position > 0): indices() is exactly what iter() then yields, the rest
    of that rank's share; the index shuffle never builds the whole epoch for it."""
    make = ResumableIndexShuffleSampler if kind == "index_shuffle" else ResumableDistributedSampler
    n = 1000
    first = make(range(n), 2, 0, seed=3)
    first.set_epoch(1)
    take(first, 100)
    state = json.loads(json.dumps(first.state_dict()))  # 200 of the stream read on 2 ranks
    second = make(range(n), 3, 1, seed=3)
    second.load_state_dict(state)  # the rest split over 3 ranks: start 200
    take(second, 50)
    state = json.loads(json.dumps(second.state_dict()))
    third = make(range(n), 3, 1, seed=3)
    third.load_state_dict(state)  # start 200, position 50
    if kind == "index_shuffle":

        def refuse() -> None:
            raise AssertionError("the whole epoch was built")

        third.epoch_order = refuse  # type: ignore[method-assign]
    rest = third.indices().tolist()
    assert rest == list(third) and len(rest) == -(-(n - 200) // 3) - 50
    assert rest == list(second)[50:]  # a new iter() of the second starts where it was loaded


def json_state_after(sampler: object, k: int) -> dict:
    """The JSON state of ``sampler`` after its ``iter()`` handed out ``k`` indices."""
    it = iter(sampler)
    for _ in range(k):
        next(it)
    return json.loads(json.dumps(sampler.state_dict()))


@given(data=st.data())
def test_the_counting_iterator_counts_what_it_handed_out_across_blocks(data):
    """Invariant: over blocks of any sizes (empty ones too), ``ints`` yields every block's
    values in order, and ``yielded`` is how many it has handed out at every point."""
    sizes = data.draw(st.lists(st.integers(0, 5), max_size=6), label="block sizes")
    blocks = [torch.arange(sum(sizes[:i]), sum(sizes[: i + 1])) for i in range(len(sizes))]
    counter = CountingIterator(lambda: iter(blocks))
    assert counter.yielded == 0
    for expected in range(sum(sizes)):
        assert next(counter.ints) == expected and counter.yielded == expected + 1
    assert next(counter.ints, None) is None and counter.yielded == sum(sizes)


@given(n=st.integers(1, 60), worlds=st.tuples(st.integers(1, 6), st.integers(1, 6)), data=st.data())
def test_len_is_the_whole_epochs_count_before_and_after_a_resume(n, worlds, data):
    """Invariant: ``len()`` of a resumable sampler is this rank's count of the whole epoch: on
    the saved world ``num_samples`` (the resumed ``iter()`` yields ``len()`` minus the
    position); on another world, what the saved rank read (``before`` in the state, carried
    through a chain of resumes) plus what ``iter()`` yields from there."""
    w1, w2 = worlds
    s = ResumableDistributedSampler(range(n), w1, 0, seed=3)
    k = data.draw(st.integers(0, len(s)))
    state = json_state_after(s, k)
    same = ResumableDistributedSampler(range(n), w1, 0, seed=3)
    same.load_state_dict(state)
    assert len(same) == same.num_samples == k + len(list(same))
    rank = data.draw(st.integers(0, w2 - 1))
    moved = ResumableDistributedSampler(range(n), w2, rank, seed=3)
    moved.load_state_dict(state)
    rest = list(moved)
    assert len(moved) == k + len(rest)
    j = data.draw(st.integers(0, len(rest)))
    it = iter(moved)
    for _ in range(j):
        next(it)
    again = ResumableDistributedSampler(range(n), w1, 0, seed=3)  # a second resume, back
    again.load_state_dict(json.loads(json.dumps(moved.state_dict())))
    assert again.state_dict()["before"] == (k + j if w2 != w1 else 0)
    assert len(again) == (k + j + len(list(again)) if w2 != w1 else again.num_samples)


@given(n=st.integers(1, 40), worlds=st.tuples(st.integers(1, 5), st.integers(1, 5)), data=st.data())
def test_an_unpadded_split_counts_the_whole_epoch_too_and_a_new_epoch_forgets_the_resume(
    n, worlds, data
):
    """Invariant: for the unpadded split (ranks read unequal counts) ``len()`` after an elastic
    resume is what the saved rank read plus this rank's rest; ``set_epoch`` to another epoch
    drops the resume (``len()`` is the epoch's share again, ``before`` 0); a ``before`` that
    is not a count >= 0 is refused naming it."""
    w1, w2 = worlds
    s = ResumableUnpaddedDistributedSampler(range(n), w1, 0, seed=3)
    k = data.draw(st.integers(0, len(s)))
    state = json_state_after(s, k)
    rank = data.draw(st.integers(0, w2 - 1))
    moved = ResumableUnpaddedDistributedSampler(range(n), w2, rank, seed=3)
    moved.load_state_dict(state)
    if w2 != w1:
        assert len(moved) == k + len(list(moved))
    else:  # the saved world: the epoch's own split, this rank's share
        assert len(moved) == moved.num_samples
    moved.set_epoch(1)
    assert len(moved) == moved.num_samples == len(list(moved))
    assert moved.state_dict()["before"] == 0
    words = {-1: r"^before should be >= 0, but got before=-1$",
             "x": r"^before should be an integer, but got before='x' of type str$"}  # fmt: skip
    for bad, error in ((-1, ValueError), ("x", TypeError)):
        with pytest.raises(error, match=words[bad]):
            ResumableUnpaddedDistributedSampler(range(n), w1, 0, seed=3).load_state_dict(
                {**state, "before": bad}
            )


def test_an_epoch_handle_passes_set_epoch_to_its_owner_and_names_it():
    """Invariant: the handle a batch sampler gives frameworks as its ``sampler`` sets the
    owner's epoch to exactly the value given, and its repr names the owner's class."""

    class Owner:
        epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

    owner = Owner()
    handle = EpochHandle(owner)
    handle.set_epoch(3)
    assert owner.epoch == 3 and handle.owner is owner
    assert repr(handle) == "EpochHandle(Owner)"
