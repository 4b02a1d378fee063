"""Properties of DatasetFromSampler and DistributedSamplerWrapper, checked against torch's
DistributedSampler over the inner epoch, and against a catalyst-style wrapper that breaks."""

from __future__ import annotations

import copy
import importlib.util
import json
import operator
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from hypothesis import given
from hypothesis import strategies as st

from distsampling import (
    DatasetFromSampler,
    DistributedSamplerWrapper,
    WeightedBalanceClassSampler,
    index_tensor,
)
from distsampling.wrapper import DatasetFromSampler as ReferenceDatasetFromSampler
from strategies import (
    GENERATOR_SEED_HIGH,
    GENERATOR_SEED_LOW,
    epochs,
    flags,
    inner_epochs,
    labelled_datasets,
    non_integers,
    sampler_args,
    sampler_args_some_omitted,
    seeds,
    seeds_at_generator_bounds,
    world_sizes,
)

ROOT = Path(__file__).resolve().parent.parent


def catalyst_style():
    """The catalyst-style classes shown on docs/tutorials/wrapper.md (our own code)."""
    path = ROOT / "docs" / "examples" / "wrapper_catalyst_style.py"
    spec = importlib.util.spec_from_file_location("wrapper_catalyst_style", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def disturb_global_rngs(state: int) -> None:
    """Give this 'process' its own global RNG state, as a separate rank process would have."""
    random.seed(state)
    np.random.seed(state)
    torch.manual_seed(state)


class EpochRecorder(tud.Sampler[int]):
    """An inner sampler whose epoch (and length) is a function of the epoch it was told."""

    def __init__(self) -> None:
        self.epochs: list[int] = []

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)

    def __iter__(self):
        epoch = self.epochs[-1] if self.epochs else 0
        return iter(range(100, 100 + 3 + epoch % 5))

    def __len__(self) -> int:
        return 3 + (self.epochs[-1] if self.epochs else 0) % 5


@given(inner=inner_epochs, args=sampler_args(), epoch=epochs)
def test_each_rank_reads_torchs_positions_of_the_inner_epoch(inner, args, epoch):
    """Invariant: rank r reads inner[p] for p in torch's DistributedSampler(range(len(inner))), same
    len; each index is a Python int, as the inner sampler's."""
    ours = DistributedSamplerWrapper(inner, **args)
    positions = tud.DistributedSampler(range(len(inner)), **args)
    ours.set_epoch(epoch)
    positions.set_epoch(epoch)
    idx_ours, idx_torch = list(ours), [inner[p] for p in positions]
    assert idx_ours == idx_torch
    assert all(type(i) is int for i in idx_ours)  # not 3.0, which == 3 would let through
    assert len(ours) == len(positions) == len(idx_ours)


@given(data=labelled_datasets(), args=sampler_args(), seed=seeds, epoch=epochs)
def test_over_the_weighted_sampler_each_rank_reads_torchs_positions(data, args, seed, epoch):
    """Invariant: the same over WeightedBalanceClassSampler (its tensor fast path), inner epoch set."""
    inner = WeightedBalanceClassSampler(**data, seed=seed)
    ours = DistributedSamplerWrapper(inner, **args)
    ours.set_epoch(epoch)
    inner_epoch = list(inner)  # the epoch ours forwarded: drawn for `epoch`
    positions = tud.DistributedSampler(range(len(inner_epoch)), **args)
    positions.set_epoch(epoch)
    assert list(ours) == [inner_epoch[p] for p in positions]


@given(
    data=labelled_datasets(),
    world=world_sizes,
    epoch=epochs,
    shuffle=st.booleans(),
    drop_last=st.booleans(),
)
def test_ranks_with_their_own_global_rng_state_partition_the_inner_epoch(
    data, world, epoch, shuffle, drop_last
):
    """Invariant: ranks, each with its own global RNG state, rebuild the inner epoch exactly once (+ padding)."""
    per_rank = []
    for rank in range(world):
        disturb_global_rngs(1000 + rank)
        inner = WeightedBalanceClassSampler(**data, seed=5)
        s = DistributedSamplerWrapper(inner, world, rank, shuffle=shuffle, drop_last=drop_last)
        s.set_epoch(epoch)
        per_rank.append(list(s))
    reference = WeightedBalanceClassSampler(**data, seed=5)
    reference.set_epoch(epoch)
    order = tud.DistributedSampler(range(len(reference)), 1, 0, shuffle=shuffle)
    order.set_epoch(epoch)
    inner_epoch = list(reference)
    permuted = [inner_epoch[p] for p in order]  # the inner epoch in the wrapper's position order
    # position p of the (padded or cut) epoch is read by rank p % W as its (p // W)-th index
    total = sum(map(len, per_rank))
    read = [per_rank[p % world][p // world] for p in range(total)]
    n = len(inner_epoch)
    assert read == [permuted[p % n] for p in range(total)] if n else read == []
    assert total == (n // world * world if drop_last else -(-n // world) * world)


def test_ranks_in_fresh_processes_partition_the_inner_epoch():
    """Invariant: ranks built in separate processes (other global RNG states) cover the epoch once."""
    code = (
        "import json, sys, numpy, torch\n"
        "rank = int(sys.argv[1])\n"
        "numpy.random.seed(rank); torch.manual_seed(rank)\n"
        "from distsampling import DistributedSamplerWrapper, WeightedBalanceClassSampler\n"
        "inner = WeightedBalanceClassSampler([i % 5 for i in range(97)], [1, 2, 3, 4, 0], 90)\n"
        "s = DistributedSamplerWrapper(inner, num_replicas=3, rank=rank, seed=1)\n"
        "s.set_epoch(2)\n"
        "print(json.dumps(list(s)))\n"
    )
    procs = [  # the three ranks run side by side, each its own interpreter
        subprocess.Popen([sys.executable, "-c", code, str(rank)], stdout=subprocess.PIPE, text=True)
        for rank in range(3)
    ]
    per_rank = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    inner = WeightedBalanceClassSampler([i % 5 for i in range(97)], [1, 2, 3, 4, 0], 90)
    inner.set_epoch(2)
    assert sorted(i for r in per_rank for i in r) == sorted(inner)  # 90 = 3 * 30: no padding


def test_set_epoch_reaches_the_inner_sampler_and_len_follows_its_length():
    """Invariant: set_epoch is forwarded every time; len and the split follow a changing inner length."""
    inner = EpochRecorder()
    ours = DistributedSamplerWrapper(inner, num_replicas=2, rank=1, seed=4)
    for epoch in (0, 1, 2, 3, 7):
        ours.set_epoch(epoch)
        n = 3 + epoch % 5
        positions = tud.DistributedSampler(range(n), 2, 1, seed=4)
        positions.set_epoch(epoch)
        assert len(ours) == len(positions) == -(-n // 2)
        assert list(ours) == [100 + p for p in positions]
    assert inner.epochs == [0, 1, 2, 3, 7]


@given(args=sampler_args(), later=st.lists(epochs, max_size=4))
def test_is_a_torch_distributed_sampler_with_torchs_attributes_over_the_inner_epoch(args, later):
    """Invariant: an instance of torch's DistributedSampler (as catalyst's and Lightning's
    wrappers are) holding every attribute torch's holds; after each set_epoch, those of the
    split equal torch's DistributedSampler's over range(len(inner epoch)), whose length may
    change between epochs, and dataset is the inner epoch (what catalyst and Lightning keep)."""
    inner = EpochRecorder()  # its length changes with the epoch
    ours = DistributedSamplerWrapper(inner, **args)
    assert isinstance(ours, tud.DistributedSampler)
    for epoch in [0, *later]:
        ours.set_epoch(epoch)
        theirs = tud.DistributedSampler(range(len(inner)), **args)
        theirs.set_epoch(epoch)
        assert set(dir(ours)) >= set(vars(theirs))
        for name in set(vars(theirs)) - {"dataset"}:
            mine, torchs = getattr(ours, name), getattr(theirs, name)
            assert (type(mine), mine) == (type(torchs), torchs), name
        assert isinstance(ours.dataset, ReferenceDatasetFromSampler)  # the reference's
        assert ours.dataset.sampler is inner
        assert ours.dataset.indices.tolist() == list(inner) and len(ours) == ours.num_samples


@given(data=labelled_datasets(), seed=seeds, e1=epochs, e2=epochs)
def test_the_inner_epoch_follows_the_wrapper_epoch(data, seed, e1, e2):
    """Invariant: after wrapper.set_epoch(e) the wrapper reads the inner sampler's epoch e."""
    inner = WeightedBalanceClassSampler(**data, seed=seed)
    ours = DistributedSamplerWrapper(inner, num_replicas=1, rank=0, shuffle=False)
    ours.set_epoch(e1)
    ours.set_epoch(e2)
    fresh = WeightedBalanceClassSampler(**data, seed=seed)
    fresh.set_epoch(e2)
    assert list(ours) == list(fresh) == list(ours)  # drawn once per epoch: iterating twice agrees


def test_a_catalyst_style_wrapper_over_a_global_rng_sampler_breaks_the_partition():
    """Invariant (the lesson of docs/tutorials/wrapper.md): ranks with their own numpy state and a
    catalyst-style wrapper read overlapping samples and miss others; ours partitions exactly."""
    cat = catalyst_style()
    labels, world = [i % 4 for i in range(800)], 4
    counts = [40, 80, 120, 160]  # 400 draws from classes of 200: no replacement
    theirs, ours = [], []
    for rank in range(world):
        disturb_global_rngs(rank)  # each process: its own (or no) numpy seed
        theirs += list(
            cat.CatalystStyleWrapper(cat.GlobalRNGClassSampler(labels, counts), world, rank)
        )
        inner = WeightedBalanceClassSampler(labels, counts, length=400)
        ours += list(DistributedSamplerWrapper(inner, world, rank))
    epoch = WeightedBalanceClassSampler(labels, counts, length=400)
    assert sorted(ours) == sorted(epoch)  # one epoch, each drawn sample read once
    assert len(set(ours)) == 400  # no replacement in any class: 400 distinct samples
    # theirs: each rank drew its own epoch; here only 319 distinct samples among the 400 reads
    assert len(theirs) == 400 and len(set(theirs)) < 350


def test_dataset_from_sampler_holds_one_epoch_until_set_epoch():
    """Invariant: items are the inner epoch, drawn once; set_epoch forwards and draws anew."""
    inner = EpochRecorder()
    d = DatasetFromSampler(inner)
    assert (len(d), [d[i] for i in range(len(d))]) == (3, [100, 101, 102])
    d.set_epoch(2)
    assert inner.epochs == [2]
    assert (len(d), d.indices.tolist()) == (5, [100, 101, 102, 103, 104])


def test_dataset_from_sampler_has_the_length_of_the_epoch_it_holds():
    """Invariant: len() is the kept epoch's length, even if the sampler grew since it was drawn;
    after set_epoch it is the sampler's length again."""
    inner = [3, 1, 2]
    d = DatasetFromSampler(inner)
    assert d.indices.tolist() == [3, 1, 2]
    inner.append(9)  # the sampler changed after its epoch was drawn
    assert len(d) == 3
    d.set_epoch(1)
    assert (len(d), d.indices.tolist()) == (4, [3, 1, 2, 9])


@given(n=st.integers(1, 30), seed=seeds, args=sampler_args())
def test_iter_draws_the_inner_epoch_at_once(n, seed, args):
    """Invariant: iter() draws the inner epoch before the first index is read, as list(sampler)
    would: drawing from the inner sampler's generator in between changes nothing read."""
    g = torch.Generator().manual_seed(seed)
    ours = DistributedSamplerWrapper(tud.RandomSampler(range(n), generator=g), **args)
    expected = DistributedSamplerWrapper(
        tud.RandomSampler(range(n), generator=torch.Generator().manual_seed(seed)), **args
    )
    it = iter(ours)
    torch.randperm(n, generator=g)  # someone else draws from the generator after iter()
    assert list(it) == list(expected)


@pytest.mark.parametrize(
    ("sampler", "message"),
    [
        (
            5,
            r"^sampler should be iterable and have __len__ \(a sampler, or a list of indices\), "
            r"but got sampler=5 of type int$",
        ),
        ((i for i in range(3)), r"but got sampler=<generator object"),
        (tud.TensorDataset(torch.zeros(3)), r"but got sampler=<torch.utils.data.dataset.Tensor"),
    ],
)
def test_a_non_sampler_or_an_unsized_sampler_is_rejected(sampler, message):
    """Invariant: an int, a generator (no __len__) or a dataset (no __iter__) fails, naming it."""
    with pytest.raises(TypeError, match=message):
        DistributedSamplerWrapper(sampler, num_replicas=2, rank=0)


@pytest.mark.parametrize(
    "inner",
    [
        [0.5, 1.0],
        ["0", "1"],
        [[0, 1]],
        tud.BatchSampler(range(4), 2, False),
        [0, 1.5],  # after a valid first index: numpy alone would truncate it to 1
        [3, "1"],
        [0, np.float64(2.0)],
        [0, torch.tensor(1.0)],
    ],
)
def test_an_inner_sampler_yielding_non_integers_is_rejected(inner):
    """Invariant: floats, strings or lists (a batch sampler) as indices fail wherever they occur,
    naming the sampler; none is silently truncated into an index."""
    with pytest.raises(TypeError, match=r"sampler should yield integer indices, but got sampler="):
        list(DistributedSamplerWrapper(inner, num_replicas=2, rank=0))


def test_an_inner_sampler_whose_len_disagrees_with_its_epoch_is_reported():
    """Invariant: a sampler yielding a different count than its __len__ fails with both numbers."""

    class Liar(tud.Sampler[int]):
        def __iter__(self):
            return iter(range(4))

        def __len__(self):
            return 6

    with pytest.raises(RuntimeError, match=r"yielded 4 indices but has len\(sampler\)=6"):
        list(DistributedSamplerWrapper(Liar(), num_replicas=2, rank=0))


@pytest.mark.parametrize("name", ["num_replicas", "rank", "seed"])
@given(value=non_integers)
def test_non_integer_arguments_are_rejected_naming_the_value(name, value):
    """Invariant: num_replicas, rank and seed must be ints (bool excluded); the error names the value."""
    kwargs = {"num_replicas": 2, "rank": 0, "seed": 0, name: value}
    with pytest.raises(TypeError, match=rf"{name} should be an integer, but got {name}="):
        DistributedSamplerWrapper([1, 2, 3], **kwargs)


@pytest.mark.parametrize("name", ["shuffle", "drop_last"])
def test_flags_must_be_bools(name):
    """Invariant: shuffle and drop_last are not guessed from truthy values."""
    with pytest.raises(TypeError, match=f"{name} should be a boolean value, but got {name}=1"):
        DistributedSamplerWrapper([1, 2], num_replicas=1, rank=0, **{name: 1})


def test_world_arguments_are_checked_like_distributed_sampler():
    """Invariant: a rank outside the world, or no process group for the defaults, fails clearly."""
    with pytest.raises(
        ValueError, match=r"rank should be in the interval \[0, 1\], but got rank=2"
    ):
        DistributedSamplerWrapper([1, 2], num_replicas=2, rank=2)
    with pytest.raises(ValueError, match=r"init_process_group"):
        DistributedSamplerWrapper([1, 2])
    with pytest.raises(TypeError, match=r"epoch should be an integer, but got epoch=1.5"):
        DistributedSamplerWrapper([1, 2], 1, 0).set_epoch(1.5)


@given(
    n=st.integers(1, 60),
    extra=st.integers(-59, 130),
    seed=st.one_of(st.none(), seeds),
    epoch_calls=st.integers(1, 3),
    replacement=flags,
)
def test_torchs_random_sampler_is_read_as_tensors_with_the_same_draws(
    n, extra, seed, epoch_calls, replacement
):
    """Invariant: a RandomSampler (the fast path without replacement) yields list(sampler) and
    leaves the generator (or the global RNG, without one) in the same state, epoch after epoch."""
    num_samples = max(1, n + extra)

    def make():
        torch.manual_seed(7)  # a RandomSampler without generator seeds itself from here
        g = None if seed is None else torch.Generator().manual_seed(seed)
        return tud.RandomSampler(range(n), replacement, num_samples, generator=g)

    def run(read):  # epochs drawn one after another, then the generator states left behind
        sampler = make()
        draws = [read(sampler, epoch) for epoch in range(epoch_calls)]
        return draws, torch.get_rng_state(), sampler.generator and sampler.generator.get_state()

    def fast(sampler, epoch):
        d = DatasetFromSampler(sampler)
        d.set_epoch(epoch)  # RandomSampler has no set_epoch: this only drops the kept epoch
        return d.indices.tolist()

    idx_ours, global_ours, own_ours = run(fast)
    idx_torch, global_torch, own_torch = run(lambda sampler, epoch: list(sampler))
    assert idx_ours == idx_torch
    assert torch.equal(global_ours, global_torch)
    assert own_ours is None if seed is None else torch.equal(own_ours, own_torch)


def test_torchs_sequential_sampler_is_read_as_a_range():
    """Invariant: SequentialSampler's epoch is 0..n-1, also through the wrapper."""
    inner = tud.SequentialSampler(range(7))
    assert DatasetFromSampler(inner).indices.tolist() == list(inner)
    assert list(DistributedSamplerWrapper(inner, 2, 1, shuffle=False)) == [1, 3, 5, 0]


def test_numpy_and_tensor_integers_are_read_as_indices():
    """Invariant: any integer that operator.index takes (numpy ints, 0-d integer tensors) is an index."""
    inner = [np.int64(2), torch.tensor(3), np.uint8(7), 4]
    assert DatasetFromSampler(inner).indices.tolist() == [2, 3, 7, 4]


@given(n=st.integers(1, 3000), seed=seeds, data=st.data())
def test_the_discarded_randperm_is_replaced_by_draws_that_leave_the_same_generator_state(
    n, seed, data
):
    """Invariant: when num_samples is a multiple of n, torch draws one more randperm(n) and keeps
    none of it; we advance the generator by cheaper draws instead, and it ends in the same state,
    so this epoch and the next ones are torch's, index for index."""
    num_samples = n * data.draw(st.integers(1, 3), label="epochs of n per epoch")
    epochs = data.draw(st.integers(1, 3), label="epochs")
    g_ours, g_torch = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    ours = tud.RandomSampler(range(n), num_samples=num_samples, generator=g_ours)
    theirs = tud.RandomSampler(range(n), num_samples=num_samples, generator=g_torch)
    for _ in range(epochs):
        idx_ours = DatasetFromSampler(ours).indices.tolist()
        idx_torch = list(theirs)
        assert idx_ours == idx_torch
        assert torch.equal(g_ours.get_state(), g_torch.get_state())


@given(inner=inner_epochs, args=sampler_args_some_omitted(), epoch=st.none() | epochs)
def test_omitted_arguments_take_torchs_defaults(inner, args, epoch):
    """Invariant: leaving out shuffle, seed, drop_last or set_epoch reads the positions torch's
    DistributedSampler gives without them; the inner sampler is kept as wrapper.sampler."""
    ours = DistributedSamplerWrapper(inner, **args)
    positions = tud.DistributedSampler(range(len(inner)), **args)
    if epoch is not None:
        ours.set_epoch(epoch)
        positions.set_epoch(epoch)
    assert list(ours) == [inner[p] for p in positions]
    assert (ours.shuffle, ours.seed, ours.drop_last) == (
        positions.shuffle,
        positions.seed,
        positions.drop_last,
    )
    assert ours.sampler is inner and ours.dataset.sampler is inner


@given(inner=inner_epochs, seed=seeds_at_generator_bounds, epoch=st.integers(0, 2))
def test_seeds_at_the_generators_exact_bounds_match_torch_or_are_rejected(inner, seed, epoch):
    """Invariant: seed + epoch in [-2**63, 2**64 - 1] splits as torch; one past it names both values."""
    ours = DistributedSamplerWrapper(inner, num_replicas=2, rank=1, seed=seed)
    ours.set_epoch(epoch)
    if GENERATOR_SEED_LOW <= seed + epoch <= GENERATOR_SEED_HIGH:
        positions = tud.DistributedSampler(range(len(inner)), 2, 1, seed=seed)
        positions.set_epoch(epoch)
        assert list(ours) == [inner[p] for p in positions]
    else:
        with pytest.raises(ValueError, match=rf"but got seed={seed}, epoch={epoch}$"):
            list(ours)


@pytest.mark.parametrize("seed", [GENERATOR_SEED_LOW - 1, GENERATOR_SEED_HIGH + 1])
def test_a_seed_outside_the_generator_range_is_rejected_at_construction(seed):
    """Invariant: a seed torch.Generator can never take is refused when the wrapper is built."""
    with pytest.raises(ValueError, match=rf"seed should be .*but got seed={seed}"):
        DistributedSamplerWrapper([1, 2], num_replicas=1, rank=0, seed=seed)


@given(n=st.integers(min_value=1, max_value=40), args=sampler_args(), epoch=epochs, read=flags)
def test_a_copy_sets_its_epoch_without_moving_the_original_or_its_inner_sampler(
    n, args, epoch, read
):
    """Invariant: ``copy.copy(wrapper).set_epoch(e)`` leaves the original wrapper's epoch, its
    inner sampler's epoch and the indices it yields as they were; the copy yields what a
    wrapper set to ``e`` yields. A fixed list inside is shared, the dataset is the copy's own."""
    labels = [0, 1, 2] + [i % 3 for i in range(n)]  # every class present

    def make() -> DistributedSamplerWrapper:
        inner = WeightedBalanceClassSampler(labels, [1, 2, 3], length=n, seed=args["seed"])
        return DistributedSamplerWrapper(inner, **args)

    original, reference = make(), make()
    before = list(original) if read else None  # the inner epoch drawn and kept, or not yet
    twin = copy.copy(original)
    twin.set_epoch(epoch + 1)
    assert (original.epoch, original.sampler.epoch) == (0, 0)
    assert list(original) == (before or list(reference))
    reference.set_epoch(epoch + 1)
    assert list(twin) == list(reference)
    fixed = DistributedSamplerWrapper(list(range(n)), **args)
    twin = copy.copy(fixed)
    assert twin.sampler is fixed.sampler and twin.dataset is not fixed.dataset


# index_tensor: one pass of any sampler as an integer tensor


@given(ints=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40), form=st.integers(0, 2))
def test_a_pass_of_integer_indices_becomes_an_int64_tensor_of_the_same_values(ints, form):
    """Invariant: ``index_tensor`` of a sampler yielding Python, numpy or tensor ints is the
    ``(m,)`` int64 tensor of those values, in order, at int64's limits too."""
    as_form = [lambda v: v, np.int64, torch.tensor][form]
    out = index_tensor([as_form(v) for v in ints])
    assert out.dtype == torch.int64 and out.shape == (len(ints),)
    assert out.tolist() == ints


@given(
    good=st.lists(st.integers(0, 9), max_size=5),
    bad=st.sampled_from([1.5, 2.0, "1", [0, 1], None, 2**63, -(2**63) - 1]),
)
def test_a_pass_that_yields_anything_but_integers_is_refused_not_truncated(good, bad):
    """Invariant: a float (1.5 or 2.0), a string, a batch, None or an integer beyond int64
    anywhere in the pass is a TypeError naming the sampler and the underlying error: never
    truncated, parsed or wrapped into an index."""
    sampler = [*good, bad]
    with pytest.raises(TypeError) as err:
        index_tensor(sampler)
    cause = err.value.__cause__
    assert str(err.value) == (
        f"sampler should yield integer indices, but got sampler={sampler!r} ({cause})"
    )
    assert isinstance(err.value.__cause__, TypeError | ValueError | OverflowError)


def _is_index_error(cause: BaseException, bad: object) -> bool:
    """What ``operator.index`` (or int64 conversion) raises for ``bad`` is the chained cause."""
    try:
        np.fromiter([operator.index(bad)], dtype=np.int64)
    except (TypeError, ValueError, OverflowError) as expected:
        return type(cause) is type(expected) and str(cause) == str(expected)
    return False


@pytest.mark.parametrize("bad", [1.5, "1", [0, 1], None, 2**63])
def test_the_refused_index_carries_the_conversions_own_error(bad):
    """Invariant: the TypeError's cause is exactly what converting that one value raised."""
    with pytest.raises(TypeError) as err:
        index_tensor([0, bad])
    assert _is_index_error(err.value.__cause__, bad)


def test_a_share_that_is_already_split_is_refused_and_a_one_rank_sampler_is_taken():
    """Invariant: wrapping a sampler whose ``num_replicas`` > 1 (a rank's share already) would
    split it again: refused, naming the inner world; a sampler of one rank is taken; a
    wrapper of one rank over a share is taken too (nothing is split again)."""
    import distsampling as ds

    message = (
        "sampler should yield the same epoch on every rank, but got a share of one rank of "
        "num_replicas=2: DistributedSampler splits the epoch itself; splitting its share again "
        "leaves each rank a part of a part (most samples never read). Pass it to the "
        "DataLoader as it is"
    )
    with pytest.raises(ValueError) as caught:
        ds.DistributedSamplerWrapper(ds.DistributedSampler(range(9), 2, 0), 2, 0)
    assert str(caught.value) == message
    with pytest.raises(ValueError, match=r"num_replicas=3: DistributedSampler splits"):
        ds.DistributedSamplerWrapper(ds.DistributedSampler(range(9), 3, 0), 2, 0)
    assert list(ds.DistributedSamplerWrapper(ds.DistributedSampler(range(9), 1, 0), 1, 0))
    assert len(ds.DistributedSamplerWrapper(ds.DistributedSampler(range(9), 3, 0), 1, 0)) == 3


def test_a_dataset_from_a_sampler_starts_at_epoch_0_and_a_sampler_over_it_reads_it_silently():
    """Invariant: ``DatasetFromSampler.epoch`` is 0 until ``set_epoch``, as a sampler's: a
    ``DistributedSampler`` over it reads its first epoch without a ``FrameworkWarning``."""
    import warnings

    from distsampling import DatasetFromSampler, DistributedSampler, FrameworkWarning

    dataset = DatasetFromSampler([4, 2, 0, 3, 1])
    assert dataset.epoch == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", FrameworkWarning)
        assert list(DistributedSampler(dataset, 2, 0, shuffle=False)) == [0, 2, 4]


# --- a pass of our DistributedSampler: its indices carry the epoch it began with -----------------


def _weighted_draws(epoch: int) -> list[int]:
    """The weighted sampler's draw of ``epoch``: what a DatasetFromSampler over it holds."""
    inner = WeightedBalanceClassSampler(["a", "b", "b", "c"], [1, 1, 2], length=6, seed=3)
    inner.set_epoch(epoch)
    return list(inner)


def test_a_copy_of_the_dataset_reads_the_epoch_its_index_carries_and_keeps_its_own():
    """Invariant: a DatasetFromSampler's copy (a DataLoader worker's, made when the worker
    started) that an index of another epoch reaches reads that epoch's draw, from a copy of its
    sampler: its own epoch, its sampler's and its own draw stay as they were; an index without
    an epoch reads the copy's own draw."""
    from distsampling.guards import EpochIndex

    inner = WeightedBalanceClassSampler(["a", "b", "b", "c"], [1, 1, 2], length=6, seed=3)
    main = DatasetFromSampler(inner)
    main.set_epoch(2)
    worker = copy.deepcopy(main)  # as a worker's, made at epoch 2
    main.set_epoch(4)  # in the main process, after the worker started
    assert [worker[EpochIndex(i, 4)] for i in range(6)] == _weighted_draws(4)
    assert [worker[EpochIndex(i, 2)] for i in range(6)] == _weighted_draws(2)
    assert [worker[i] for i in range(6)] == _weighted_draws(2)
    assert (worker.epoch, worker.sampler.epoch, main.sampler.epoch) == (2, 2, 4)


@pytest.mark.timeout(180)
def test_spawned_persistent_workers_draw_each_epoch_of_the_main_process():
    """Invariant: a spawned (pickled) persistent worker draws each epoch that the main process
    set after the worker started: the epoch reaches it with each index, none is kept for it."""
    from distsampling import DistributedSampler

    inner = WeightedBalanceClassSampler(["a", "b", "b", "c"], [1, 1, 2], length=6, seed=3)
    draws = DatasetFromSampler(inner)
    sampler = DistributedSampler(draws, 1, 0, seed=1)
    loader = tud.DataLoader(
        draws, batch_size=2, sampler=sampler, num_workers=1, persistent_workers=True,
        multiprocessing_context="spawn",
    )  # fmt: skip
    for epoch in range(3):
        sampler.set_epoch(epoch)
        plan = tud.DistributedSampler(range(6), 1, 0, seed=1)
        plan.set_epoch(epoch)
        got = [i for batch in loader for i in batch.tolist()]
        assert got == [_weighted_draws(epoch)[i] for i in plan]


def test_a_set_epoch_during_a_pass_is_the_next_passs_and_holds_nothing():
    """Invariant: a ``set_epoch`` while a pass of our DistributedSampler is read (a loop that
    calls it after the first batch) leaves the rest of that pass its epoch's draws, and the
    dataset is at the new epoch at once: nothing waits for the pass to end."""
    from distsampling import DistributedSampler

    inner = WeightedBalanceClassSampler(["a", "b", "b", "c"], [1, 1, 2], length=6, seed=3)
    draws = DatasetFromSampler(inner)
    sampler = DistributedSampler(draws, 1, 0, shuffle=False)
    sampler.set_epoch(5)
    positions = iter(sampler)
    first = draws[next(positions)]
    sampler.set_epoch(6)
    assert (draws.epoch, inner.epoch) == (6, 6)  # at once
    assert [first] + [draws[i] for i in positions] == _weighted_draws(5)
    assert [draws[i] for i in sampler] == _weighted_draws(6)


def test_a_pass_of_ours_over_a_dataset_never_set_reads_the_samplers_own_epoch():
    """Invariant: a DatasetFromSampler whose ``set_epoch`` was never called draws its sampler as
    it is (here at epoch 9), in a pass of our DistributedSampler as on first access."""
    from distsampling import DistributedSampler

    inner = WeightedBalanceClassSampler(["a", "b", "b", "c"], [1, 1, 2], length=6, seed=3)
    inner.set_epoch(9)
    draws = DatasetFromSampler(inner)
    assert [draws[i] for i in DistributedSampler(draws, 1, 0, shuffle=False)] == _weighted_draws(9)


def test_one_of_our_samplers_is_read_through_its_indices_tensor_not_its_ints():
    """Invariant: ``index_tensor`` of one of this package's samplers is its ``indices()``, in
    their own dtype (int32 below 2**31 samples), never its ints read one by one into int64."""
    from distsampling import DistributedSampler

    sampler = DistributedSampler(range(10), 2, 1, seed=4)
    got = index_tensor(sampler)
    assert got.dtype == torch.int32 and torch.equal(got, sampler.indices())


def test_a_sampler_of_the_old_sequence_protocol_is_read_through_its_items():
    """Invariant: a sampler with ``__getitem__`` and ``__len__`` but no ``__iter__`` anywhere in
    its classes (Python's old sequence protocol) is read item by item, in order."""

    class Old:
        def __len__(self) -> int:
            return 3

        def __getitem__(self, i: int) -> int:
            return [5, 3, 4][i]  # IndexError past the end ends the iteration

    assert index_tensor(Old()).tolist() == [5, 3, 4]
