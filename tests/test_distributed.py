"""Properties of distsampling.DistributedSampler, each checked against torch's own class."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.utils.data.distributed as torch_distributed
from hypothesis import given
from hypothesis import strategies as st

from distsampling import DistributedSampler, epoch_permutation, rank_positions, split_sizes
from strategies import (
    GENERATOR_SEED_HIGH,
    GENERATOR_SEED_LOW,
    argument_values,
    dataset_lengths,
    epochs,
    non_integers,
    sampler_args,
    sampler_args_some_omitted,
    seeds_at_generator_bounds,
    world_sizes,
)


def both(n: int, epoch: int = 0, **kwargs) -> tuple[list[int], list[int]]:
    """Iterate ours and torch's sampler over ``range(n)`` with the same arguments and epoch."""
    ours = DistributedSampler(range(n), **kwargs)
    theirs = torch_distributed.DistributedSampler(range(n), **kwargs)
    ours.set_epoch(epoch)
    theirs.set_epoch(epoch)
    return list(ours), list(theirs)


def all_ranks(n: int, world: int, epoch: int = 0, **kwargs) -> list[list[int]]:
    """Every rank's indices for one epoch, ranks simulated in this process."""
    out = []
    for rank in range(world):
        s = DistributedSampler(range(n), num_replicas=world, rank=rank, **kwargs)
        s.set_epoch(epoch)
        out.append(list(s))
    return out


@given(n=dataset_lengths, args=sampler_args(), epoch=epochs)
def test_matches_torch_indices_order_and_len_for_all_arguments(n, args, epoch):
    """Invariant: ours yields torch's indices in torch's order, and the same len/num_samples/total_size."""
    idx_ours, idx_torch = both(n, epoch, **args)
    assert idx_ours == idx_torch
    ours = DistributedSampler(range(n), **args)
    theirs = torch_distributed.DistributedSampler(range(n), **args)
    assert (len(ours), ours.num_samples, ours.total_size) == (
        len(theirs),
        theirs.num_samples,
        theirs.total_size,
    )


@given(n=dataset_lengths, args=sampler_args(), epochs=st.tuples(epochs, epochs), data=st.data())
def test_the_epoch_is_read_at_iter_as_torch_reads_it(n, args, epochs, data):
    """Invariant: an ``iter()`` reads the epoch set before it, as torch's does: a ``set_epoch``
    between ``iter()`` and its first ``next()`` (or after a few) is the next pass's."""
    ours = DistributedSampler(range(n), **args)
    theirs = torch_distributed.DistributedSampler(range(n), **args)
    for s in (ours, theirs):
        s.set_epoch(epochs[0])
    it_ours, it_torch = iter(ours), iter(theirs)
    k = data.draw(st.integers(0, len(ours)), label="read before the late set_epoch")
    idx_ours = [next(it_ours) for _ in range(k)]
    idx_torch = [next(it_torch) for _ in range(k)]
    for s in (ours, theirs):
        s.set_epoch(epochs[1])
    assert idx_ours + list(it_ours) == idx_torch + list(it_torch)
    assert list(ours) == list(theirs)  # the next pass: the late epoch


@given(n=dataset_lengths, args=sampler_args_some_omitted(), epoch=st.none() | epochs)
def test_is_a_torch_distributed_sampler_holding_every_attribute_torchs_holds(n, args, epoch):
    """Invariant: ours is an instance of torch's DistributedSampler (code that leaves torch's
    sampler alone, as Lightning's default does, leaves ours alone), every attribute torch's
    object holds for the same arguments and epoch ours holds with the same type and value, and
    every method torch's class defines is ours: none of torch's runs on our sampler."""
    dataset = range(n)
    ours = DistributedSampler(dataset, **args)
    theirs = torch_distributed.DistributedSampler(dataset, **args)
    if epoch is not None:
        ours.set_epoch(epoch)
        theirs.set_epoch(epoch)
    assert isinstance(ours, torch_distributed.DistributedSampler)
    assert set(vars(theirs)) >= {"num_samples", "total_size", "epoch"}  # torch's, read from it
    for name, value in vars(theirs).items():
        assert (type(getattr(ours, name)), getattr(ours, name)) == (type(value), value), name
    methods = [m for m, v in vars(torch_distributed.DistributedSampler).items() if callable(v)]
    assert set(methods) == {"__init__", "__iter__", "__len__", "set_epoch"}
    ours_classes = DistributedSampler.__mro__[: DistributedSampler.__mro__.index(type(theirs))]
    # each defined by the guards' class or the reference's, never left to torch's
    assert all(any(m in vars(c) for c in ours_classes) for m in methods)


@given(n=dataset_lengths, world=world_sizes, epoch=epochs, shuffle=st.booleans())
def test_ranks_are_disjoint_and_cover_the_padded_epoch(n, world, epoch, shuffle):
    """Invariant: interleaving the ranks position by position rebuilds the padded epoch exactly once."""
    per_rank = all_ranks(n, world, epoch, shuffle=shuffle)
    full = DistributedSampler(range(n), num_replicas=1, rank=0, shuffle=shuffle)
    full.set_epoch(epoch)
    order = list(full)  # the unpadded epoch order, shared by all ranks
    # rank r holds positions r, r + W, r + 2W, ...: position p belongs to exactly one rank
    padded = [per_rank[p % world][p // world] for p in range(sum(map(len, per_rank)))]
    assert padded[:n] == order
    assert sorted(set(padded)) == list(range(n))


@given(n=dataset_lengths, world=world_sizes, epoch=epochs, shuffle=st.booleans())
def test_padding_repeats_the_head_so_every_rank_has_num_samples(n, world, epoch, shuffle):
    """Invariant: each rank has num_samples items; the padding is the epoch's head, wrapping as needed."""
    per_rank = all_ranks(n, world, epoch, shuffle=shuffle)
    num_samples = -(-n // world)
    assert all(len(r) == num_samples for r in per_rank)
    padded = [per_rank[p % world][p // world] for p in range(num_samples * world)]
    order = padded[:n]
    assert padded[n:] == [order[i % n] for i in range(num_samples * world - n)]


@given(n=dataset_lengths, world=world_sizes, epoch=epochs, shuffle=st.booleans())
def test_drop_last_cuts_the_tail_and_never_repeats(n, world, epoch, shuffle):
    """Invariant: with drop_last every rank has floor(n / W) items, no index repeats, the tail is cut."""
    per_rank = all_ranks(n, world, epoch, shuffle=shuffle, drop_last=True)
    assert all(len(r) == n // world for r in per_rank)
    flat = [i for r in per_rank for i in r]
    assert len(flat) == len(set(flat)) == (n // world) * world


@given(n=dataset_lengths, args=sampler_args(), e1=epochs, e2=epochs)
def test_set_epoch_changes_nothing_without_shuffle(n, args, e1, e2):
    """Invariant: shuffle=False gives the same order for every epoch."""
    args["shuffle"] = False
    assert both(n, e1, **args)[0] == both(n, e2, **args)[0]


@given(n=st.integers(2, 200), seed=st.integers(0, 1000), epoch=epochs)
def test_order_depends_only_on_seed_plus_epoch(n, seed, epoch):
    """Invariant: the shuffled order is a function of seed + epoch (as torch's), not of each separately."""
    a = both(n, epoch, num_replicas=1, rank=0, seed=seed)[0]
    b = both(n, 0, num_replicas=1, rank=0, seed=seed + epoch)[0]
    assert a == b


def test_a_fresh_process_with_other_global_rng_state_yields_the_same_indices():
    """Invariant: the order comes from (seed, epoch) alone, not from the global RNGs of a process."""
    code = (
        "import json, random, sys, numpy, torch\n"
        "random.seed(7); numpy.random.seed(7); torch.manual_seed(7); torch.rand(99)\n"
        "from distsampling import DistributedSampler\n"
        "out = []\n"
        "for rank in range(3):\n"
        "    s = DistributedSampler(range(50), num_replicas=3, rank=rank, seed=11)\n"
        "    s.set_epoch(4)\n"
        "    out.append(list(s))\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    torch.manual_seed(12345)  # this process's global state differs from the child's
    assert json.loads(proc.stdout) == all_ranks(50, 3, 4, seed=11)


def test_defaults_come_from_the_process_group_or_fail_with_a_fix():
    """Invariant: without a process group, None world arguments raise an error saying how to fix it."""
    assert not torch.distributed.is_initialized()
    with pytest.raises(ValueError) as theirs:
        torch_distributed.DistributedSampler(range(4))
    with pytest.raises(ValueError, match=r"init_process_group.*num_replicas= and rank=") as ours:
        DistributedSampler(range(4))
    # torch's words first (its ValueError, from dist.get_world_size), then how to fix it
    assert str(ours.value).startswith(str(theirs.value).rstrip("."))
    with pytest.raises(ValueError, match="got num_replicas=2, rank=None"):
        DistributedSampler(range(4), num_replicas=2)


@given(world=world_sizes, data=st.data())
def test_rank_outside_the_world_is_rejected_naming_the_value(world, data):
    """Invariant: rank must lie in [0, num_replicas); the error names rank and its value."""
    rank = data.draw(st.one_of(st.integers(max_value=-1), st.integers(min_value=world)))
    with pytest.raises(ValueError) as theirs:
        torch_distributed.DistributedSampler(range(4), num_replicas=world, rank=rank)
    with pytest.raises(ValueError) as ours:
        DistributedSampler(range(4), num_replicas=world, rank=rank)
    # torch's words first ("Invalid rank 3, ...": torch's own tests match them), then ours
    assert (
        str(theirs.value) == f"Invalid rank {rank}, rank should be in the interval [0, {world - 1}]"
    )
    assert str(ours.value) == f"{theirs.value}, but got rank={rank} for num_replicas={world}"


@pytest.mark.parametrize("num_replicas", [0, -3])
def test_num_replicas_below_one_is_rejected(num_replicas):
    """Invariant: a world needs at least one rank."""
    with pytest.raises(
        ValueError, match=f"num_replicas should be >= 1, but got num_replicas={num_replicas}"
    ):
        DistributedSampler(range(4), num_replicas=num_replicas, rank=0)


@pytest.mark.parametrize("name", ["num_replicas", "rank", "seed"])
@given(value=non_integers)
def test_non_integer_arguments_are_rejected_naming_the_value(name, value):
    """Invariant: num_replicas, rank and seed must be ints (bool excluded); the error names the value."""
    kwargs = {"num_replicas": 2, "rank": 0, "seed": 0, name: value}
    with pytest.raises(TypeError, match=rf"{name} should be an integer, but got {name}="):
        DistributedSampler(range(4), **kwargs)


@given(value=non_integers)
def test_set_epoch_rejects_a_non_integer_epoch(value):
    """Invariant: set_epoch takes an int (bool excluded); the error names epoch and the value."""
    s = DistributedSampler(range(4), num_replicas=2, rank=0)
    with pytest.raises(TypeError, match=r"epoch should be an integer, but got epoch="):
        s.set_epoch(value)


def test_a_dataset_without_len_is_rejected():
    """Invariant: the split needs the dataset's length; an unsized iterable is named in the error."""
    with pytest.raises(TypeError, match=r"dataset should have __len__.*but got dataset=<generator"):
        DistributedSampler((i for i in range(4)), num_replicas=2, rank=0)


def is_boolean(value: object) -> bool:
    """A flag's kind: Python's or numpy's bool, or a one-element bool tensor."""
    if isinstance(value, torch.Tensor):
        return value.dtype == torch.bool and value.numel() == 1
    return isinstance(value, (bool, np.bool_))


def is_integer(value: object) -> bool:
    """An integer argument's kind: a Python or numpy int, or a one-element integer tensor."""
    if isinstance(value, torch.Tensor):
        return value.numel() == 1 and not value.dtype.is_floating_point and not is_boolean(value)
    return isinstance(value, (int, np.integer)) and not is_boolean(value)


def outcome(build, epoch: int | object = 0) -> tuple[list[int], int] | Exception:
    """``(indices, len)`` of the sampler ``build()`` makes after ``set_epoch(epoch)``, or the error."""
    try:
        sampler = build()
        sampler.set_epoch(epoch)
        return list(sampler), len(sampler)
    except (TypeError, ValueError, RuntimeError) as err:
        return err


@given(
    name=st.sampled_from(["num_replicas", "rank", "shuffle", "seed", "drop_last", "epoch"]),
    value=argument_values,
    n=st.integers(0, 12),
)
def test_every_value_torch_takes_of_the_arguments_kind_gives_torchs_indices(name, value, n):
    """Invariant: where torch's DistributedSampler takes a value (``num_replicas=torch.tensor(2)``,
    ``shuffle=np.True_``) and it is of the argument's kind (an integer, a boolean), ours takes it
    and yields torch's indices and len; a value torch takes only by truthiness or as 0/1
    (``shuffle="no"``, ``rank=True``) is refused with a TypeError naming the argument; and a value
    torch refuses, ours refuses, but an integer seed or epoch (numpy's, a tensor), which torch's
    ``manual_seed`` cannot take but is a fine seed."""
    kwargs = {"num_replicas": 3, "rank": 1, "shuffle": True, "seed": 5, "drop_last": False}
    epoch = value if name == "epoch" else 2
    if name != "epoch":
        kwargs[name] = value
    kind = is_boolean if name in ("shuffle", "drop_last") else is_integer
    theirs = outcome(lambda: torch_distributed.DistributedSampler(range(n), **kwargs), epoch)
    ours = outcome(lambda: DistributedSampler(range(n), **kwargs), epoch)
    if not isinstance(theirs, Exception) and kind(value):
        assert ours == theirs
    elif not isinstance(theirs, Exception):
        assert isinstance(ours, TypeError) and f"but got {name}=" in str(ours)
    elif not (name in ("seed", "epoch") and kind(value)):
        assert isinstance(ours, (TypeError, ValueError)) and f"{name}" in str(ours)


@given(value=st.one_of(st.integers(1, 4), argument_values))
def test_accepted_values_are_stored_as_plain_ints_and_bools(value):
    """Invariant: a numpy or tensor argument is stored as a Python int or bool, so the sampler's
    attributes compare, print and serialise as plain values."""
    for name, kind in [("num_replicas", is_integer), ("seed", is_integer), ("shuffle", is_boolean)]:
        kwargs = {"num_replicas": 4, "rank": 0, name: value}
        if kind(value) and not (name == "num_replicas" and value < 1):
            stored = getattr(DistributedSampler(range(5), **kwargs), name)
            assert type(stored) is (bool if kind is is_boolean else int) and stored == value


@pytest.mark.parametrize("name", ["shuffle", "drop_last"])
def test_flags_must_be_bools(name):
    """Invariant: shuffle and drop_last are not guessed from truthy values."""
    with pytest.raises(TypeError, match=f"{name} should be a boolean value, but got {name}=1"):
        DistributedSampler(range(4), num_replicas=1, rank=0, **{name: 1})


def test_seed_plus_epoch_outside_the_generator_range_is_rejected():
    """Invariant: a seed torch.Generator cannot take fails with both values named, not deep in torch."""
    s = DistributedSampler(range(4), num_replicas=1, rank=0, seed=2**64 - 1)
    s.set_epoch(1)
    with pytest.raises(ValueError, match=rf"but got seed={2**64 - 1}, epoch=1"):
        list(s)


def test_a_dataset_whose_length_changed_is_reported_not_mis_split():
    """Invariant: if len(dataset) changes after construction, iterating says so instead of mis-splitting."""
    data = list(range(10))
    s = DistributedSampler(data, num_replicas=2, rank=0)
    data.extend([10, 11])
    with pytest.raises(RuntimeError) as error:
        list(s)
    assert str(error.value) == (
        "len(dataset) changed since this sampler was built from 10, but got len(dataset)=12: "
        "build a new sampler, or one that reads the length every epoch: "
        "DistributedSamplerWrapper(SequentialSampler(dataset), ...)"
    )


def test_a_dataset_that_shrank_is_reported_even_where_torchs_total_size_still_fits():
    """Invariant: 10 -> 9 samples on 4 ranks keeps torch's total_size (12) but is reported:
    the length, not the padded length, is what the order was computed for."""
    data = list(range(10))
    s = DistributedSampler(data, num_replicas=4, rank=0)
    data.pop()
    assert split_sizes(9, 4, False) == (s.num_samples, s.total_size)
    with pytest.raises(RuntimeError, match=r"built from 10, but got len\(dataset\)=9: "):
        list(s)


@given(n=st.integers(0, 5000), seed=st.integers(-(2**63), 2**64 - 1))
def test_an_int32_permutation_is_torchs_int64_permutation(n, seed):
    """Invariant: randperm draws the same permutation for int32 and int64 (our memory saving relies on it)."""
    g32, g64 = torch.Generator(), torch.Generator()
    g32.manual_seed(seed)
    g64.manual_seed(seed)
    assert torch.equal(
        torch.randperm(n, generator=g32, dtype=torch.int32).long(), torch.randperm(n, generator=g64)
    )


def test_a_large_epoch_matches_torch_on_the_last_rank():
    """Invariant: parity holds at a size where randperm's large-n path and chunked output are used."""
    n, world, rank = 3 * 10**6 + 7, 8, 7
    ours = DistributedSampler(range(n), world, rank, seed=3)
    theirs = torch_distributed.DistributedSampler(range(n), world, rank, seed=3)
    assert list(ours) == list(theirs)


@given(n=dataset_lengths, args=sampler_args_some_omitted(), epoch=st.none() | epochs)
def test_omitted_arguments_take_torchs_defaults(n, args, epoch):
    """Invariant: leaving out shuffle, seed, drop_last or set_epoch gives what torch gives without them."""
    ours = DistributedSampler(range(n), **args)
    theirs = torch_distributed.DistributedSampler(range(n), **args)
    if epoch is not None:
        ours.set_epoch(epoch)
        theirs.set_epoch(epoch)
    idx_ours, idx_torch = list(ours), list(theirs)
    assert idx_ours == idx_torch
    assert ours.indices().tolist() == idx_torch  # the tensor iter() hands out
    assert (ours.shuffle, ours.seed, ours.drop_last) == (
        theirs.shuffle,
        theirs.seed,
        theirs.drop_last,
    )


@given(
    n=st.integers(1, 50),
    world=world_sizes,
    seed=seeds_at_generator_bounds,
    epoch=st.integers(0, 2),
    data=st.data(),
)
def test_seeds_at_the_generators_exact_bounds_match_torch_or_are_rejected(
    n, world, seed, epoch, data
):
    """Invariant: seed + epoch anywhere in [-2**63, 2**64 - 1] gives torch's order; one past it is rejected."""
    rank = data.draw(st.integers(0, world - 1), label="rank")
    ours = DistributedSampler(range(n), world, rank, seed=seed)
    ours.set_epoch(epoch)
    if GENERATOR_SEED_LOW <= seed + epoch <= GENERATOR_SEED_HIGH:
        theirs = torch_distributed.DistributedSampler(range(n), world, rank, seed=seed)
        theirs.set_epoch(epoch)
        assert list(ours) == list(theirs)
    else:
        with pytest.raises(ValueError, match=rf"but got seed={seed}, epoch={epoch}$"):
            list(ours)
    # without shuffle the seed is never used, so no seed + epoch is out of range
    plain = DistributedSampler(range(n), world, rank, shuffle=False, seed=seed)
    plain.set_epoch(epoch)
    assert list(plain) == [p % n for p in range(rank, -(-n // world) * world, world)]


@pytest.mark.parametrize("seed", [GENERATOR_SEED_LOW - 1, GENERATOR_SEED_HIGH + 1])
def test_a_seed_outside_the_generator_range_is_rejected_at_construction(seed):
    """Invariant: a seed torch.Generator can never take is refused when the sampler is built."""
    with pytest.raises(ValueError, match=rf"seed should be .*but got seed={seed}"):
        DistributedSampler(range(4), num_replicas=1, rank=0, seed=seed)


@given(n=dataset_lengths, args=sampler_args(), epoch=epochs)
def test_indices_are_an_int32_tensor_of_torchs_indices(n, args, epoch):
    """Invariant: indices() is what iter() yields, as a 1-D int32 tensor (half of int64), and
    epoch_order() the whole epoch's order that every rank takes its share of."""
    s = DistributedSampler(range(n), **args)
    s.set_epoch(epoch)
    indices = s.indices()
    assert indices.dtype == torch.int32 and indices.ndim == 1
    assert indices.tolist() == both(n, epoch, **args)[1]
    whole = DistributedSampler(range(n), 1, 0, args["shuffle"], args["seed"])
    whole.set_epoch(epoch)
    assert s.epoch_order().tolist() == list(whole)


@given(n=dataset_lengths, args=sampler_args())
def test_rank_positions_are_torchs_indices_over_an_unshuffled_dataset(n, args):
    """Invariant: rank_positions(n, W, r, drop_last) are the positions of the epoch's order that
    rank r reads: torch's unshuffled indices, so padding shows as the head again (p % n)."""
    W, r, drop_last = args["num_replicas"], args["rank"], args["drop_last"]
    torch_positions = torch_distributed.DistributedSampler(range(n), W, r, False, 0, drop_last)
    assert rank_positions(n, W, r, drop_last).tolist() == list(torch_positions)


@given(
    name=st.sampled_from(["num_replicas", "rank", "drop_last"]),
    value=st.one_of(argument_values, st.sampled_from([-1, 3, 2**64 - 1, 2**64, -(2**63) - 1])),
    n=st.integers(0, 12),
)
def test_rank_positions_checks_its_arguments_in_distributed_samplers_words(name, value, n):
    """Invariant: rank_positions, the split behind the sampler, takes what the sampler takes and
    gives its positions, and refuses what it refuses (``rank_positions(10, 2, 5)``, ``rank=-1``,
    ``num_replicas=0``, a rank left to a process group that does not exist) with the same error
    and message: never garbage, never a ZeroDivisionError."""
    kwargs = {"num_replicas": 3, "rank": 1, "drop_last": False}
    kwargs[name] = value
    sampler = outcome(lambda: DistributedSampler(range(n), **kwargs, shuffle=False), 0)
    try:
        positions = rank_positions(n, **kwargs).tolist()
    except (TypeError, ValueError) as err:
        assert type(err) is type(sampler) and str(err) == str(sampler)
    else:
        assert sampler == (positions, len(positions))


@given(
    name=st.sampled_from(["n", "num_replicas", "drop_last"]),
    value=st.one_of(argument_values, st.integers(-5, 12)),
)
def test_split_sizes_checks_its_arguments_naming_the_value(name, value):
    """Invariant: split_sizes takes the sampler's integers and booleans and returns its
    ``(num_samples, total_size)``; a negative length, fewer than one rank
    (``split_sizes(10, -2, False)``), a bool for a number or a non-bool for drop_last is refused
    naming the argument, never a ZeroDivisionError."""
    args = {"n": 10, "num_replicas": 3, "drop_last": False, name: value}
    kind = is_boolean if name == "drop_last" else is_integer
    if kind(value) and (name == "drop_last" or value >= {"n": 0, "num_replicas": 1}[name]):
        s = torch_distributed.DistributedSampler(  # torch's own: its sizes, computed apart
            range(args["n"]), args["num_replicas"], 0, drop_last=args["drop_last"]
        )
        assert split_sizes(**args) == (s.num_samples, s.total_size)
    else:
        error = ValueError if kind(value) else TypeError
        with pytest.raises(error, match=rf"^{name} should be .*, but got {name}="):
            split_sizes(**args)


@given(value=st.one_of(st.integers(max_value=-1), non_integers), bad_rank=st.booleans())
def test_rank_positions_names_a_bad_length_first(value, bad_rank):
    """Invariant: n, the first argument, is checked first: a negative or non-integer length is
    refused naming n, even when a later argument (the rank) is wrong too."""
    error = ValueError if isinstance(value, int) and not isinstance(value, bool) else TypeError
    with pytest.raises(error, match=r"^n should be .*, but got n="):
        rank_positions(value, 2, 5 if bad_rank else 0)


@pytest.mark.parametrize("seed", [GENERATOR_SEED_LOW - 1, GENERATOR_SEED_HIGH + 1])
@pytest.mark.parametrize("shuffle", [True, False])
def test_epoch_permutation_refuses_a_seed_outside_the_generator_range_even_unshuffled(
    seed, shuffle
):
    """Invariant: epoch_permutation takes the seeds the sampler takes: one torch.Generator can
    never take is refused naming the seed, with or without shuffle (as the sampler refuses it
    when built)."""
    with pytest.raises(
        ValueError, match=rf"^seed should be in the interval .*but got seed={seed}$"
    ):
        epoch_permutation(4, shuffle, seed, 0)


@given(seed=seeds_at_generator_bounds, epoch=st.integers(-2, 2))
def test_epoch_permutation_refuses_seed_plus_epoch_outside_the_generator_range(seed, epoch):
    """Invariant: with shuffle, seed + epoch must be a torch.Generator seed: out of range it is
    refused with both values named, in the sampler's words; without shuffle it is not used."""
    assert len(epoch_permutation(3, False, seed, epoch)) == 3
    if GENERATOR_SEED_LOW <= seed + epoch <= GENERATOR_SEED_HIGH:
        assert len(epoch_permutation(3, True, seed, epoch)) == 3
    else:
        with pytest.raises(ValueError) as error:
            epoch_permutation(3, True, seed, epoch)
        assert str(error.value) == (
            f"seed + epoch should be in [{GENERATOR_SEED_LOW}, {GENERATOR_SEED_HIGH}] "
            f"(torch.Generator's range), but got seed={seed}, epoch={epoch}"
        )


@pytest.mark.parametrize(
    ("n", "num_replicas"), [(1, 2**63), (2**63 - 1, 2), (2**63, 1), (2**64, 3), (2**63 - 1, 1)]
)
def test_rank_positions_refuses_exactly_the_padded_epochs_of_2_to_the_63_positions(n, num_replicas):
    """Invariant: positions are int64, so a padded epoch of 2**63 positions or more is refused
    naming num_replicas, n and total_size; one of 2**63 - 1 passes the check (only memory can
    refuse it: torch cannot allocate it, with an error of its own)."""
    total_size = split_sizes(n, num_replicas, drop_last=False)[1]
    if total_size > 2**63 - 1:
        with pytest.raises(ValueError) as error:
            rank_positions(n, num_replicas, 0)
        assert str(error.value) == (
            "num_replicas should leave a padded epoch below 2**63 positions, but got "
            f"num_replicas={num_replicas} for n={n}: total_size={total_size}"
        )
    else:
        with pytest.raises(RuntimeError):  # torch's allocation, after every check passed
            rank_positions(n, num_replicas, 0)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((-1, True, 0, 0), ValueError, "n should be >= 0, but got n=-1"),
        ((1.5, True, 0, 0), TypeError, "n should be an integer, but got n=1.5 of type float"),
        ((3, 1, 0, 0), TypeError, "shuffle should be a boolean value, but got shuffle=1"),
        ((3, True, 0, "1"), TypeError, "epoch should be an integer, but got epoch='1' of type str"),
    ],
)
def test_epoch_permutation_refuses_a_bad_argument_naming_it(args, error, message):
    """Invariant: epoch_permutation checks what the sampler checks, naming the argument and the
    value: a negative or non-integer length, a truthy non-bool shuffle, a non-integer epoch."""
    with pytest.raises(error) as caught:
        epoch_permutation(*args)
    assert str(caught.value) == message
