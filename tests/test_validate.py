"""Properties of distsampling._validate: the argument checks that every sampler copies along.

Each check is specified here on its own, not through a sampler: what it takes (and returns), what
it refuses, and the exact words of each refusal, since "the error names the argument and the
value" is the promise every sampler's bad-input tests rely on.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
import torch
import torch.distributed as dist
from hypothesis import given
from hypothesis import strategies as st

from distsampling._checks import (
    _index_dtype,
    check_bool,
    check_int,
    check_int64,
    check_len,
    resolve_world,
)
from distsampling.guards import FrameworkWarning
from strategies import (
    batch_sizes,
    dataset_lengths,
    epochs,
    flags,
    integer_bounds,
    labelled_datasets,
    sampler_args,
    seeds,
    tagged_bools,
    tagged_integers,
    windowed_args,
    world_sizes,
)

TESTS = str(__import__("pathlib").Path(__file__).resolve().parent)
NAMES = st.sampled_from(["num_replicas", "batch_size", "epoch", "x"])


@given(tagged=tagged_integers, name=NAMES)
def test_an_integer_in_any_form_is_taken_as_that_int_and_anything_else_is_named(tagged, name):
    """Invariant: ints of Python, numpy and one-element integer tensors come back as that exact
    Python int; bools of every kind, floats, strings, lists and larger tensors are refused with
    the argument's name, the value's repr and its type."""
    value, as_int = tagged
    if as_int is None:
        with pytest.raises(TypeError) as err:
            check_int(name, value)
        assert str(err.value) == (
            f"{name} should be an integer, but got {name}={value!r} of type {type(value).__name__}"
        )
        assert err.value.__cause__ is None and err.value.__suppress_context__
    else:
        got = check_int(name, value)
        assert type(got) is int and got == as_int


@given(data=st.data(), bounds=integer_bounds, name=NAMES)
def test_an_integer_outside_its_bounds_is_refused_naming_the_bounds_and_the_value(
    data, bounds, name
):
    """Invariant: with ``low`` and/or ``high``, exactly the integers in ``[low, high]`` pass
    (both bounds inclusive); outside, the message states the interval (or the one bound given)
    and the value. Values at and next to each bound are drawn, where an off-by-one shows."""
    low, high = bounds
    near = [b + d for b in (low, high) if b is not None for d in (-1, 0, 1)]
    value = data.draw(st.one_of(st.integers(-(2**65), 2**65), *map(st.just, near or [0])))
    if low is not None and high is not None and not low <= value <= high:
        message = f"{name} should be in the interval [{low}, {high}], but got {name}={value}"
    elif low is not None and value < low:
        message = f"{name} should be >= {low}, but got {name}={value}"
    elif high is not None and value > high:
        message = f"{name} should be <= {high}, but got {name}={value}"
    else:
        assert check_int(name, value, low=low, high=high) == value
        return
    with pytest.raises(ValueError) as err:
        check_int(name, value, low=low, high=high)
    assert str(err.value) == message


@given(tagged=tagged_bools, name=st.sampled_from(["shuffle", "drop_last"]))
def test_a_boolean_in_any_form_is_taken_and_a_truthy_value_is_not(tagged, name):
    """Invariant: Python's and numpy's bools and one-element bool tensors come back as a Python
    bool; 0, 1, strings, None, floats and other tensors are refused, naming the value."""
    value, as_bool = tagged
    if as_bool is None:
        with pytest.raises(TypeError) as err:
            check_bool(name, value)
        assert str(err.value) == f"{name} should be a boolean value, but got {name}={value!r}"
    else:
        got = check_bool(name, value)
        assert type(got) is bool and got is as_bool


class _Endless:
    """An iterable-style dataset: it can be iterated, it has no length."""

    def __iter__(self):
        return iter(range(3))


@given(n=st.integers(0, 10**6), name=st.sampled_from(["dataset", "sampler"]))
def test_a_sized_object_gives_its_length_and_an_unsized_one_is_refused(n, name):
    """Invariant: ``check_len`` is ``len`` for any sized object; an object without ``__len__``
    is refused naming the argument, the object and its type."""
    assert check_len(name, range(n)) == n
    assert check_len(name, [0] * min(n, 50)) == min(n, 50)
    for unsized in (_Endless(), iter(range(n)), (i for i in range(n))):
        with pytest.raises(TypeError) as err:
            check_len(name, unsized)
        assert str(err.value) == (
            f"{name} should have __len__ (a map-style dataset or a sized sampler), "
            f"but got {name}={unsized!r} of type {type(unsized).__name__}"
        )


@given(extra=st.integers(0, 2**80))
def test_a_length_past_what_len_can_count_is_refused_naming_the_limit(extra):
    """Invariant: ``range(sys.maxsize + 1 + k)`` has a length Python's ``len`` cannot return:
    refused as a ValueError naming ``sys.maxsize``; ``range(sys.maxsize)`` itself is fine."""
    assert check_len("dataset", range(sys.maxsize)) == sys.maxsize
    big = range(sys.maxsize + 1 + extra)
    with pytest.raises(ValueError) as err:
        check_len("dataset", big)
    assert (
        str(err.value) == f"dataset should have a length <= {sys.maxsize}, but got dataset={big!r}"
    )
    assert err.value.__cause__ is None and err.value.__suppress_context__


@given(data=st.data(), world=world_sizes)
def test_a_rank_in_the_world_is_taken_and_any_other_is_refused_in_torchs_words(data, world):
    """Invariant: exactly ``0 <= rank < num_replicas`` passes; any other rank is refused with
    torch's "Invalid rank ..." sentence first, then the argument and the world it was given."""
    rank = data.draw(st.one_of(st.integers(-3, world + 3), st.sampled_from([-1, world])))
    if 0 <= rank < world:
        assert resolve_world(world, rank) == (world, rank)
        assert resolve_world(world, np.int64(rank)) == (world, rank)
        return
    with pytest.raises(ValueError) as err:
        resolve_world(world, rank)
    assert str(err.value) == (
        f"Invalid rank {rank}, rank should be in the interval [0, {world - 1}], "
        f"but got rank={rank} for num_replicas={world}"
    )


def test_a_rank_that_is_not_an_integer_is_refused_as_one():
    """Invariant: the rank is an integer first (a bool or a float is a TypeError naming rank)."""
    for bad in (True, 0.0, "0"):
        with pytest.raises(TypeError, match=rf"^rank should be an integer, but got rank={bad!r}"):
            resolve_world(2, bad)


def _how(num_replicas: object, rank: object) -> str:
    return (
        "num_replicas and rank default to the world size and rank of the default process "
        f"group, but got num_replicas={num_replicas}, rank={rank} and no process group. Call "
        "torch.distributed.init_process_group(...) first (torchrun sets the environment "
        "for it), or pass num_replicas= and rank= explicitly."
    )


@given(data=st.data(), world=world_sizes)
def test_an_explicit_world_needs_no_process_group(data, world):
    """Invariant: with both given, ``resolve_world`` checks them (num_replicas >= 1, the rank in
    the world) and never asks torch.distributed."""
    assert not dist.is_initialized()
    rank = data.draw(st.integers(0, world - 1))
    assert resolve_world(world, rank) == (world, rank)
    assert resolve_world(np.int64(world), torch.tensor(rank)) == (world, rank)
    with pytest.raises(ValueError, match=r"^num_replicas should be >= 1, but got num_replicas=0$"):
        resolve_world(0, 0)
    with pytest.raises(ValueError, match=rf"^Invalid rank {world}, "):
        resolve_world(world, world)


@pytest.mark.parametrize(("num_replicas", "rank"), [(None, None), (2, None), (None, 1)])
def test_a_missing_world_without_a_process_group_is_torchs_error_then_how_to_fix_it(
    num_replicas, rank
):
    """Invariant: either argument left out without a process group is torch's ValueError
    ("Default process group has not been initialized ...") followed by what was passed and the
    two ways out."""
    assert not dist.is_initialized()
    with pytest.raises(ValueError) as err:
        resolve_world(num_replicas, rank)
    assert str(err.value) == (
        "Default process group has not been initialized, please make sure to call "
        f"init_process_group: {_how(num_replicas, rank)}"
    )


def test_a_missing_world_where_torch_has_no_distributed_package_says_so(monkeypatch):
    """Invariant: on a torch built without torch.distributed (some macOS and Windows wheels),
    the error is torch's RuntimeError words, then the same explanation. (This machine's torch
    has the package, so its absence is the one thing stood in for here.)"""
    monkeypatch.setattr(dist, "is_available", lambda: False)
    with pytest.raises(RuntimeError) as err:
        resolve_world(None, 0)
    assert str(err.value) == f"Requires distributed package to be available: {_how(None, 0)}"


def test_a_missing_world_is_filled_from_the_default_process_group():
    """Invariant: in a one-process gloo group, a missing num_replicas is its world size (1) and
    a missing rank its rank (0); what is given is kept and still checked against the world."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert resolve_world(None, None) == (1, 0)
        assert resolve_world(None, 0) == (1, 0)
        assert resolve_world(3, None) == (3, 0)
        assert resolve_world(4, 2) == (4, 2)
        with pytest.raises(ValueError, match=r"^Invalid rank 1, .* for num_replicas=1$"):
            resolve_world(None, 1)
    finally:
        dist.destroy_process_group()


@given(size=st.integers(0, 2**40) | st.sampled_from([2**31 - 1, 2**31, 2**31 + 1, 2**32]))
def test_indices_are_int32_exactly_while_every_index_fits(size):
    """Invariant: an order of ``size`` positions is held as int32 iff size < 2**31, else int64
    (the samplers' memory figures and their parity with torch both rest on this line)."""
    assert _index_dtype(size) == (torch.int32 if size < 2**31 else torch.int64)


def test_check_int64_takes_the_largest_int64_and_names_the_first_past_it():
    """Invariant: ``2**63 - 1`` is an int64 and comes back as it is; ``2**63`` is refused with
    the argument's name and value."""
    assert check_int64("count", 2**63 - 1) == 2**63 - 1
    with pytest.raises(ValueError) as caught:
        check_int64("count", 2**63)
    assert str(caught.value) == (
        "count should be < 2**63 (stored as int64), but got count=9223372036854775808"
    )


# --- the warnings where a framework's default would train on another plan -----------------------

ACCELERATE_WORDS = (
    "{name} already holds one rank's share (of num_replicas=2), and accelerate's {wrapper} "
    "would split it again over 2 processes: each process would train on about 1/2 of its share. "
    "Prepare the model and optimizer, not the loader (model, optimizer = "
    "accelerator.prepare(model, optimizer)), and iterate the loader as built"
)


def heard(run, *args) -> list[str]:
    """The messages of the FrameworkWarnings that ``run(*args)`` raised (in this process)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FrameworkWarning)
        run(*args)
    return [str(w.message) for w in caught if w.category is FrameworkWarning]


def _shares(world: int):
    """(name, accelerate's wrapper, loader) for a share of each kind, on ``world`` ranks."""
    from torch.utils.data import DataLoader

    import distsampling as ds

    share = ds.DistributedSampler(range(13), world, 0, seed=5)
    sharded = ds.ShardedIterableDataset([0, 1], [6, 7], lambda k, s=0: range(10 * k + s, 10 * k + 6 + k),
                                        num_replicas=world, rank=0, seed=6)  # fmt: skip
    return [
        ("DistributedSampler", "BatchSamplerShard", DataLoader(range(13), 2, sampler=share), share),
        ("DistributedSampler", "BatchSamplerShard",
         DataLoader(range(13), batch_sampler=ds.BatchSampler(share, 2, False)), share),
        ("TokenBudgetBatchSampler", "BatchSamplerShard", None, None),
        ("ShardedIterableDataset", "IterableDatasetShard", DataLoader(sharded, 2), sharded),
    ]  # fmt: skip


def _token_budget(world: int):
    from torch.utils.data import DataLoader

    import distsampling as ds

    s = ds.TokenBudgetBatchSampler([1 + i % 5 for i in range(13)], 8, num_replicas=world, rank=0)
    return DataLoader(range(13), batch_sampler=s), s


def _two_epochs(loader, obj) -> None:
    for epoch in range(2):
        obj.set_epoch(epoch)
        list(loader)


@pytest.mark.parametrize("case", range(4))
def test_a_share_refuses_accelerates_prepared_loader_before_its_first_batch(case):
    """Invariant: a rank's share consumed by ``accelerator.prepare(loader)``'s wrapper
    (accelerate's own ``prepare_data_loader``, 2 processes) raises before the loader yields a
    batch, in every epoch, in these exact words, naming the share's class, the wrapper and the
    fix; the same loader iterated as built (the route the error names) and the share of a single
    process (nothing to split again) read their epochs without a word."""
    pytest.importorskip("accelerate")
    from accelerate.data_loader import prepare_data_loader

    for world in (2, 1):
        name, wrapper, loader, obj = _shares(world)[case]
        if loader is None:
            loader, obj = _token_budget(world)
        prepared = prepare_data_loader(loader, num_processes=2, process_index=0)
        if world == 2:
            for epoch in range(2):
                obj.set_epoch(epoch)
                batches = iter(prepared)
                with pytest.raises(RuntimeError) as err:
                    next(batches)  # the first batch: none comes
                assert str(err.value) == ACCELERATE_WORDS.format(name=name, wrapper=wrapper)
        else:
            assert heard(_two_epochs, prepared, obj) == []
        assert heard(_two_epochs, loader, obj) == []  # as built: nothing to refuse


def test_a_samplers_set_epoch_sets_its_datasets_and_a_dataset_set_after_it_to_another_warns():
    """Invariant: a sampler (``DistributedSampler``, ``ResumableDistributedSampler``) over a
    dataset with epochs of its own (``SequentialWindowedDataset``, ``DatasetFromSampler``) sets
    the dataset's epoch in its ``set_epoch`` (a loop that sets the sampler's only, as
    Lightning's, reads the dataset's epoch), silently, each epoch; a dataset set to another
    epoch after it warns at every ``iter()``, in these exact words."""
    import distsampling as ds

    cases = [(cls, dataset) for cls in (ds.DistributedSampler, ds.ResumableDistributedSampler)
             for dataset in (ds.SequentialWindowedDataset(26, 3, seed=4),
                             ds.DatasetFromSampler(ds.WeightedBalanceClassSampler([0, 1] * 6, [1, 1], 12)))]  # fmt: skip
    for cls, dataset in cases:  # the plain sampler, and the resumable one (its own __iter__)
        sampler = cls(dataset, 2, 0, seed=5)
        name = type(dataset).__name__
        for epoch in range(3):  # the sampler's only, as a Trainer sets it: the dataset follows
            sampler.set_epoch(epoch)
            assert dataset.epoch == epoch
            assert heard(list, sampler) == []
        dataset.set_epoch(1)  # the dataset set back, after the sampler
        assert heard(list, sampler) == [
            f"{name} is at epoch 1 while its sampler, {cls.__name__}, is at epoch 2: this pass "
            f"reads the dataset's epoch 1. sampler.set_epoch(epoch) sets its dataset's epoch "
            "too: call it after dataset.set_epoch, or alone"
        ]
    wrapper = ds.DistributedSamplerWrapper(
        ds.WeightedBalanceClassSampler([0, 1] * 6, [1, 1], 12), 2, 0
    )
    wrapper.set_epoch(4)  # its own inner epoch (its dataset) moves with it: silent
    assert heard(lambda: list(wrapper)) == []


def test_a_samplers_set_epoch_leaves_a_dataset_without_an_epoch_of_its_own_alone():
    """Invariant: only a dataset with both ``set_epoch`` and an ``int`` ``epoch`` is set by
    the sampler's ``set_epoch``: one with ``set_epoch`` alone is never called."""
    import distsampling as ds

    class Augmented(list):
        called = 0

        def set_epoch(self, epoch: int) -> None:
            self.called += 1

    dataset = Augmented(range(13))
    ds.DistributedSampler(dataset, 2, 0).set_epoch(3)
    assert dataset.called == 0


def _pass_words(name: str, epoch: int) -> str:
    return (
        f"{name} began a pass with no set_epoch since the previous one began: it reads epoch "
        f"{epoch} again. Call dataset.set_epoch(epoch) at the start of every epoch; to read an "
        "epoch again on purpose, call set_epoch with it first"
    )


def _sharded_datasets():
    import distsampling as ds

    read = lambda k, s=0: range(10 * k + s, 10 * k + 6 + k)  # noqa: E731
    sharded = ds.ShardedIterableDataset([0, 1], [6, 7], read, num_replicas=1, rank=0, batch_size=2)
    mixture = ds.ShardedMixtureDataset([([0], [6], read), ([1], [7], read)], [1, 1], 2,
                                       num_replicas=1, rank=0, num_workers=2, seekable=True)  # fmt: skip
    return [sharded, mixture]


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize(("workers", "persistent"), [(0, False), (2, False), (2, True)])
def test_a_dataset_warns_once_at_a_pass_begun_with_no_set_epoch_since_the_last(
    which, workers, persistent, tmp_path
):
    """Invariant: ``ShardedIterableDataset`` and ``ShardedMixtureDataset`` warn once (from the main
    process, or DataLoader worker 0 alone, new every pass or persistent) at each pass begun with
    no ``set_epoch`` since the previous pass began, in these exact words; the first pass after
    construction, and every pass after a ``set_epoch`` (a new epoch, or the same epoch again on
    purpose), are silent."""
    from functools import partial

    from torch.utils.data import DataLoader

    from test_sharded import _log_warnings

    dataset = _sharded_datasets()[which]
    name = type(dataset).__name__
    said = tmp_path / "said.txt"
    said.touch()
    init = partial(_log_warnings, str(said)) if workers else None
    dl = DataLoader(dataset, batch_size=2, num_workers=workers, worker_init_fn=init,
                    persistent_workers=persistent)  # fmt: skip

    def heard_all(run) -> list[str]:  # this process's, then the workers' (worker 0's only)
        lines = [f"main: {m}" for m in heard(list, run)]
        lines += said.read_text().splitlines()
        said.write_text("")
        return lines

    where = "worker 0: FrameworkWarning" if workers else "main"
    assert heard_all(dl) == []  # the first pass: silent
    assert heard_all(dl) == [f"{where}: {_pass_words(name, 0)}"]  # no set_epoch
    assert heard_all(dl) == [f"{where}: {_pass_words(name, 0)}"]  # once a pass
    for epoch in (1, 1, 2):  # a new epoch, the same epoch again on purpose: silent
        dataset.set_epoch(epoch)
        assert heard_all(dl) == []


def test_batch_sampler_refuses_lightnings_rebuild_around_its_own_sampler_of_a_share():
    """Invariant: Lightning's rebuild of a loader's batch sampler (its default,
    ``use_distributed_sampler=True``; Lightning's own ``_update_dataloader`` here, the real
    Trainer in the loop matrix) raises for ``BatchSampler`` and ``ResumableBatchSampler`` over a
    rank's share, in these exact words, naming the setting; over a single process's sampler
    (which Lightning's split replaces rightly) it rebuilds as before."""
    pytest.importorskip("pytorch_lightning")
    from pytorch_lightning.trainer.connectors.data_connector import _get_distributed_sampler
    from pytorch_lightning.utilities.data import _update_dataloader
    from torch.utils.data import DataLoader, RandomSampler

    import distsampling as ds

    def rebuild(batches):
        loader = DataLoader(range(13), batch_sampler=batches)
        return _update_dataloader(
            loader, _get_distributed_sampler(loader, True, 0, num_replicas=2, rank=0)
        )

    for cls, inner in ((ds.BatchSampler, ds.DistributedSampler),
                       (ds.ResumableBatchSampler, ds.ResumableDistributedSampler)):  # fmt: skip
        with pytest.raises(RuntimeError) as err:
            rebuild(cls(inner(range(13), 2, 0), 2, False))
        assert str(err.value) == (
            f"{cls.__name__}: Lightning's Trainer rebuilds this batch sampler around a "
            f"DistributedSampler of its own over the whole dataset and drops its sampler, "
            f"{inner.__name__}, which already holds one rank's share (of num_replicas=2): each "
            "rank would train on another plan. That is Lightning's default "
            "(use_distributed_sampler=True): pass Trainer(use_distributed_sampler=False), and "
            "the loader reads the share as built"
        )
    rebuilt = rebuild(ds.BatchSampler(RandomSampler(range(13)), 2, False))
    lightnings = torch.utils.data.DistributedSampler(range(13), 2, 0, shuffle=True, seed=0)
    assert [i for b in rebuilt for i in b.tolist()] == list(lightnings)  # Lightning's split


def _entry_names() -> list[str]:
    from loops import ENTRIES

    return [e.name for e in ENTRIES if e.kind != "endless"]


@pytest.mark.parametrize("name", _entry_names())
def test_under_accelerates_prepared_loader_every_share_raises_before_a_batch_and_a_global_epoch_never(
    name,
):
    """Invariant: every sampler and dataset of the loop matrix, handed to accelerate's
    ``prepare_data_loader`` as a user's loader (2 processes, rank 0, without device placement:
    ``BatchSamplerShard`` or ``IterableDatasetShard``), raises before its first batch in every
    epoch where it holds one rank's share (a batch sampler or a wrapper over a share included:
    the outermost share's error), and reads both epochs without a word where its epoch is the
    same on every rank (accelerate's split is then right)."""
    pytest.importorskip("accelerate")
    from accelerate.data_loader import prepare_data_loader

    from loops import BY_NAME
    from loops_frameworks import user_loader

    entry = BY_NAME[name]
    subject = entry.build(2, 0)
    prepared = prepare_data_loader(user_loader(subject), num_processes=2, process_index=0)

    def two_passes() -> list[str]:
        errors = []
        for epoch in range(2):
            subject.set_epoch(epoch)
            batches = iter(prepared)
            try:
                next(batches)  # the first batch
            except RuntimeError as e:
                errors.append(str(e))
            else:
                list(batches)
        return errors

    errors: list[str] = []
    assert heard(lambda: errors.extend(two_passes())) == []
    # a reference row (the copy a reader takes, unguarded) reads silently: what the guard is for
    assert len(errors) == (
        0 if entry.kind == "global" or getattr(entry, "reference", None) else 2
    ), errors
    share = _OUTERMOST_SHARE.get(name, name)  # what refuses: the outermost object with a share
    words = f"{share} already holds one rank's share (of num_replicas=2), and accelerate's"
    assert all(e.startswith(words) for e in errors), errors


#: the entries of the loop matrix that hold a share inside (a batch sampler or a dataset over one)
_OUTERMOST_SHARE = {
    "BatchSampler": "DistributedSampler",
    "DatasetFromSampler": "DistributedSampler",
    "IterationBasedBatchSampler": "DistributedSampler",
    "MixtureBatchSampler": "MixtureSampler",
    "ResumableBatchSampler": "ResumableDistributedSampler",
    "SequentialWindowedDataset": "DistributedSampler",
    "SnapshotDataset": "ResumableDistributedSampler",
}


# --- the warnings' edges: what is not a share, not accelerate's, not a dataset with epochs ------


class _Sized:
    """A sampler of 13 indices with no world of its own (no ``num_replicas``)."""

    def __iter__(self):
        from distsampling.guards import refuse_split_again

        refuse_split_again(self)
        return iter(range(13))

    def __len__(self) -> int:
        return 13


def test_what_holds_no_share_or_is_not_accelerates_wrapper_is_never_refused():
    """Invariant: ``refuse_split_again`` refuses only a share (``num_replicas`` > 1) consumed by
    accelerate's own wrapper: a sampler without ``num_replicas`` under accelerate's
    ``BatchSamplerShard``, a share under a class of the user's that is also named
    ``BatchSamplerShard``, and a share iterated from code whose globals hold no ``__name__``
    read without a word or an error."""
    pytest.importorskip("accelerate")
    from accelerate.data_loader import prepare_data_loader
    from torch.utils.data import DataLoader

    import distsampling as ds

    plain = prepare_data_loader(DataLoader(range(13), 2, sampler=_Sized()), num_processes=2,
                                process_index=0)  # fmt: skip
    assert heard(list, plain) == []

    share = ds.DistributedSampler(range(13), 2, 0, seed=5)

    class BatchSamplerShard:  # the user's own, in this test's module (not accelerate.*)
        def __init__(self, sampler) -> None:
            self.sampler, self.num_processes = sampler, 2

        def __iter__(self):
            return iter(list(self.sampler))

    assert heard(list, BatchSamplerShard(share)) == []
    assert heard(exec, "out = list(share)", {"share": share}) == []  # globals without __name__


def test_the_split_again_error_names_the_public_class_of_a_private_subclass():
    """Invariant: a share of a private subclass is named by its first public class, the one
    a user finds in the docs."""
    pytest.importorskip("accelerate")
    from accelerate.data_loader import prepare_data_loader
    from torch.utils.data import DataLoader

    import distsampling as ds

    class _Mine(ds.DistributedSampler):
        pass

    share = _Mine(range(13), 2, 0, seed=5)
    prepared = prepare_data_loader(DataLoader(range(13), 2, sampler=share), num_processes=2,
                                   process_index=0)  # fmt: skip
    with pytest.raises(RuntimeError) as err:
        list(prepared)
    assert str(err.value).startswith("DistributedSampler already holds one rank's share")


def test_a_dataset_without_epochs_or_without_its_epoch_is_never_warned_about():
    """Invariant: ``begin_dataset_pass`` speaks only of a dataset with ``set_epoch`` and an
    ``epoch``: a dataset with an ``epoch`` attribute but no ``set_epoch``, and one with
    ``set_epoch`` but no ``epoch``, are silent, and iterating raises nothing."""
    import distsampling as ds

    class EpochOnly(list):
        epoch = 7

    class SetEpochOnly(list):
        def set_epoch(self, epoch: int) -> None:
            pass

    for dataset in (EpochOnly(range(13)), SetEpochOnly(range(13))):
        sampler = ds.DistributedSampler(dataset, 2, 0, seed=5)
        sampler.set_epoch(3)
        assert heard(list, sampler) == []


def test_a_wrappers_own_view_of_its_inner_sampler_is_never_a_stale_dataset():
    """Invariant: ``DistributedSamplerWrapper`` reads its inner sampler through a
    ``DatasetFromSampler`` of its own, whose epoch is the inner epoch, not the wrapper's: at any
    wrapper epoch, with the inner sampler's epoch anywhere, it never warns."""
    import distsampling as ds

    inner = ds.WeightedBalanceClassSampler([0, 1] * 6, [1, 1], 12)
    wrapper = ds.DistributedSamplerWrapper(inner, 2, 0)
    for epoch in (0, 3, 1):
        wrapper.set_epoch(epoch)
        assert heard(list, wrapper) == []
        inner.set_epoch(epoch + 5)
        assert heard(list, wrapper) == []


def _fit(model, *loaders, max_epochs: int, ckpt_path: str | None = None, **settings) -> None:
    """A real one-process ``Trainer.fit`` with Lightning's defaults (and ``settings``): its
    banner and advice kept quiet, this package's warnings raised as the fit's errors."""
    import logging

    pl = pytest.importorskip("pytorch_lightning")
    log = logging.getLogger("pytorch_lightning")
    level = log.level
    log.setLevel(logging.ERROR)  # its banner, for this fit only
    trainer = pl.Trainer(max_epochs=max_epochs, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0, **settings)  # fmt: skip
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Lightning's advice on workers and logging
            warnings.simplefilter("error", FrameworkWarning)  # ours: seen as the fit's error
            trainer.fit(model, *loaders, ckpt_path=ckpt_path)
    finally:
        log.setLevel(level)


def _lightning_fit(dataset, workers: int, max_epochs: int, persistent: bool = False, val=None,
                   context: str | None = None, **settings):  # fmt: skip
    """``_fit`` over ``dataset`` (nothing sets its epoch; the loop matrix's recording module),
    and ``val`` as its validation loader's dataset: each epoch's samples, and the error, if
    one."""
    from torch.utils.data import DataLoader

    from loops_frameworks import _recorder

    model, error = _recorder(dataset, epoch_hook=False), None
    if val is not None:  # a validation step that reads its batch: Lightning then validates
        model.validation_step = lambda batch, batch_idx: None
    loader = DataLoader(dataset, batch_size=2, num_workers=workers, persistent_workers=persistent,
                        multiprocessing_context=context)  # fmt: skip
    try:
        _fit(model, loader, None if val is None else DataLoader(val, batch_size=2),
             max_epochs=max_epochs, **settings)  # fmt: skip
    except RuntimeError as e:
        error = str(e).strip().splitlines()[-1].removeprefix("RuntimeError: ")
    return {e: [x for batch in b for x in batch] for e, b in model.epochs.items()}, error


def _plan(dataset, epoch: int, workers: int = 0) -> list[int]:
    """What a loop that sets ``epoch`` first reads, through a loader of ``workers``."""
    from torch.utils.data import DataLoader

    dataset.set_epoch(epoch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader = DataLoader(dataset, batch_size=2, num_workers=workers)
        return [x for batch in loader for x in batch.tolist()]


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("workers", [0, 2])
def test_under_a_lightning_fit_with_its_defaults_an_iterable_dataset_trains_every_epochs_plan(
    which, workers
):
    """Invariant: under a real ``Trainer`` with its defaults (no ``set_epoch`` anywhere), an
    iterable dataset reads the ``Trainer``'s ``current_epoch``: each epoch trains on exactly that
    epoch's plan, in the main process and in DataLoader workers started for each epoch."""
    plans = [_plan(_sharded_datasets()[which], e, workers) for e in range(3)]
    assert plans[0] != plans[1] != plans[2]  # the epochs differ: reading one again is seen
    dataset = _sharded_datasets()[which]
    assert _lightning_fit(dataset, workers, max_epochs=3) == (dict(enumerate(plans)), None)
    assert dataset.epoch == 3  # the Trainer's current_epoch once its fit is done


#: the error a persistent worker raises when a fit of 2 epochs would read epoch 0 again
PERSISTENT_AGAIN = (
    "began a pass with no set_epoch since the previous one began, under Lightning's Trainer "
    "(max_epochs=2): it would train on epoch 0 again. The dataset follows the Trainer's "
    "current_epoch in DataLoader workers started for each epoch, and in persistent ones through "
    "the sampler of the DataLoader that Lightning counted; these persist without it (they keep "
    "the Trainer as it was when they started): call dataset.set_epoch(self.current_epoch) in the "
    "LightningModule's on_train_epoch_start, or leave persistent_workers off"
)


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("hook", [False, True])
def test_under_a_lightning_fit_persistent_workers_train_every_epochs_plan(which, hook):
    """Invariant: persistent DataLoader workers keep the ``Trainer`` as it was when they started;
    Lightning sets each epoch on the sampler of the loader it counted (given a ``set_epoch``
    that the workers share): with no ``set_epoch`` anywhere, or with the user's in
    ``on_train_epoch_start``, each epoch trains on exactly its plan; a second fit of
    ``ShardedIterableDataset``, by a new ``Trainer``, starts again at its epoch 0. A loader whose
    workers do not persist keeps its sampler as torch built it."""
    from torch.utils.data import DataLoader

    from loops_frameworks import _recorder

    plans = [_plan(_sharded_datasets()[which], e, 2) for e in range(3)]
    assert plans[0] != plans[1] != plans[2]  # the epochs differ: reading one again is seen
    dataset = _sharded_datasets()[which]
    # two fits of persistent workers, then one without (a mixture's pass goes on across epochs
    # within a fit, not across fits: one fit of it)
    for persistent in (True, True, False) if which == 0 else (True,):
        model = _recorder(dataset, epoch_hook=hook)
        loader = DataLoader(dataset, batch_size=2, num_workers=2, persistent_workers=persistent)
        _fit(model, loader, max_epochs=3)
        epochs = {e: [x for batch in b for x in batch] for e, b in model.epochs.items()}
        assert epochs == dict(enumerate(plans)), persistent
        assert hasattr(loader.sampler, "set_epoch") == persistent


def _slow_to_begin(dataset, seconds: float = 0.5):
    """``dataset`` as one whose DataLoader workers are slow to begin each pass (a loaded
    machine): its class's ``__iter__`` waits ``seconds`` first in a worker, so the main
    process goes on past ``iter(loader)`` (Lightning then counts the loader's batches again)."""
    import time

    from torch.utils.data import get_worker_info

    class Slow(type(dataset)):
        def __iter__(self):
            if get_worker_info() is not None:
                time.sleep(seconds)
            return super().__iter__()

    dataset.__class__ = Slow
    return dataset


@pytest.mark.parametrize("which", [0, 1])
def test_a_persistent_worker_slow_to_begin_its_pass_trains_on_the_epoch_lightning_set(which):
    """Invariant: under a Lightning fit with persistent workers and no ``set_epoch`` anywhere,
    each epoch trains on exactly its plan even where a worker begins its pass only after the
    ``Trainer`` has counted the loader's batches again (it does so after each epoch's
    ``iter(loader)``): that count, by the fit that set the epoch, keeps the epoch it set."""
    from torch.utils.data import DataLoader

    from loops_frameworks import _recorder

    plans = [_plan(_sharded_datasets()[which], e, 2) for e in range(3)]
    dataset = _slow_to_begin(_sharded_datasets()[which])
    model = _recorder(dataset, epoch_hook=False)
    loader = DataLoader(dataset, batch_size=2, num_workers=2, persistent_workers=True)
    _fit(model, loader, max_epochs=3)
    epochs = {e: [x for batch in b for x in batch] for e, b in model.epochs.items()}
    assert epochs == dict(enumerate(plans))


@pytest.mark.parametrize(("which", "workers"), [(0, 0), (1, 2)])
def test_a_loader_the_trainer_cycles_within_an_epoch_reads_that_epoch_again_without_a_word(
    which, workers
):
    """Invariant: where the ``Trainer`` itself reads a loader again within an epoch (the shorter
    loader of a ``max_size_cycle`` pair), the dataset follows it: every pass of an epoch reads
    that epoch's plan, with no error and no warning (main process, workers started each pass)."""
    pl = pytest.importorskip("pytorch_lightning")
    from torch.utils.data import DataLoader

    plans = [_plan(_sharded_datasets()[which], e, workers) for e in range(2)]
    dataset, read = _sharded_datasets()[which], {}

    class Pair(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(()))

        def training_step(self, batch, batch_idx):
            read.setdefault(self.current_epoch, []).extend(batch["x"].tolist())
            return (self.w * batch["other"]).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    loaders = {"other": DataLoader(torch.arange(3 * len(plans[0])), batch_size=2),
               "x": DataLoader(dataset, batch_size=2, num_workers=workers)}  # fmt: skip
    _fit(Pair(), pl.utilities.CombinedLoader(loaders, mode="max_size_cycle"), max_epochs=2)
    for e, plan in enumerate(plans):
        assert len(read[e]) > 2 * len(plan)  # the loader was read three times in the epoch
        for start in range(0, len(read[e]), len(plan)):
            assert read[e][start : start + len(plan)] == plan[: len(read[e]) - start]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_lightning_fit_resumed_in_a_shorter_epoch_trains_every_later_epoch_whole(
    workers, tmp_path
):
    """Invariant: Lightning counts ``len(loader)`` once per fit and cuts every epoch there; a
    mixture's epochs differ by a step, and a fit resumed (its own checkpoint, torchdata's
    ``StatefulDataLoader``) inside a shorter one counts the most an epoch holds, so every epoch
    of both runs together trains on exactly its plan, the longer one after the resume too."""
    pytest.importorskip("pytorch_lightning")
    from torchdata.stateful_dataloader import StatefulDataLoader

    from loops_frameworks import _recorder

    plans = [_plan(_sharded_datasets()[1], e, workers) for e in range(3)]
    assert len(plans[1]) < len(plans[2])  # resumed in epoch 1, the fit must not cut epoch 2
    path, runs = str(tmp_path / "fit.ckpt"), []
    for ckpt in (None, path):
        dataset = _sharded_datasets()[1]
        stop = None if ckpt else len(plans[0]) // 2 + 2  # epoch 1's second step
        model = _recorder(dataset, epoch_hook=False, stop_after=stop, path=path)
        loader = StatefulDataLoader(dataset, batch_size=2, num_workers=workers)
        _fit(model, loader, max_epochs=3, ckpt_path=ckpt)
        runs.append({e: [x for batch in b for x in batch] for e, b in model.epochs.items()})
    assert runs[0][1] and runs[1][1]  # epoch 1 was trained before and after the resume
    assert {e: runs[0].get(e, []) + runs[1].get(e, []) for e in range(3)} == dict(enumerate(plans))


def test_a_mixture_that_ends_epochs_when_a_source_runs_out_is_counted_each_epoch_or_refused():
    """Invariant: with ``until_exhausted`` the epochs differ in length (here 8 and 10 samples);
    under a ``Trainer`` that counts ``len(loader)`` once, ``len()`` refuses before the first step,
    naming ``reload_dataloaders_every_n_epochs=1``; with it, every epoch trains its plan."""
    import distsampling as ds

    def dataset():
        read = lambda k, s=0: range(10 * k + s, 10 * k + 6 + k)  # noqa: E731
        return ds.ShardedMixtureDataset([([0], [6], read), ([1], [7], read)], [2, 1], 2,
                                        num_replicas=1, rank=0, until_exhausted=0, seekable=True)  # fmt: skip

    plans = [_plan(dataset(), e) for e in range(3)]
    assert [len(p) for p in plans] == [8, 10, 8]
    epochs, error = _lightning_fit(dataset(), 0, max_epochs=3)
    assert epochs == {} and error == (
        "ShardedMixtureDataset(until_exhausted=0) ends each epoch when that source runs out, so "
        "its epochs differ in length (this one has 8 samples), but Lightning's Trainer counts "
        "len(loader) once and ends every epoch there: pass "
        "Trainer(reload_dataloaders_every_n_epochs=1), which counts each epoch's"
    )
    epochs, error = _lightning_fit(dataset(), 0, max_epochs=3, reload_dataloaders_every_n_epochs=1)
    assert error is None and epochs == dict(enumerate(plans))


def _read_shard(k: int, s: int = 0) -> range:
    return range(10 * k + s, 10 * k + 6 + k)  # a module's function: a spawned worker imports it


def test_under_a_lightning_fit_spawned_workers_read_the_epoch_they_were_sent():
    """Invariant: a spawned DataLoader worker (macOS's default; forkserver, Python 3.14's on
    Linux, pickles too) cannot reach the ``Trainer``: it is sent the ``Trainer``'s epoch with
    the dataset at ``iter(loader)``, so each epoch still trains on its plan."""
    import distsampling as ds

    def dataset():
        return ds.ShardedIterableDataset([0, 1], [6, 7], _read_shard, num_replicas=1, rank=0,
                                         batch_size=2)  # fmt: skip

    plans = [_plan(dataset(), e, 1) for e in range(2)]
    epochs, error = _lightning_fit(dataset(), 1, max_epochs=2, context="spawn")
    assert error is None and epochs == dict(enumerate(plans)) and plans[0] != plans[1]


def test_a_trainers_epoch_is_followed_live_and_pickled_as_its_value_then():
    """Invariant: ``TrainerEpoch`` reads a live ``Trainer``'s ``current_epoch`` and whether it
    trains at every call; a pickled copy (what a spawned worker gets) keeps the values of the
    moment it was pickled; once the ``Trainer`` is gone, its last epoch stays and its fit is
    over; with no ``Trainer``, epoch 0 and no fit."""
    import gc
    import pickle

    from distsampling.resume.state import TrainerEpoch

    class Trainer:
        current_epoch, training = 2, True

    trainer = Trainer()
    live = TrainerEpoch(trainer)
    assert (live(), live.training()) == (2, True)
    sent = pickle.loads(pickle.dumps(live))
    trainer.current_epoch, trainer.training = 5, False
    assert (live(), live.training()) == (5, False)
    trainer.training = True
    assert (live(), live.training()) == (5, True)
    assert (sent(), sent.training()) == (2, True)
    del trainer
    gc.collect()
    assert (live(), live.training()) == (5, False)
    assert (TrainerEpoch()(), TrainerEpoch().training()) == (0, False)


def test_a_lightning_fit_of_one_epoch_trains_its_plan_and_later_plain_loops_only_warn():
    """Invariant: a ``Trainer`` of ``max_epochs=1`` trains on epoch 0's plan and leaves the
    dataset at its ``current_epoch`` (1) unmarked: a plain pass then reads epoch 1, and a second
    one with no ``set_epoch`` warns, never raises."""
    dataset = _sharded_datasets()[0]
    plan = _plan(_sharded_datasets()[0], 0)
    epochs, error = _lightning_fit(dataset, 0, max_epochs=1)
    assert error is None and epochs == {0: plan} and int(dataset._passes[1]) == 0
    assert dataset.epoch == 1
    assert heard(list, dataset) == []  # epoch 1, read for the first time
    assert heard(list, dataset) == [_pass_words(type(dataset).__name__, 1)]


def test_a_validation_loader_under_a_fit_reads_its_own_epoch_every_time_without_a_word():
    """Invariant: Lightning's validation loop counts its loader's batches too, but never marks
    its dataset: each validation pass of a fit of three epochs (Lightning validates after each
    but the last here) reads the dataset's own epoch (0) again, as meant, with no error and no
    warning, while the training dataset follows the ``Trainer``."""
    val, train = _sharded_datasets()
    plan, seen = _plan(_sharded_datasets()[0], 0), []
    epochs, error = _lightning_fit(train, 0, max_epochs=3, val=_Seen(val, seen))
    assert error is None and sorted(epochs) == [0, 1, 2] and len(seen) >= 2
    assert seen == [plan] * len(seen) and val.epoch == 0
    assert val._passes.tolist() == [0, 0, 0, 1, -1]


class _Seen(torch.utils.data.IterableDataset):
    """An iterable dataset that records each pass it hands out (to see what a loop read)."""

    def __init__(self, dataset, seen: list) -> None:
        self.dataset, self.seen = dataset, seen

    def __len__(self) -> int:
        return len(self.dataset)

    def __iter__(self):
        self.seen.append(list(self.dataset))
        return iter(self.seen[-1])


def test_a_plain_len_never_marks_a_dataset_for_lightnings_error():
    """Invariant: ``len()`` outside a Lightning loop (here with Lightning imported) leaves the
    marks alone: a pass with no ``set_epoch`` then warns, never raises."""
    pytest.importorskip("pytorch_lightning")
    dataset = _sharded_datasets()[1]
    assert len(dataset) > 0
    list(dataset)
    exec("len(dataset)", {"dataset": dataset})  # a caller whose globals have no __name__
    assert dataset._passes.tolist() == [0, 0, 0, 0, -1]
    assert heard(list, dataset) == [_pass_words(type(dataset).__name__, 0)]


def _fit_loop(monkeypatch, **trainer):
    """A stand-in for the unified ``lightning`` package's fit loop (that package is not
    installed here): a class in a module named as its fit loop, whose ``trainer`` has
    ``trainer``'s attributes, and whose ``setup_data`` counts a loader's batches."""
    import types

    monkeypatch.delitem(sys.modules, "pytorch_lightning", raising=False)
    monkeypatch.setitem(sys.modules, "lightning", types.ModuleType("lightning"))
    module = {"__name__": "lightning.pytorch.loops.fit_loop"}
    exec(  # its module's name, its self and a Trainer
        "class Trainer:\n"
        "    pass\n"
        "class _FitLoop:\n"
        "    def setup_data(self, loader):\n"
        "        return len(loader)\n",
        module,
    )
    loop = module["_FitLoop"]()
    loop.trainer = module["Trainer"]()
    loop.trainer.__dict__.update(trainer)
    return loop


def test_the_unified_lightning_packages_fit_loop_ties_a_dataset_as_pytorch_lightnings_does(
    monkeypatch,
):
    """Invariant: with only the unified ``lightning`` package imported, a ``len()`` called from
    its fit loop (``lightning.pytorch.loops.fit_loop``) ties the dataset to the loop's
    ``Trainer``, as under ``pytorch_lightning``: its epoch is the ``Trainer``'s
    ``current_epoch``; while it trains, a pass of that epoch again is the ``Trainer``'s own
    (silent); once it no longer trains, one warns."""
    loop = _fit_loop(monkeypatch, max_epochs=3, current_epoch=2, training=True)
    dataset = _sharded_datasets()[0]
    loop.setup_data(torch.utils.data.DataLoader(dataset, batch_size=2))
    assert dataset._passes.tolist() == [1, 3, -1, 0, -1] and dataset.epoch == 2
    plans = {e: _plan(_sharded_datasets()[0], e) for e in (2, 3)}
    assert heard(list, dataset) == [] and list(dataset) == plans[2]
    loop.trainer.current_epoch = 3  # the Trainer's next epoch: read at once, with no set_epoch
    assert list(dataset) == plans[3]
    loop.trainer.training = False  # its fit is over: reading epoch 3 again is the loop's
    assert heard(list, dataset) == [_pass_words("ShardedIterableDataset", 3)]


def test_a_fit_loop_gives_a_persistent_loaders_sampler_a_shared_epoch_never_over_its_own(
    monkeypatch,
):
    """Invariant: counted by a fit loop, a loader of persistent workers whose sampler has a
    ``set_epoch`` of its own keeps it; one with none gets a ``SharedEpoch``, which shares the
    epoch Lightning sets with the workers; counted again by the same ``Trainer`` (its data
    fetcher counts after each epoch's ``iter(loader)``), it keeps the epoch that fit set; counted
    by another ``Trainer`` (a new fit), no epoch is set for that fit yet."""
    from torch.utils.data import DataLoader

    from distsampling.resume.state import SharedEpoch

    loop = _fit_loop(monkeypatch, max_epochs=3, current_epoch=0, training=True)
    dataset = _sharded_datasets()[0]
    loader = DataLoader(dataset, batch_size=2, num_workers=2, persistent_workers=True)
    loader.sampler.set_epoch = own = lambda epoch: None  # a sampler's own
    loop.setup_data(loader)
    assert loader.sampler.set_epoch is own
    del loader.sampler.set_epoch
    loop.setup_data(loader)
    shared = loader.sampler.set_epoch
    assert isinstance(shared, SharedEpoch)
    shared(2)
    assert int(dataset._passes[4]) == 2
    loop.setup_data(loader)
    assert isinstance(loader.sampler.set_epoch, SharedEpoch) and int(dataset._passes[4]) == 2
    loop.trainer = type(loop.trainer)()  # a new fit's Trainer
    loop.trainer.__dict__.update(max_epochs=3, current_epoch=0, training=True)
    loop.setup_data(loader)
    assert isinstance(loader.sampler.set_epoch, SharedEpoch) and int(dataset._passes[4]) == -1


@pytest.mark.parametrize(("world", "world2", "now", "most"), [(2, 1, 9, 13), (4, 2, 5, 7)])
def test_under_a_fit_that_counts_once_len_is_the_most_an_epoch_holds(
    monkeypatch, world, world2, now, most
):
    """Invariant: a ``Trainer`` counts ``len(loader)`` once and ends every epoch there; after
    ``world`` ranks read 8 of 13 samples, a rank of ``world2`` reads ``now`` in this epoch and
    ``most`` (ceil(13 / world2)) in the next: counted by the fit loop, ``len()`` is ``most``
    (the shorter epoch ends early, the next is whole); a ``Trainer`` that counts each epoch
    (``reload_dataloaders_every_n_epochs=1``), and any other caller, gets this epoch's."""
    import distsampling as ds

    read = lambda k, s=0: range(10 * k + s, 10 * k + 6 + k)  # noqa: E731

    def resumed() -> ds.ShardedIterableDataset:
        before = ds.ShardedIterableDataset([0, 1], [6, 7], read, num_replicas=world, rank=0)
        it = before.iter_worker()
        [next(it) for _ in range(8 // world)]
        again = ds.ShardedIterableDataset([0, 1], [6, 7], read, num_replicas=world2, rank=0)
        again.load_state_dict([before.state_dict()])
        return again

    assert len(resumed()) == now
    loop = _fit_loop(monkeypatch)
    loop.trainer = None  # a loop with no Trainer to read: nothing is counted for a fit
    assert loop.setup_data(resumed()) == now
    loop = _fit_loop(monkeypatch, max_epochs=3, current_epoch=0, training=True)
    assert loop.setup_data(resumed()) == most
    loop.trainer.reload_dataloaders_every_n_epochs = 1
    assert loop.setup_data(resumed()) == now


def test_under_a_fit_that_counts_once_a_mixtures_len_is_its_longest_epochs(monkeypatch):
    """Invariant: a mixture of 13 samples an epoch on 2 ranks of micro-batch 2 (global batch 4)
    has epochs of 4 steps (8 samples a rank: epochs 0, 4) and of 3 (6: epochs 1, 2, 3, 5);
    counted by a fit loop that counts once, ``len()`` at an epoch of 6 is 8, an int."""
    import distsampling as ds

    read = lambda k, s=0: range(10 * k + s, 10 * k + 6 + k)  # noqa: E731
    mixture = ds.ShardedMixtureDataset([([0], [6], read), ([1], [7], read)], [1, 1], 2,
                                       num_replicas=2, rank=0, seekable=True)  # fmt: skip
    mixture.set_epoch(1)
    assert len(mixture) == 6
    loop = _fit_loop(monkeypatch, max_epochs=3, current_epoch=1, training=True)
    counted = loop.setup_data(mixture)
    assert counted == 8 and type(counted) is int


@pytest.mark.parametrize("which", [0, 1])
def test_a_persistent_workers_second_pass_of_an_epoch_under_a_fit_raises_at_its_first_next(
    monkeypatch, which
):
    """Invariant: in one worker process (a persistent worker: here this process, as worker 0),
    a dataset a fit of two epochs counted reads its first pass, then a second of the same
    epoch with no ``set_epoch``: its ``iter()`` returns, and its first ``next()`` raises."""
    import types

    import distsampling.resume.state
    import distsampling.streaming.sharded
    import distsampling.streaming.sharded_mixture

    dataset = _sharded_datasets()[which]
    loop = _fit_loop(monkeypatch, max_epochs=2, current_epoch=0, training=True)
    loop.setup_data(dataset)  # the loop keeps its Trainer alive; the dataset, a weak reference
    n = [1, 2][which]  # the mixture was told its loader's num_workers: 2
    worker = types.SimpleNamespace(id=0, num_workers=n)
    for module in (
        distsampling.resume.state,
        distsampling.streaming.sharded,
        distsampling.streaming.sharded_mixture,
    ):
        monkeypatch.setattr(module, "get_worker_info", lambda: worker)
    assert list(dataset) == list(_sharded_datasets()[which].iter_worker(0, n))
    again = iter(dataset)
    with pytest.raises(RuntimeError, match=r"under Lightning's Trainer \(max_epochs=2\)"):
        next(again)


def test_a_pass_a_persistent_worker_begins_again_under_a_fit_raises_at_its_first_next(
    monkeypatch,
):
    """Invariant: under a fit of several epochs, a pass that reads the previous pass's epoch with
    no ``set_epoch`` since, in a process that sees the ``Trainer`` as it was (a persistent
    worker), raises these exact words at its first ``next()``, never at ``iter()`` (a persistent
    worker's ``iter()`` that raised would end the worker without a word); the same pass seen
    fresh (the main process, a worker's first pass) is the ``Trainer``'s own: silent."""
    import types

    import distsampling.resume.state as v

    dataset = _sharded_datasets()[0]
    monkeypatch.setattr(v, "get_worker_info", lambda: types.SimpleNamespace(id=0))
    marks = v.pass_marks()
    marks[0], marks[1], marks[2] = 0, 2, 0  # a fit of 2 epochs read epoch 0; no set_epoch since
    head = v.begin_pass(dataset, marks, True, False)
    with pytest.raises(RuntimeError) as info:
        next(head)
    assert str(info.value) == f"ShardedIterableDataset {PERSISTENT_AGAIN}"
    marks[0] = 0
    assert heard(lambda: list(v.begin_pass(dataset, marks, True, True))) == []


def test_a_lightning_fit_over_leaves_later_plain_loops_a_warning_never_an_error():
    """Invariant: after a fit of two epochs (its training epoch loop counted the batches too),
    the dataset is at the ``Trainer``'s ``current_epoch`` (2); a plain loop reads it, and reading
    it again with no ``set_epoch`` warns (the fit is over), never raises nor stays silent."""
    dataset = _sharded_datasets()[0]
    epochs, error = _lightning_fit(dataset, 0, max_epochs=2)
    assert error is None and sorted(epochs) == [0, 1] and dataset.epoch == 2
    assert heard(list, dataset) == []
    assert heard(list, dataset) == [_pass_words("ShardedIterableDataset", 2)]


def test_only_worker_0_warns_of_a_pass_begun_without_set_epoch(monkeypatch):
    """Invariant: ``begin_pass`` in a DataLoader worker other than 0 never warns (every worker
    begins the same pass: one warning a pass), and clears the mark all the same."""
    import types

    import distsampling.resume.state as v

    marks = v.pass_marks()
    marks[0], marks[2] = 0, 3  # a pass of epoch 3 began, and no set_epoch since
    dataset = types.SimpleNamespace(epoch=3)
    monkeypatch.setattr(v, "get_worker_info", lambda: types.SimpleNamespace(id=1))
    assert heard(v.begin_pass, dataset, marks, False, False) == []
    monkeypatch.setattr(v, "get_worker_info", lambda: types.SimpleNamespace(id=0))
    assert len(heard(v.begin_pass, dataset, marks, False, False)) == 1
    assert int(marks[0]) == 0


def test_a_wrapper_that_keeps_its_process_count_in_its_state_is_read_from_there():
    """Invariant: accelerate's ``DataLoaderDispatcher`` keeps the process count in its
    ``state`` (no ``num_processes`` of its own): the error reads it there and names the
    dispatcher's split (the real one needs a process group: the loop matrix's accelerate
    column runs it on 2 processes; here a class of that name in a module named as
    accelerate's stands in for it, to reach this branch alone)."""
    pytest.importorskip("accelerate")
    import types

    import distsampling as ds

    share = ds.DistributedSampler(range(13), 2, 0, seed=5)
    module = {"__name__": "accelerate.data_loader"}
    exec(
        "class DataLoaderDispatcher:\n"
        "    def __init__(self, sampler, state):\n"
        "        self.sampler, self.state = sampler, state\n"
        "    def __iter__(self):\n"
        "        return iter(list(self.sampler))\n",
        module,
    )
    dispatcher = module["DataLoaderDispatcher"](share, types.SimpleNamespace(num_processes=2))
    with pytest.raises(RuntimeError) as err:
        list(dispatcher)
    assert str(err.value).startswith(
        "DistributedSampler already holds one rank's share (of num_replicas=2), and "
        "accelerate's DataLoaderDispatcher would read it on process 0 only and split its batches "
        "over 2 processes"
    )


# --- a pass of our DistributedSampler: its indices carry its dataset's epoch -----------------------


def _epoch_datasets(kind: str):
    """A dataset with an epoch of its own, fresh, and its items at epoch ``e`` (``items(e)``):
    windows of 4 of 30 samples, or the draws of a class-weighted sampler seen as a dataset."""
    from distsampling import (
        DatasetFromSampler,
        SequentialWindowedDataset,
        WeightedBalanceClassSampler,
    )

    def make():
        if kind == "windows":
            return SequentialWindowedDataset(30, 4, seed=7)
        return DatasetFromSampler(
            WeightedBalanceClassSampler([0, 1, 1, 2, 2, 2], [1, 2, 1], length=8, seed=3)
        )

    def items(epoch: int) -> list[int]:
        dataset = make()
        dataset.set_epoch(epoch)
        return [dataset[i] for i in range(len(dataset))]

    return make, items


@given(
    kind=st.sampled_from(["windows", "draws"]), world=world_sizes, seed=seeds,
    epochs=st.tuples(epochs, epochs), data=st.data(),
)  # fmt: skip
def test_a_set_epoch_while_a_pass_of_our_sampler_is_read_is_the_next_passs_and_holds_nothing(
    kind, world, seed, epochs, data
):
    """Invariant: split by our DistributedSampler, a dataset with an epoch of its own
    (SequentialWindowedDataset, DatasetFromSampler) reads, for a whole pass, the items of the
    epoch set when the pass began (``iter()``: each index carries it), whatever ``set_epoch``
    says while the pass is read; the dataset is at the latest epoch at once (nothing waits for
    the pass), and the next pass reads it. A pass of torch's sampler carries nothing: a
    ``set_epoch`` during it moves the items at once."""
    from distsampling import DistributedSampler

    (first, late), (make, items) = epochs, _epoch_datasets(kind)
    rank = data.draw(st.integers(0, world - 1), label="rank")
    dataset = make()
    sampler = DistributedSampler(dataset, world, rank, seed=seed)
    sampler.set_epoch(first)  # ours sets its dataset's epoch too
    positions = iter(sampler)
    k = data.draw(st.integers(0, len(sampler)), label="read before the late set_epoch")
    read = [dataset[next(positions)] for _ in range(k)]
    sampler.set_epoch(late)
    assert dataset.epoch == late
    assert [dataset[i] for i in range(len(dataset))] == items(late)  # at once: nothing held
    read += [dataset[i] for i in positions]
    plan = torch.utils.data.DistributedSampler(range(len(dataset)), world, rank, seed=seed)
    plan.set_epoch(first)
    assert read == [items(first)[i] for i in plan]
    plan.set_epoch(late)
    assert [dataset[i] for i in sampler] == [items(late)[i] for i in plan]
    theirs = torch.utils.data.DistributedSampler(dataset, world, rank, seed=seed)
    positions = iter(theirs)
    dataset.set_epoch(first)  # during a pass of torch's sampler: at once
    assert [dataset[i] for i in positions] == [items(first)[i] for i in theirs]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("kind", ["windows", "draws"])
@pytest.mark.parametrize("loader_class", ["DataLoader", "StatefulDataLoader"])
def test_through_a_loader_a_late_set_epoch_leaves_the_pass_its_epoch_and_moves_the_dataset_at_once(
    loader_class, kind, workers
):
    """Invariant: read through torch's DataLoader or torchdata's StatefulDataLoader (in the main
    process or in workers, which fetch ahead), after a ``set_epoch`` made after the first batch
    the pass reads its epoch whole, and the dataset reads the late epoch at once, while the
    loader's iterator still lives: no object is kept for the pass."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    from distsampling import DistributedSampler

    make, items = _epoch_datasets(kind)
    dataset = make()
    sampler = DistributedSampler(dataset, 1, 0, seed=2)
    Loader = {"DataLoader": torch.utils.data.DataLoader, "StatefulDataLoader": StatefulDataLoader}
    loader = Loader[loader_class](dataset, batch_size=2, sampler=sampler, num_workers=workers)
    sampler.set_epoch(1)
    batches = iter(loader)
    read = next(batches).tolist()
    sampler.set_epoch(2)  # late: after the first batch
    assert [dataset[i] for i in range(len(dataset))] == items(2)  # at once
    read += [i for batch in batches for i in batch.tolist()]
    plan = torch.utils.data.DistributedSampler(range(len(dataset)), 1, 0, seed=2)
    plan.set_epoch(1)
    assert read == [items(1)[i] for i in plan]
    plan.set_epoch(2)
    assert [i for batch in loader for i in batch.tolist()] == [items(2)[i] for i in plan]


@pytest.mark.parametrize("kind", ["windows", "draws"])
def test_two_passes_read_at_once_each_read_the_epoch_it_began_with(kind):
    """Invariant: with two passes of our DistributedSampler read at once (a peek, then the
    loop after a ``set_epoch``), each reads the epoch set when it began."""
    from distsampling import DistributedSampler

    make, items = _epoch_datasets(kind)
    dataset = make()
    sampler = DistributedSampler(dataset, 1, 0, shuffle=False)
    sampler.set_epoch(1)
    peek = iter(sampler)
    sampler.set_epoch(2)
    loop = iter(sampler)
    assert [dataset[i] for i in loop] == items(2)
    assert [dataset[i] for i in peek] == items(1)


@pytest.mark.parametrize("name", ["DistributedSampler", "DistributedSamplerWrapper"])
def test_a_dispatchers_set_epoch_is_refused_in_set_epoch_and_a_shards_is_not(name):
    """Invariant: our share's ``set_epoch``, called by accelerate's ``DataLoaderDispatcher`` (as
    it does on every process before a pass), raises naming the share and the dispatcher, and
    sets no epoch; called by a ``BatchSamplerShard`` (whose ``__iter__`` the share refuses
    instead) or by the user's loop, it sets the epoch without a word. Classes of those names in
    a module named as accelerate's stand in for them (the real dispatcher needs a process group:
    tests/test_validate.py runs it on 2 processes)."""
    pytest.importorskip("accelerate")

    import distsampling as ds

    share = {
        "DistributedSampler": lambda: ds.DistributedSampler(range(13), 2, 0, seed=5),
        "DistributedSamplerWrapper": lambda: ds.DistributedSamplerWrapper(list(range(13)), 2, 0),
    }[name]()
    module = {"__name__": "accelerate.data_loader"}
    exec(
        "class DataLoaderDispatcher:\n"
        "    def __init__(self, sampler, n):\n"
        "        self.sampler, self.num_processes = sampler, n\n"
        "    def set_epoch(self, epoch):\n"
        "        self.sampler.set_epoch(epoch)\n"
        "class BatchSamplerShard(DataLoaderDispatcher):\n"
        "    pass\n",
        module,
    )
    with pytest.raises(RuntimeError) as err:
        module["DataLoaderDispatcher"](share, 2).set_epoch(3)
    assert str(err.value).startswith(
        f"{name} already holds one rank's share (of num_replicas=2), and accelerate's "
        "DataLoaderDispatcher would read it on process 0 only and split its batches over 2 "
        "processes"
    )
    assert share.epoch == 0
    module["BatchSamplerShard"](share, 2).set_epoch(4)
    share.set_epoch(5)
    assert share.epoch == 5


# --- accelerate's DataLoaderDispatcher, on 2 real processes --------------------------------------


def dispatcher_rank() -> list[str]:
    """On each rank of a live group of 2: our DistributedSampler's loader prepared by
    ``Accelerator.prepare`` with ``dispatch_batches=True`` (a ``DataLoaderDispatcher``, which
    reads batches on process 0 only and broadcasts them), iterated for 2 epochs: what each
    epoch's ``iter()`` raised (its first words), or the batches it read."""
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration
    from torch.utils.data import DataLoader

    import distsampling as ds

    config = DataLoaderConfiguration(dispatch_batches=True)
    accelerator = Accelerator(cpu=True, dataloader_config=config)
    assert accelerator.num_processes == 2
    sampler = ds.DistributedSampler(range(16), seed=0)  # world and rank from the group
    prepared = accelerator.prepare(DataLoader(range(16), batch_size=2, sampler=sampler))
    out = [type(prepared).__name__]
    for _ in range(2):
        try:
            out.append(str([b.tolist() for b in prepared]))
        except RuntimeError as e:
            out.append(str(e).split(":")[0])
    return out


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
@pytest.mark.timeout(300)
def test_under_accelerates_dispatcher_every_process_raises_in_set_epoch_and_none_waits():
    """Invariant: on 2 real processes, a share prepared by ``Accelerator.prepare`` with
    ``dispatch_batches=True`` (``DataLoaderDispatcher``: only process 0 reads the loader)
    raises on every process in every epoch, before a batch: the dispatcher calls our
    ``set_epoch`` on every process first, where the guard refuses, so no process waits in the
    broadcast for one that raised (the run ends within its timeout)."""
    pytest.importorskip("accelerate")
    from distsampling import run_world

    ranks = run_world("test_validate:dispatcher_rank", 2, timeout=240, pythonpath=[TESTS])
    refused = (
        "DistributedSampler already holds one rank's share (of num_replicas=2), and "
        "accelerate's DataLoaderDispatcher would read it on process 0 only and split its "
        "batches over 2 processes"
    )
    assert ranks == [["DataLoaderDispatcher", refused, refused]] * 2


# --- the exported classes are their reference classes, with guards over them ------------------


@given(
    n=dataset_lengths, args=sampler_args(), epoch=epochs, size=batch_sizes, drop=flags,
    windows=windowed_args(), data=labelled_datasets(),
)  # fmt: skip
def test_outside_any_framework_each_exported_class_yields_exactly_its_reference_classs_indices(
    n, args, epoch, size, drop, windows, data
):
    """Invariant: outside any framework, for any arguments and epoch, each class distsampling
    exports (a guarded subclass of the same name) yields exactly what its reference class
    (distributed.py, batch.py, windowed.py, wrapper.py) yields, and reads the same items: the
    guards add refusals and the epoch an index carries, never another index."""
    import distsampling as ds
    from distsampling import batch, distributed, windowed, wrapper

    def read(cls_split, cls_batch, cls_windows, cls_wrapper, cls_from):
        split = cls_split(range(n), **args)
        win = cls_windows(**windows)
        over_windows = cls_split(win, **args)
        inner = ds.WeightedBalanceClassSampler(**data, seed=3)
        wrapped = cls_wrapper(inner, **args)
        draws = cls_from(ds.WeightedBalanceClassSampler(**data, seed=3))
        over_draws = cls_split(draws, **args)
        for s in (split, over_windows, wrapped, over_draws):
            s.set_epoch(epoch)
        for d in (win, draws):  # the reference sampler sets no dataset's epoch: set both
            d.set_epoch(epoch)
        return (
            list(split), list(cls_batch(split, size, drop)), [win[i] for i in over_windows],
            list(wrapped), [draws[i] for i in over_draws],
            [type(o).__name__ for o in (split, win, wrapped, draws)],
        )  # fmt: skip

    exported = read(ds.DistributedSampler, ds.BatchSampler, ds.SequentialWindowedDataset,
                    ds.DistributedSamplerWrapper, ds.DatasetFromSampler)  # fmt: skip
    reference = read(distributed.DistributedSampler, batch.BatchSampler,
                     windowed.SequentialWindowedDataset, wrapper.DistributedSamplerWrapper,
                     wrapper.DatasetFromSampler)  # fmt: skip
    assert exported == reference
    assert (
        ds.WeightedBalanceClassSampler
        is __import__("distsampling.weighted").weighted.WeightedBalanceClassSampler
    )


def test_only_a_dataset_that_reads_index_epochs_is_handed_them_a_users_own_gets_plain_ints():
    """Invariant: the exported ``DistributedSampler`` hands ``EpochIndex`` ints only to a
    dataset that says it reads them (``reads_index_epoch``, ours); a user's dataset with an epoch
    of its own (``set_epoch``) gets plain ``int`` indices, the same values, as from torch."""
    import distsampling as ds

    class Epoched:  # a user's dataset: an epoch of its own, no word of index epochs
        epoch = 0

        def __len__(self) -> int:
            return 10

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

    sampler = ds.DistributedSampler(Epoched(), 2, 1, seed=3)
    sampler.set_epoch(4)  # sets the dataset's epoch too: no warning
    got = list(sampler)
    assert got and all(type(i) is int for i in got)
    torchs = torch.utils.data.DistributedSampler(range(10), 2, 1, seed=3)
    torchs.set_epoch(4)
    assert got == list(torchs)
    windows = ds.SequentialWindowedDataset(12, 3, seed=0)  # ours: it reads them
    ours = ds.DistributedSampler(windows, 1, 0, seed=1)
    assert all(type(i).__name__ == "EpochIndex" for i in ours)
