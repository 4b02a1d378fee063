"""Properties of ShardedMixtureDataset: MixtureSampler's sources, read as shard runs by readers.

Ranks and workers are simulated in process (``iter_worker(w, n)`` is what worker ``w`` of ``n``
runs; the loader takes a batch from each worker in turn); real DataLoaders and torchdata's
StatefulDataLoader check the claims that need them.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import sys
import warnings
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator
from itertools import accumulate, islice, pairwise
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader, IterableDataset
from torchdata.stateful_dataloader import StatefulDataLoader

from distsampling import MixtureSampler, ShardedMixtureDataset, loader_dataset_states, run_nodes
from distsampling.mixing.tree import _route
from distsampling.streaming.mixture_readers import own_steps
from strategies import (
    elastic_world_sizes,
    flags,
    loop_batch_counts,
    mixture_batch_sizes,
    mixture_worker_counts,
    peek_lengths,
    seeds,
    sharded_mixtures,
)

TESTS = str(Path(__file__).resolve().parent)


class Reader:
    """``read(shard)``: source ``k``'s shard ``i`` yields ``(k, i, offset)``, front to back; logs
    ``[shard, start, drawn]`` per open in ``opens``."""

    def __init__(self, k: int, sizes: list[int]) -> None:
        self.k, self.sizes, self.opens = k, sizes, []

    def __call__(self, shard: int, start: int = 0):
        entry = [shard, start, 0]
        self.opens.append(entry)
        for o in range(start, self.sizes[shard]):
            entry[2] += 1
            yield (self.k, shard, o)


def sources_of(shards: list[list[int]]) -> list[tuple]:
    return [(list(range(len(s))), s, Reader(k, s)) for k, s in enumerate(shards)]


def make(shards, weights, b, world=1, rank=0, **kwargs) -> ShardedMixtureDataset:
    return ShardedMixtureDataset(sources_of(shards), weights, b, num_replicas=world, rank=rank,
                                 **kwargs)  # fmt: skip


def rank_batches(ds: ShardedMixtureDataset, workers: int) -> list[list]:
    """A rank's loader batches of the epoch: each worker's batches, taken in turn."""
    per = []
    for w in range(max(1, workers)):
        out = list(ds.iter_worker(w, workers))
        per.append([out[i : i + ds.batch_size] for i in range(0, len(out), ds.batch_size)])
    return [per[i % len(per)][i // len(per)] for i in range(sum(map(len, per)))]


def pass_offset(shards, k, shard, offset) -> int:
    """Without shuffle a pass lists the shards as given: where ``(shard, offset)`` is in it."""
    return sum(shards[k][:shard]) + offset


def assert_every_pass_whole(shards, reads: Counter, gen: dict) -> None:
    """What was read (``reads``: sample -> times) plus what the passes in flight leave (the
    ``lead`` of a generation loaded at the end) is every pass up to its ``first``, each sample
    once a pass."""
    for k, sizes in enumerate(shards):
        lead = Counter(o for p, x, y in gen["lead"][k] for o in range(x, y))
        for i, n in enumerate(sizes):
            for o in range(n):
                assert reads[(k, i, o)] + lead[pass_offset(shards, k, i, o)] == gen["first"][k]


def assert_only_begun_passes_carried(shards, reads: Counter, gen: dict) -> None:
    """An elastic resume carries over what was read (``reads``) as a generation whose leftovers
    are the unread rest of the passes up to the last one a reader began, and no further: fresh
    passes start at ``first``, so pass ``first - 1`` holds a read sample (is not whole in
    ``lead``)."""
    assert_every_pass_whole(shards, reads, gen)
    for k, sizes in enumerate(shards):
        last = gen["first"][k] - 1
        if sum(sizes) and last >= 0:
            assert sum(y - x for p, x, y in gen["lead"][k] if p == last) < sum(sizes), (k, gen)


args = st.fixed_dictionaries(
    {
        "mix": sharded_mixtures(),
        "b": mixture_batch_sizes,
        "world": st.integers(1, 4),
        "workers": mixture_worker_counts,
        "seed": seeds,
        "seekable": flags,
        "epochs": st.integers(1, 3),
    }
)


def run(a, shuffle=True):
    """``[rank][step]``: each rank's batches over ``a['epochs']`` epochs, and the datasets."""
    shards, weights = a["mix"]
    datasets = [make(shards, weights, a["b"], a["world"], r, seed=a["seed"], shuffle=shuffle,
                     seekable=a["seekable"], with_source=True) for r in range(a["world"])]  # fmt: skip
    out = [[] for _ in datasets]
    for e in range(a["epochs"]):
        for r, ds in enumerate(datasets):
            ds.set_epoch(e)
            out[r] += rank_batches(ds, a["workers"])
    return out, datasets


def _entries(weights) -> list:
    """``[(step, weights)]`` of weights or a schedule."""
    if isinstance(weights[0], (tuple, list)):
        return [(s, w) for s, w in weights]
    return [(0, weights)]


def reader_sources(totals, weights, b, world, n, rank, steps, start=0) -> list[int]:
    """The oracle of which source each slot of ``rank``'s ``steps`` reads: reader ``ρ = s mod n``
    at its ``m``-th own step of a stretch reads the tree's window ``m + ρ·W + rank``; a
    one-rank per-rank MixtureSampler of the stretch's weights routes those tree positions. A
    grid from step ``start`` (an elastic resume) starts a stretch there."""
    entries, out = _entries(weights), []
    for s in steps:
        lo, w = [e for e in entries if e[0] <= s][-1]
        lo = max(lo, start)
        rho = s % n
        m = sum(1 for t in range(lo, s) if t % n == rho)
        window = m + rho * world + rank
        tree = MixtureSampler(totals, w, b, 1, 0, layout="per_rank", shuffle=False)
        out += tree.sources(np.arange(window * b, (window + 1) * b))[0].tolist()
    return out


@given(args)
def test_every_reader_reads_a_window_of_the_tree_and_one_reader_a_rank_is_per_rank_mixtures(a):
    """Invariant: rank r's loader batches hold, step by step, the sources of the weight tree's
    window ``m + ρ·W + r`` of reader ``ρ = s mod n`` at its ``m``-th own step of a stretch; with
    one reader a rank (0 or 1 workers) and fixed weights that is
    MixtureSampler(layout="per_rank")'s indices for the same sizes, weights, seed and world (a
    schedule: the sampler carries its phases across a change, a stretch starts a new tree);
    every rank takes len() of them, the same number."""
    batches, datasets = run(a)
    shards, weights = a["mix"]
    totals = [sum(s) for s in shards]
    starts = list(accumulate(totals, initial=0))
    n = max(1, a["workers"])
    for r, ds in enumerate(datasets):
        idx_ours = [k for batch in batches[r] for k, _ in batch]
        steps = range(len(idx_ours) // a["b"])
        assert idx_ours == reader_sources(totals, weights, a["b"], a["world"], n, r, steps)
        sampler = MixtureSampler(totals, weights, a["b"], a["world"], r, seed=a["seed"],
                                 layout="per_rank")  # fmt: skip
        idx_sampler = []  # the sources of MixtureSampler's indices (ours, not torch's)
        for e in range(a["epochs"]):
            sampler.set_epoch(e)
            idx_sampler += [bisect_right(starts, i) - 1 for i in sampler]
        if n == 1 and not isinstance(weights[0], (tuple, list)):
            assert idx_ours == idx_sampler
        assert len(idx_ours) == len(idx_sampler)
        assert all(len(batch) == a["b"] for batch in batches[r])
        assert len(ds) == len(sampler)
    assert len({len(b) for b in batches}) == 1


@given(args)
def test_every_sample_is_read_once_a_pass_the_unread_rest_of_the_passes_in_flight_closes_them(a):
    """Invariant: with the samples every reader read, and the unread rest of the passes in flight
    that an elastic resume would hand on (its state's leftovers), every sample of source k is
    read exactly ``first[k]`` times: every pass before ``first`` once, no sample twice in one."""
    batches, _datasets = run(a, shuffle=False)
    shards = a["mix"][0]
    reads = Counter(x for rank in batches for batch in rank for _, x in batch)
    last = make(shards, a["mix"][1], a["b"], a["world"], 0, seed=a["seed"], shuffle=False)
    last.set_epoch(a["epochs"] - 1)
    states = _states_at(last, a["workers"], len(range(*_epoch_steps(last))))
    fresh = make(shards, a["mix"][1], 1, seed=a["seed"], shuffle=False)
    fresh.set_epoch(a["epochs"] - 1)
    fresh.load_state_dict(states)
    gen = fresh.state_dict()["generation"]
    assert_every_pass_whole(shards, reads, gen)


def _epoch_steps(ds):
    """The epoch's steps (first, stop): a rank's len() is ``steps * batch_size``."""
    start = ds.state_dict()["step"]
    return start, start + len(ds) // ds.batch_size


@given(args, st.data())
def test_a_state_saved_at_any_step_resumes_the_worker_exactly(a, data):
    """Invariant: a worker's state saved after any sample of the epoch, loaded into a fresh
    dataset, yields exactly the rest of the uninterrupted run."""
    shards, weights = a["mix"]
    rank = data.draw(st.integers(0, a["world"] - 1))
    worker = data.draw(st.integers(0, max(0, a["workers"] - 1)))
    kw = {"seed": a["seed"], "seekable": a["seekable"]}
    ds = make(shards, weights, a["b"], a["world"], rank, **kw)
    ds.set_epoch(a["epochs"] - 1)
    whole = list(ds.iter_worker(worker, a["workers"]))
    stop = data.draw(st.integers(0, len(whole)))
    ds = make(shards, weights, a["b"], a["world"], rank, **kw)
    ds.set_epoch(a["epochs"] - 1)
    it = ds.iter_worker(worker, a["workers"])
    head = [next(it) for _ in range(stop)]
    state = ds.state_dict()
    again = make(shards, weights, a["b"], a["world"], rank, **kw)
    again.set_epoch(a["epochs"] - 1)
    again.load_state_dict(state)
    assert head + list(again.iter_worker(worker, a["workers"])) == whole


@given(args, st.data())
def test_a_state_saved_on_another_rank_of_the_run_resumes_this_rank_at_the_same_step(a, data):
    """Invariant: the ranks step together, so a worker's state saved on rank ``r0`` after any
    sample (Lightning's checkpoint holds rank 0's loader state, which every rank loads) resumes
    worker ``w`` of rank ``r`` at that step and slot: it yields exactly the rest of rank
    ``r``'s uninterrupted run, its readers' counts counted again."""
    shards, weights = a["mix"]
    saver, rank = (data.draw(st.integers(0, a["world"] - 1)) for _ in range(2))
    worker = data.draw(st.integers(0, max(0, a["workers"] - 1)))

    def fresh(r):
        ds = make(shards, weights, a["b"], a["world"], r, seed=a["seed"], seekable=a["seekable"])
        ds.set_epoch(a["epochs"] - 1)
        return ds

    whole = list(fresh(rank).iter_worker(worker, a["workers"]))
    stop = data.draw(st.integers(0, len(whole)))
    other = fresh(saver)
    it = other.iter_worker(worker, a["workers"])
    [next(it) for _ in range(stop)]
    again = fresh(rank)
    again.load_state_dict(other.state_dict())
    assert list(again.iter_worker(worker, a["workers"])) == whole[stop:]
    assert again.state_dict()["rank"] == rank


@given(args, st.integers(0, 40))
def test_counts_at_a_step_are_the_sources_of_every_readers_windows_step_by_step(a, step):
    """Invariant: counts_at(S)[r][w][k] (a closed form) is how many of rank r's slots at steps
    s < S with s ≡ w (mod workers) read source k, counted step by step from the oracle's tree
    windows (:func:`reader_sources`)."""
    shards, weights = a["mix"]
    nw = max(1, a["workers"])
    ds = make(shards, weights, a["b"], a["world"], seed=a["seed"], num_workers=nw)
    totals = [sum(s) for s in shards]
    expected = [[[0] * len(shards) for _ in range(nw)] for _ in range(a["world"])]
    for r in range(a["world"]):
        for s in range(step):
            for k in reader_sources(totals, weights, a["b"], a["world"], nw, r, [s]):
                expected[r][s % nw][k] += 1
    assert ds.counts_at(step).tolist() == expected


@given(args)
def test_readers_open_each_shard_once_a_run_and_drop_at_most_one_head_a_pass(a):
    """Invariant: every open yields a sample; opens of source k number at most its non-empty
    shards plus the readers, per pass read; what is drawn and not yielded is one shard head at
    most per reader and pass, none with seekable."""
    batches, datasets = run(a)
    readers = a["world"] * max(1, a["workers"])
    for k, sizes in enumerate(a["mix"][0]):
        yielded = sum(1 for rank in batches for batch in rank for s, _ in batch if s == k)
        opens = [o for ds in datasets for o in ds.sources[k][2].opens]
        T = sum(sizes)
        if not T:
            assert not opens
            continue
        passes = -(-yielded // T) + readers  # passes touched: the readers' spread included
        assert all(drawn > 0 for _, _, drawn in opens)
        assert len(opens) <= passes * (sum(n > 0 for n in sizes) + readers)
        heads = [drawn for _, _, drawn in opens]
        if a["seekable"]:
            assert sum(heads) == yielded
        assert sum(heads) - yielded <= passes * readers * max(sizes)


@given(args, elastic_world_sizes, elastic_world_sizes, mixture_worker_counts, st.data())
def test_elastic_resume_on_another_world_and_workers_reads_every_sample_once_a_pass(
    a, world, world2, workers2, data
):
    """Invariant: every worker state of one rank at a step boundary, loaded on another
    num_replicas (1..8), micro-batch and num_workers (0..3), goes on with the sources of
    MixtureSampler's own elastic resume (a schedule's later changes at their steps), and what
    both runs read plus the rest of the passes in flight is every pass once. At the resume, the
    leftovers carried are the unread rest of the passes up to the last one a reader began."""
    shards, weights = a["mix"]
    b, workers = a["b"], a["workers"]
    datasets = [make(shards, weights, b, world, r, shuffle=False) for r in range(world)]
    batches = [rank_batches(ds, workers) for ds in datasets]
    steps = data.draw(st.integers(0, len(batches[0])))
    reads = Counter(x for rank in batches for batch in rank[:steps] for x in batch)
    states = _states_at(datasets[0], workers, steps)
    b2 = data.draw(mixture_batch_sizes)
    new = [make(shards, weights, b2, world2, r, shuffle=False) for r in range(world2)]
    for ds in new:
        ds.load_state_dict(states)
    assert_only_begun_passes_carried(shards, reads, new[0].state_dict()["generation"])
    after = [rank_batches(ds, workers2) for ds in new]
    assert len({len(x) for x in after}) == 1  # every new rank: the same number of steps
    totals = [sum(sizes) for sizes in shards]
    for r, rank in enumerate(after):  # the new grid's trees start at the resumed step
        grid = range(steps, steps + len(rank))
        assert [x[0] for batch in rank for x in batch] == reader_sources(
            totals, weights, b2, world2, max(1, workers2), r, grid, start=steps
        )
    reads += Counter(x for rank in after for batch in rank for x in batch)
    closing = make(shards, weights, 1, shuffle=False)
    closing.load_state_dict(_states_at(new[0], workers2, len(after[0])))
    gen = closing.state_dict()["generation"]
    assert_every_pass_whole(shards, reads, gen)


def _states_at(ds, workers, steps):
    """Every worker's state of ``ds``'s rank after the loader delivered ``steps`` batches."""
    n = max(1, workers)
    states = []
    for w in range(n):
        it = ds.iter_worker(w, workers)
        mine = len(range(w, steps, n))  # the loader's batches w, w + n, ... below `steps`
        for _ in range(mine * ds.batch_size):
            next(it)
        states.append(ds.state_dict())
    return states


SHARDS = [[3, 0, 4], [2, 5], [6]]


@pytest.mark.parametrize(
    ("sources", "weights", "error", "message"),
    [
        ("abc", [1], TypeError, "sources should be a non-empty list of (shards, sizes, read), but got sources='abc'"),
        ([([0], [1])], [1], TypeError, "sources[0] should be a (shards, sizes, read) triple, but got sources[0]=([0], [1])"),
        ([(5, [1], Reader(0, [1]))], [1], TypeError, "sources[0] shards should be a sequence, but got shards=5 of type int"),
        ([([0], "1", Reader(0, [1]))], [1], TypeError, "sources[0] sizes should be a sequence, but got sizes='1' of type str"),
        ([([0, 1], [1], Reader(0, [1]))], [1], ValueError, "sources[0] should hold one size per shard (len(shards)=2), but got len(sizes)=1"),
        ([([0], [-1], Reader(0, [1]))], [1], ValueError, "sources[0] sizes[0] should be >= 0, but got sources[0] sizes[0]=-1"),
        ([([0], [1], "read")], [1], TypeError, "sources[0] read should be a callable, read(shard) -> samples, but got read='read'"),
        ([([0], [1], Reader(0, [1])), ([0], [0], Reader(1, [0]))], [1, 0.5], ValueError, "weights[1]=0.5 should be 0: sources[1] has no sample (its sizes sum to 0)"),
        ([([0], [1], Reader(0, [1]))], 5, TypeError, "weights should be a sequence of 1 numbers, but got weights=5"),
        ([([0], [1], Reader(0, [1]))], iter([1.0]), TypeError, "weights should be a sequence of 1 numbers, but got weights=<list_iterator object at"),
        ([], [], TypeError, "sources should be a non-empty list of (shards, sizes, read), but got sources=[]"),
        ([([0], [1], Reader(0, [1])), ([0], [0], Reader(1, [0]))], np.array([1, 0.5]), ValueError, "weights[1]=0.5 should be 0: sources[1] has no sample (its sizes sum to 0)"),
        ([([0], [1], Reader(0, [1])), ([0], [0], Reader(1, [0]))], [(0, [1, 0]), (5, [1, 0.5])], ValueError, "weights[1][1][1]=0.5 should be 0: sources[1] has no sample (its sizes sum to 0)"),
        ([([0], [1], Reader(0, [1])), ([0], [0], Reader(1, [0]))], [1, 0, 1], ValueError, "weights should hold one weight per source (2), but got weights=[1, 0, 1]"),
    ],
)  # fmt: skip
def test_bad_sources_and_weights_are_named_with_their_value(sources, weights, error, message):
    """Invariant: a malformed source, sizes that do not match the shards, a positive weight on
    an empty source and weights that are not a sequence (a number, an iterator: never consumed)
    are refused, naming the source, the argument and the value."""
    with pytest.raises(error) as info:
        ShardedMixtureDataset(sources, weights, 2, num_replicas=1, rank=0)
    said = str(info.value)
    assert said.startswith(message) if message.endswith("object at") else said == message


@pytest.mark.parametrize("held", [2, 3, 0])  # b.tar's samples, of 4: it lacks a middle one,
@pytest.mark.parametrize("seekable", [False, True])  # its last (read on or opened), or all
def test_a_read_yielding_fewer_samples_than_its_size_names_the_source_and_the_shard(seekable, held):
    """Invariant: a shard that ends early is named with its source, its index, the sample it
    lacks (counted in the shard) and its size, whichever shard of the pass it is and wherever
    it ends: before a middle sample, its last, or its first."""
    short = lambda shard, start=0: iter(range(start, {"a.tar": 3, "b.tar": held}[shard]))  # noqa: E731
    ds = ShardedMixtureDataset([(["a.tar", "b.tar"], [3, 4], short)], [1], 4, num_replicas=1,
                               rank=0, seekable=seekable, shuffle=False)  # fmt: skip
    call = (r"read\(shard, start\) should yield samples start .. sizes\[i\] - 1" if seekable
            else r"read\(shard\) should yield exactly sizes\[i\] samples")  # fmt: skip
    with pytest.raises(ValueError, match=r"^sources\[0\]: shard 'b.tar' \(shards\[1\]\) ended "
                       rf"before its sample {held}, but sizes\[1\]=4: " + call + "$"):  # fmt: skip
        list(ds)


@pytest.mark.parametrize("weights", [[1, 3, 2], [1, 150, 100]])
def test_until_exhausted_ends_the_epoch_on_every_rank_at_the_same_step_before_its_next_pass(
    weights,
):
    """Invariant: with until_exhausted=k every rank reads the same steps; epoch e reads only
    source k's items of passes <= e, and the step after it would read pass e + 1's first (k
    common, or so light that its items lie hundreds of positions apart)."""
    world, b = 3, 2
    datasets = [make(SHARDS, weights, b, world, r, until_exhausted=0, with_source=True)
                for r in range(world)]  # fmt: skip
    T, read = sum(SHARDS[0]), 0
    for e in range(3):
        lens = set()
        for ds in datasets:
            ds.set_epoch(e)
            batches = rank_batches(ds, 2)
            lens.add(len(batches))
            read += sum(k == 0 for batch in batches for k, _ in batch)
        assert len(lens) == 1 and len(datasets[0]) == lens.pop() * b
        fresh = make(SHARDS, weights, b, world, 0, until_exhausted=0, num_workers=2)
        fresh.set_epoch(e)
        _, stop = _epoch_steps(fresh)
        drawn = [sum(c[0] for rank in fresh.counts_at(s) for c in rank) for s in (stop, stop + 1)]
        assert read == drawn[0] <= (e + 1) * T < drawn[1]


def test_until_exhausted_ends_every_new_rank_at_one_step_after_an_elastic_resume_in_epoch_1():
    """Invariant: resumed elastically inside epoch 1 (2 ranks x 2 workers, micro-batch 2 -> 3
    ranks x 1 worker, micro-batch 3), until_exhausted=k ends epoch 1 on every new rank at the
    same step, as len() says; over epochs 0 and 1, source k is read at most two passes' worth,
    and the global step after the end would read past them."""
    weights, T0 = [1, 3, 2], sum(SHARDS[0])
    old = [make(SHARDS, weights, 2, 2, r, until_exhausted=0, with_source=True) for r in range(2)]
    reads = sum(k == 0 for ds in old for batch in rank_batches(ds, 2) for k, _ in batch)
    for ds in old:
        ds.set_epoch(1)
    steps = len(rank_batches(old[0], 2)) // 2
    assert steps >= 1
    reads += sum(k == 0 for ds in old for batch in rank_batches(ds, 2)[:steps] for k, _ in batch)
    states = _states_at(old[0], 2, steps)
    new = [make(SHARDS, weights, 3, 3, r, until_exhausted=0, with_source=True) for r in range(3)]
    lengths = set()
    for ds in new:
        ds.set_epoch(1)
        ds.load_state_dict(states)
        lengths.add(len(ds))
    got = [rank_batches(ds, 1) for ds in new]
    assert len({len(g) for g in got}) == 1
    assert {len(ds) for ds in new} == lengths and len(lengths) == 1
    reads += sum(k == 0 for g in got for batch in g for k, _ in batch)
    stop = new[0].state_dict()["step"]
    following = sum(k == 0 for rank in new[0].batch_at(stop) for k, _, _ in rank)
    assert reads <= 2 * T0 < reads + following


@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resumes_exactly_what_an_uninterrupted_run_yields(workers):
    """Invariant: torchdata's StatefulDataLoader stopped after 3 batches and resumed from its
    state yields the rest of the uninterrupted run's batches, with workers or without."""

    def loader():
        ds = make(SHARDS, [1, 3, 2], 2, 2, 1, seed=3)
        ds.set_epoch(1)
        return StatefulDataLoader(ds, batch_size=2, num_workers=workers)

    rows = lambda batch: [t.tolist() for t in batch]  # noqa: E731 (shards and offsets)
    whole = [rows(b) for b in loader()]
    first = loader()
    it = iter(first)
    head = [rows(next(it)) for _ in range(3)]
    state = first.state_dict()
    again = loader()
    again.load_state_dict(state)
    assert head + [rows(b) for b in again] == whole
    assert len(whole) == len(loader().dataset) // 2


@pytest.mark.parametrize("workers", [0, 2])
def test_rank_0s_stateful_dataloader_state_resumes_rank_1s_loader_exactly(workers):
    """Invariant: as under Lightning (its checkpoint holds rank 0's loader state, every rank
    loads it), rank 0's StatefulDataLoader state after 2 batches, loaded into rank 1's loader,
    yields the rest of rank 1's uninterrupted run, with workers or without."""

    def loader(rank):
        ds = make(SHARDS, [1, 3, 2], 2, 2, rank, seed=3)
        ds.set_epoch(1)
        return StatefulDataLoader(ds, batch_size=2, num_workers=workers)

    rows = lambda batch: [t.tolist() for t in batch]  # noqa: E731 (shards and offsets)
    whole = [rows(b) for b in loader(1)]
    first = loader(0)
    it = iter(first)
    [next(it) for _ in range(2)]
    again = loader(1)
    again.load_state_dict(first.state_dict())
    assert [rows(b) for b in again] == whole[2:]


def test_every_worker_state_of_one_rank_resumes_on_another_world_through_loaders():
    """Invariant: 2 ranks of StatefulDataLoaders with 2 workers stop after 3 batches; rank 0's
    worker states (loader_dataset_states) resume 3 ranks with 1 worker and micro-batch 3, whose
    sources are MixtureSampler's elastic resume's, and every pass is read once."""
    weights, reads = [1, 3, 2], Counter()
    states = None
    for r in range(2):
        ds = make(SHARDS, weights, 2, 2, r, seed=0, shuffle=False)
        loader = StatefulDataLoader(ds, batch_size=2, num_workers=2)
        it = iter(loader)
        for _ in range(3):
            batch = next(it)
            reads.update(zip(*(t.tolist() for t in batch), strict=True))
        states = states or loader_dataset_states(loader.state_dict())
    sources_new, steps_new = [], 0
    for r in range(3):
        ds = make(SHARDS, weights, 3, 3, r, seed=0, shuffle=False, with_source=True)
        ds.load_state_dict(states)
        got = [x for batch in DataLoader(ds, batch_size=3, num_workers=1) for x in
               zip(*(t.tolist() for t in batch[1]), strict=True)]  # fmt: skip
        reads.update(got)
        steps_new = len(got) // 3
        ds.set_epoch(0)  # the epoch read again, on purpose
        sources_new.append([k for batch in DataLoader(ds, batch_size=3) for k in batch[0].tolist()])
    totals = [sum(s) for s in SHARDS]
    old = MixtureSampler(totals, weights, 2, 2, 0, layout="per_rank")
    it = iter(old)
    [next(it) for _ in range(6)]  # rank 0 read steps 0..2
    mixture_state = old.state_dict()
    for r in range(3):
        new = MixtureSampler(totals, weights, 3, 3, r, layout="per_rank")  # one reader a rank
        new.load_state_dict(mixture_state)
        starts = list(accumulate(totals, initial=0))
        assert sources_new[r] == [bisect_right(starts, i) - 1 for i in new]
    closing = make(SHARDS, weights, 1, shuffle=False)
    last = make(SHARDS, weights, 3, 3, 0, shuffle=False)
    last.load_state_dict(states)
    closing.load_state_dict(_states_at(last, 1, steps_new))
    gen = closing.state_dict()["generation"]
    assert_every_pass_whole(SHARDS, reads, gen)


@given(args)
def test_with_num_workers_given_the_main_process_reads_what_the_loaders_workers_read(a):
    """Invariant: ShardedMixtureDataset(num_workers=n) read with num_workers=0 yields exactly the
    loader's batches with n workers (each reader's steps, in step order)."""
    shards, weights = a["mix"]
    n = max(1, a["workers"])
    for r in range(a["world"]):
        ds = make(shards, weights, a["b"], a["world"], r, seed=a["seed"], num_workers=n)
        ds.set_epoch(a["epochs"] - 1)
        idx_main = list(ds)
        idx_workers = [x for batch in rank_batches(ds, n) for x in batch]
        assert idx_main == idx_workers


def test_a_loader_with_other_workers_than_num_workers_is_refused_naming_both():
    """Invariant: the readers are fixed by num_workers; a loader with another count is refused."""
    ds = make(SHARDS, [1, 3, 2], 2, num_workers=2)
    with pytest.raises(ValueError) as err:
        ds.iter_worker(0, 3)
    assert str(err.value) == (
        "num_workers should be 2 (this run's readers per rank), or 0, but the DataLoader has "
        "num_workers=3: pass num_workers=3 to a new ShardedMixtureDataset, or, to change it "
        "mid-run, resume every worker's state of one rank at once "
        "(load_state_dict(loader_dataset_states(loader_state)))"
    )


def test_a_workers_state_read_by_another_worker_or_a_step_begun_read_by_workers_is_refused():
    """Invariant: a state saved by one DataLoader worker resumes in that worker only, and a
    main process's state saved inside a step (workers read whole steps) resumes with
    ``num_workers=0`` only: each is refused in these exact words, naming the worker, the step
    and the slot."""

    def refusal(read, samples: int, worker: int) -> str:
        """The error of worker ``worker`` of 2 resuming a state saved after ``samples`` of ``read``."""
        saver = make(SHARDS, [1, 3, 2], 2, num_workers=2)
        it = read(saver)
        for _ in range(samples):
            next(it)
        resumed = make(SHARDS, [1, 3, 2], 2, num_workers=2)
        resumed.load_state_dict(saver.state_dict())
        with pytest.raises(ValueError) as err:
            next(resumed.iter_worker(worker, 2))
        return str(err.value)

    # into worker 0's second step, read by worker 1
    assert refusal(lambda ds: ds.iter_worker(0, 2), 3, 1) == (
        "state was saved by worker 0 of 2, but is read by worker 1: resume through the same "
        "loader's worker"
    )
    # slot 1 of step 0, in the main process, read by worker 0
    assert refusal(iter, 1, 0) == (
        "state is inside step 0 (slot 1): DataLoader workers resume at a step boundary; read the "
        "rest of the step with num_workers=0"
    )


def test_consumed_in_the_main_process_of_a_plain_loader_resumes_its_workers_exactly():
    """Invariant: with a plain DataLoader of 2 workers (they read ahead), state_dict(consumed=k
    batches' samples) loaded into a new dataset reads the rest of the epoch, batch for batch."""

    def loader():
        ds = make(SHARDS, [1, 3, 2], 2, 2, 1, num_workers=2)
        return ds, DataLoader(ds, batch_size=2, num_workers=2)

    rows = lambda batch: [t.tolist() for t in batch]  # noqa: E731
    whole = [rows(b) for b in loader()[1]]
    for k in range(len(whole) + 1):
        ds, dl = loader()
        it = iter(dl)
        head = [rows(next(it)) for _ in range(k)]
        state = ds.state_dict(consumed=2 * k)
        del it
        again, dl = loader()
        again.load_state_dict(state)
        assert head + [rows(b) for b in dl] == whole
    with pytest.raises(ValueError, match=r"consumed should be in the interval \[0, "):
        loader()[0].state_dict(consumed=2 * len(whole) + 1)


def test_consumed_after_workers_resumed_a_loaded_state_counts_from_the_loaded_place():
    """Invariant: a state loaded and not read in the main process is where a plain DataLoader's
    workers resume: ``state_dict(consumed=k)`` there is ``k`` samples past the loaded place, and
    a second resume from it reads the rest of the epoch, batch for batch."""

    def loader():
        ds = make(SHARDS, [1, 3, 2], 2, 2, 1, num_workers=2)
        return ds, DataLoader(ds, batch_size=2, num_workers=2)

    rows = lambda batch: [t.tolist() for t in batch]  # noqa: E731
    whole = [rows(b) for b in loader()[1]]
    ds, dl = loader()
    it = iter(dl)
    head = [rows(next(it)) for _ in range(2)]
    state = ds.state_dict(consumed=4)
    del it
    again, dl = loader()
    again.load_state_dict(state)
    it = iter(dl)
    head += [rows(next(it))]
    state = again.state_dict(consumed=2)
    del it
    last, dl = loader()
    last.load_state_dict(state)
    assert head + [rows(b) for b in dl] == whole


def overlap(shards, steps: list[list]) -> int:
    """The overlap of two passes (``benchmarks/peers_sharded_mixture.py``'s): at each step
    boundary of ``steps`` (a step: every sample every reader read in it), for each source,
    ``Σ max(0, reads - P - 1)`` over its samples, ``P`` the fewest reads of any; the most."""
    reads = [np.zeros(sum(s), np.int64) for s in shards]  # (T_k,) each sample's reads so far
    worst = 0
    for step in steps:
        for k, shard, o in step:
            reads[k][pass_offset(shards, k, shard, o)] += 1
        for r in reads:
            if len(r):
                worst = max(worst, int(np.maximum(0, r - r.min() - 1).sum()))
    return worst


@given(args, st.integers(1, 1000))
def test_at_every_step_of_a_long_run_the_overlap_of_two_passes_is_0_at_most_readers_times_b(
    a, steps
):
    """Invariant: over ``steps`` (up to 1,000) steps read by every rank's every worker, at every
    step boundary the overlap of two passes of any source (``Σ max(0, reads - P - 1)``, ``P``
    the fewest reads of a sample) is at most ``readers × b``, whatever ``W``, ``b``,
    ``num_workers``, the weights and the schedule (it is 0: the reads of a source are the
    first draws of its global order, each reader's segment of a pass its draws there)."""
    shards, weights = a["mix"]
    nw, b, W = a["workers"], a["b"], a["world"]
    ranks = [make(shards, weights, b, W, r, seed=a["seed"], epoch_length=steps * W * b,
                  num_workers=max(1, nw), seekable=a["seekable"]) for r in range(W)]  # fmt: skip
    batches = [rank_batches(ds, nw) for ds in ranks]  # [rank][step] -> b samples
    assert {len(x) for x in batches} == {steps}
    read = [[x for rank in batches for x in rank[s]] for s in range(steps)]
    assert overlap(shards, read) == 0 <= W * max(1, nw) * b


@pytest.fixture
def s3(monkeypatch):
    """moto's S3 server on 127.0.0.1 (tests/growing/s3_server.py), stopped at the end."""
    sys.path.insert(0, str(Path(__file__).parent / "growing"))
    server_module = pytest.importorskip("s3_server")
    yield from server_module.s3_server.__wrapped__(monkeypatch)


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
@pytest.mark.timeout(300)
def test_two_torchrun_nodes_read_a_mixture_of_s3_remotes_as_the_dataset_reads_in_process(s3):
    """Invariant: two torchrun agents (--nnodes=2), DataLoaders of 2 workers, shards read through
    RemoteSource from moto's S3 server: every rank reads exactly what the same dataset reads in
    one process from the same rows, sample for sample (MixtureSampler's sources, whole rows)."""
    from growing.s3_server import rows

    files = [{0: 7, 1: 3, 2: 6}, {10: 5, 11: 4}]  # source -> {file j: rows}
    urls = [s3.put_arrays(f"mix/s{k}", {f"{j:02d}.npy": rows(j, n) for j, n in f.items()})
            for k, f in enumerate(files)]  # fmt: skip
    weights = [2, 1]
    results = run_nodes("sharded_mixture_ranks:read_remote_mixture", 2, 1, urls, s3.options(),
                        weights, 2, timeout=240, pythonpath=[TESTS])  # fmt: skip
    ranks = results[0]["ranks"]
    assert [r["local_rank"] for r in ranks] == [0, 0]
    local = [(list(range(len(f))), list(f.values()),
              lambda i, start=0, f=f: (tuple(x) for x in rows(list(f)[i], list(f.values())[i])[start:].tolist()))
             for f in files]  # fmt: skip
    for r, rank in enumerate(ranks):
        ds = ShardedMixtureDataset(local, weights, 4, num_replicas=2, rank=r, seed=3,
                                   seekable=True, with_source=True, num_workers=2)  # fmt: skip
        ds.set_epoch(1)
        assert [(k, tuple(x)) for k, x in rank["read"]] == list(ds)
        assert len(rank["read"]) == len(ds) > 0


def test_a_read_returning_no_samples_and_a_size_past_int64_are_named():
    """Invariant: a read() that returns None is named with the call, the shard and the value; a
    size past int64 is refused naming the source and the size, never an overflow inside."""
    forgot = lambda shard: None  # noqa: E731 (a read that forgot its return)
    ds = ShardedMixtureDataset([(["a"], [2], forgot)], [1], 2, num_replicas=1, rank=0)
    with pytest.raises(TypeError, match=r"sources\[0\] read should return an iterable of the "
                       r"shard's samples, but got read\('a'\)=None for shard 'a' \(shards\[0\]\)"):  # fmt: skip
        list(ds)
    ds = ShardedMixtureDataset([(["a"], [2], lambda shard, start: None)], [1], 2, num_replicas=1,
                               rank=0, seekable=True)  # fmt: skip
    with pytest.raises(
        TypeError, match=r"but got read\('a', 0\)=None for shard 'a' \(shards\[0\]\)$"
    ):
        list(ds)
    for size in (2**63, 2**70):  # int64's last is 2**63 - 1
        with pytest.raises(ValueError, match=r"^sources\[1\] sizes\[1\] should be < 2\*\*63"):
            ShardedMixtureDataset([(["a"], [2], forgot), (["b", "c"], [1, size], forgot)], [1, 1],
                                  2, num_replicas=1, rank=0)  # fmt: skip


def test_a_step_or_an_epoch_past_int64_positions_is_refused_naming_the_last_that_fits():
    """Invariant: ``batch_at``, ``counts_at`` and ``set_epoch`` refuse a step or an epoch past
    the last whose global positions fit in int64 (below 2**63), naming that last, never a
    wrapped position's answer; far steps below it answer."""
    read = lambda shard: iter(range(4))  # noqa: E731
    ds = ShardedMixtureDataset([(["a"], [4], read), (["b"], [4], read)], [1, 1], 2,
                               num_replicas=1, rank=0, epoch_length=2**62)  # fmt: skip
    last = 2**62 - 1  # a step of 2 positions: the last ends at 2**63 - 1
    assert len(ds.batch_at(2**40)[0]) == 2 and ds.counts_at(2**40).sum() == 2**41
    for step in (last + 1, 2**64):
        for call in (ds.batch_at, ds.counts_at):
            message = (f"step should be <= {last}, the last step whose global positions fit in "
                       f"int64 (< 2**63), but got step={step}")  # fmt: skip
            with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
                call(step)
    ds.set_epoch(1)  # positions [2**62, 2**63): the last that fits
    message = ("epoch should be <= 1, the last epoch whose global positions fit in int64 "
               f"(< 2**63; epoch_length={2**62}), but got epoch=2")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ds.set_epoch(2)


def _named(shards, sizes=(3, 2), key=None):
    """Source 0's shards as given (their names), source 1 one shard ``"x0"``: a dataset."""
    sizes = list(sizes)
    read = lambda shard: iter(range(sizes[shards.index(shard)]))  # noqa: E731
    return ShardedMixtureDataset([(shards, sizes, read), (["x0"], [4], lambda s: iter(range(4)))],
                                 [1, 1], 2, num_replicas=1, rank=0, key=key)  # fmt: skip


def _saved(ds, samples=3):
    it = iter(ds)
    return [next(it) for _ in range(samples)], ds.state_dict()


def test_a_state_names_shards_by_their_path_text_so_path_and_str_resume_alike():
    """Invariant: a shard's name in a state is its path as text: a state saved with ``str``
    paths, loaded where the same shards are ``Path`` objects (or NumPy ids where they were ints),
    resumes exactly the rest of the uninterrupted run."""
    whole = list(_named(["d/s0", "d/s1"]))
    head, state = _saved(_named(["d/s0", "d/s1"]))
    again = _named([Path("d/s0"), Path("d/s1")])
    again.load_state_dict(state)
    assert head + list(again) == whole

    _, state = _saved(_named([0, 1]))
    _named(list(np.arange(2))).load_state_dict(state)  # np.int64(0) names the shard 0


class _Shard:
    """A shard object printed with its address (``object.__repr__``): new in every process."""

    def __init__(self, path: str) -> None:
        self.path = path


def test_shards_whose_repr_holds_an_address_are_refused_at_once_and_key_names_them():
    """Invariant: shards whose repr is not the same in every process are refused when the
    dataset is built, naming the source, the shard and ``key=``; with ``key=`` (one for every
    source, or one or None per source) new objects of the same names resume exactly."""
    with pytest.raises(ValueError, match=r"^sources\[0\] shards\[0\] should have a repr that is "
                       r"the same in every process \(a saved state names the shards by it\), but "
                       r"got <.*_Shard object at 0x\w+>: pass key=, a function that names a shard "
                       r"\(key=lambda shard: shard.path\), or stable names \(paths, URLs, ids\)$"):  # fmt: skip
        _named([_Shard("s0"), _Shard("s1")])
    shards = [_Shard("s0"), _Shard("s1")]
    whole = list(_named(shards, key=[lambda s: s.path, None]))
    head, state = _saved(_named(shards, key=[lambda s: s.path, None]))
    again = _named([_Shard("s0"), _Shard("s1")], key=[lambda s: s.path, None])
    again.load_state_dict(state)
    assert head + list(again) == whole
    with pytest.raises(TypeError, match=r"^key\(shard\) should return a str, but got "
                       r"key\(sources\[0\] shards\[0\]\)=0 of type int$"):  # fmt: skip
        _named(["a", "b"], key=lambda s: 0)
    for key in ("path", [None]):
        with pytest.raises(TypeError, match=rf"^key should be a callable, key\(shard\) -> str, "
                           rf"or one \(or None\) per source, but got key={re.escape(repr(key))} for 2 sources$"):  # fmt: skip
            _named(["a", "b"], key=key)


def test_two_shards_of_one_name_are_two_shards_a_shard_is_its_place_in_the_list():
    """Invariant: names only check that a resumed list is the saved one; a shard is its index,
    so two shards of equal name are both read, whole, and the state resumes exactly."""
    read = lambda shard, start=0: iter(range(start, 3))  # noqa: E731 (both named "a")

    def ds():
        return ShardedMixtureDataset([(["a", "a"], [3, 3], read), (["b"], [3], read)],
                                     [3, 1], 2, num_replicas=1, rank=0, seekable=True,
                                     shuffle=False, with_source=True)  # fmt: skip

    whole = list(ds())
    assert [x for k, x in whole if k == 0][:6] == [0, 1, 2, 0, 1, 2]
    head, state = _saved(ds(), 5)
    again = ds()
    again.load_state_dict(state)
    assert head + list(again) == whole


@pytest.mark.parametrize(
    ("shards", "sizes", "message"),
    [
        (["d/s1", "d/s0"], (3, 2), "sources[0] lists the same shards as when saved, in another order: list them in one order in every run (e.g. sorted(glob(...)), not a directory's order)"),
        (["e/s0", "e/s1"], (3, 2), "sources[0] shards are not the ones saved (shards[0] was 'd/s0' when saved, but is 'e/s0' now): if they are the same shards, name them alike in every run with key=, e.g. key=lambda shard: os.path.basename(shard)"),
        (["d/s0", "e/s1"], (3, 2), "sources[0] shards are not the ones saved: if they are the same shards, name them alike in every run with key=, e.g. key=lambda shard: os.path.basename(shard)"),
        (["d/s0", "d/s1", "d/s2"], (3, 2, 1), "sources[0] had 2 shards when saved, but has 3 now"),
        (["d/s0", "d/s1"], (2, 3), "sources[0] sizes are not the ones saved, for the same shards"),
    ],
)  # fmt: skip
def test_a_state_of_other_shards_is_refused_naming_the_source_and_what_differs(
    shards, sizes, message
):
    """Invariant: a state loaded where a source's shards are another list (reordered, renamed,
    one more) or of other sizes is refused, naming the source and what differs, never read."""
    _, state = _saved(_named(["d/s0", "d/s1"]))
    for load in (lambda ds: ds.load_state_dict(state), lambda ds: ds.load_state_dict([state])):
        with pytest.raises(ValueError) as info:
            load(_named(shards, sizes))
        assert str(info.value) == f"state does not match this dataset: {message}"


def test_a_state_of_another_number_of_sources_or_a_tampered_fingerprint_is_refused():
    """Invariant: the state's ``sources`` must be one fingerprint per source, as saved: another
    count, a fingerprint that is not one, or no list at all is refused, naming the value."""
    _, state = _saved(_named(["d/s0", "d/s1"]))
    one = ShardedMixtureDataset([(["d/s0"], [5], lambda s: iter(range(5)))], [1], 2,
                                num_replicas=1, rank=0)  # fmt: skip
    cases = [
        (one, state, "sources held 2 sources when saved, but holds 1 now"),
        (_named(["d/s0", "d/s1"]), {**state, "sources": ["x", state["sources"][1]]},
         "sources[0] was 'x' when saved"),
        (_named(["d/s0", "d/s1"]), {**state, "sources": [{"shards": 2}, state["sources"][1]]},
         "sources[0] was {'shards': 2} when saved"),
        (_named(["d/s0", "d/s1"]), {**state, "sources": [state["sources"][0], "x"]},
         "sources[1] was 'x' when saved"),  # the first source as saved: the next checked too
        (_named(["d/s0", "d/s1"]), {**state, "sources": "abc"},
         "sources was 'abc' when saved, not a list of each source's fingerprint"),
    ]  # fmt: skip
    for ds, bad, message in cases:
        with pytest.raises(ValueError) as info:
            ds.load_state_dict(bad)
        assert str(info.value) == f"state does not match this dataset: {message}"


def test_names_of_mixed_types_a_text_with_at_0x_and_a_long_name_are_named_and_compared():
    """Invariant: names that do not compare (ints and texts) are still checked as a set (a
    reordered list is named as such); a text is a name even where it reads `` at 0x``; a
    state keeps a source's first name to 200 characters (its size stays ``O(1)`` a source)."""
    _, state = _saved(_named([0, "d/s1"]))
    with pytest.raises(ValueError, match=r"sources\[0\] lists the same shards as when saved, in "
                       r"another order"):  # fmt: skip
        _named(["d/s1", 0]).load_state_dict(state)
    with pytest.raises(ValueError, match=r"sources\[0\] shards are not the ones saved: "):
        _named([0, "d/s2"]).load_state_dict(state)
    _named(["talk at 0x10.tar", "b"])  # a path, not an address
    long = "d/" + "x" * 300
    state = _named([long, "b"]).state_dict()
    assert state["sources"][0]["first"] == repr(long)[:200]


@pytest.mark.parametrize("seekable", [False, True])
def test_a_read_yielding_more_samples_than_its_size_names_the_source_the_shard_and_the_size(
    seekable,
):
    """Invariant: a shard that yields past its size is refused once its size is read, naming its
    source, its index and its size (never read on into the next shard's place)."""
    more = lambda shard, start=0: iter(range(start, {"a.tar": 3, "b.tar": 6}[shard]))  # noqa: E731
    ds = ShardedMixtureDataset([(["a.tar", "b.tar"], [3, 4], more)], [1], 4, num_replicas=1,
                               rank=0, seekable=seekable, shuffle=False)  # fmt: skip
    with pytest.raises(ValueError, match=r"^sources\[0\]: shard 'b.tar' \(shards\[1\]\) yielded "
                       r"more than 4 samples, but sizes\[1\]=4: read\(shard"):  # fmt: skip
        list(ds)


@st.composite
def leftover_pieces(draw: st.DrawFn) -> list[list[int]]:
    """``[pass, a, b]`` pieces as an elastic resume gathers them: disjoint within a pass
    (touching ones and empty ones included), of 1 to 3 passes, in any order."""
    pieces = []
    for p in range(draw(st.integers(1, 3))):
        cuts = sorted(draw(st.sets(st.integers(0, 12), max_size=6)))
        pieces += [[p, a, b] for a, b in pairwise(cuts) if draw(st.booleans())]
        pieces += [[p, c, c] for c in draw(st.lists(st.integers(0, 12), max_size=2))]
    return draw(st.permutations(pieces))


@given(leftover_pieces())
def test_leftovers_merge_into_the_same_samples_sorted_non_empty_and_joined(pieces):
    """Invariant: the state's leftovers (``_merge``) hold exactly the ``(pass, offset)`` pairs of
    their pieces, as sorted non-empty intervals, two of one pass never touching: as few as the
    samples allow (the state's ``O(K x old readers)``)."""
    from distsampling.streaming.mixture_sources import _merge

    merged = _merge([list(p) for p in pieces]).tolist()
    expected = Counter((p, o) for p, a, b in pieces for o in range(a, b))
    assert Counter((p, o) for p, a, b in merged for o in range(a, b)) == expected
    assert all(a < b for _, a, b in merged) and merged == sorted(merged)
    assert all(not (p == q and b == c) for (p, _, b), (q, c, _) in pairwise(merged))


@given(seeds, st.integers(1, 7), st.integers(1, 3))
def test_with_shuffle_pass_p_of_source_k_reads_its_shards_in_the_order_keyed_by_seed_k_and_p(
    seed, n, passes
):
    """Invariant: with shuffle, pass ``P`` of source ``k`` reads its shards in the order
    ``torch.randperm(n)`` draws from a generator seeded with the first 15 hex digits of
    ``sha256(f"{seed}/{k}/{P}")``: the same in every process and on every rank, a new one each
    pass (one reader reads a pass whole, so its shards come out in that order)."""
    import hashlib

    import torch

    ds = make([[2], [1] * n], [1, 1], 1, seed=seed)
    got, e = [], 0
    while len(got) < passes * n:
        ds.set_epoch(e)
        got += [x[1] for x in ds if x[0] == 1]
        e += 1
    for p in range(passes):
        key = int(hashlib.sha256(f"{seed}/1/{p}".encode()).hexdigest()[:15], 16)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(key)).tolist()
        assert got[p * n : (p + 1) * n] == order


@given(args, elastic_world_sizes, mixture_worker_counts, st.data())
def test_with_seekable_every_sample_drawn_after_an_elastic_resume_is_yielded(
    a, world2, workers2, data
):
    """Invariant: with seekable, the readers of an elastic resume read their leftovers (pieces
    of the passes in flight, gaps between them) by opening each piece at its start: every
    sample drawn is yielded, none read and skipped over."""
    shards, weights = a["mix"]
    old = make(shards, weights, a["b"], a["world"], 0, seekable=True, shuffle=False)
    steps = data.draw(st.integers(0, len(rank_batches(old, a["workers"]))))
    states = _states_at(old, a["workers"], steps)
    new = [make(shards, weights, a["b"], world2, r, seekable=True, shuffle=False)
           for r in range(world2)]  # fmt: skip
    yielded = 0
    for ds in new:
        ds.load_state_dict(states)
        yielded += sum(len(batch) for batch in rank_batches(ds, workers2))
    drawn = sum(n for ds in new for _, _, read in ds.sources for _, _, n in read.opens)
    assert drawn == yielded


def test_len_after_an_elastic_resume_counts_what_was_read_before_it_and_the_next_epoch_does_not():
    """Invariant: resumed on another micro-batch, len() is the samples read before the resume
    plus those the new grid yields in the epoch; after set_epoch(next) it is what that epoch
    yields, nothing carried over."""
    old = make(SHARDS, [1, 1, 1], 2)
    states = _states_at(old, 0, 2)  # 2 batches of 2 read
    new = make(SHARDS, [1, 1, 1], 3)
    new.load_state_dict(states)
    length = len(new)
    assert length == 4 + sum(map(len, rank_batches(new, 0)))
    new.set_epoch(1)
    length = len(new)
    assert length == sum(map(len, rank_batches(new, 0))) > 0


@pytest.mark.parametrize(
    "change", ["not a dict", "an empty list", "a field missing", "another kind"]
)
def test_a_state_that_is_not_this_datasets_is_refused_in_its_words(change):
    """Invariant: a non-dict, an empty list of states, a state without one of its fields, or
    another class's state is refused with ValueError: "state should be a ShardedMixtureDataset state_dict(), but got ..."."""
    ds = make(SHARDS, [1, 1, 1], 2)
    state = ds.state_dict()
    if change == "not a dict":
        state = 5
    elif change == "an empty list":
        state = []
    elif change == "a field missing":
        del state["counts"]
    else:
        state["kind"] = "ShardedIterableDataset"
    with pytest.raises(ValueError, match=r"^state should be a ShardedMixtureDataset "
                                         r"state_dict\(\), but got "):  # fmt: skip
        make(SHARDS, [1, 1, 1], 2).load_state_dict(state)


@pytest.mark.parametrize("epoch", [-1, 2**62 + 1])
def test_set_epoch_refuses_an_epoch_outside_0_to_2_to_the_62_naming_it(epoch):
    """Invariant: set_epoch takes any epoch in [0, 2**62] (the last one too, where an epoch's
    positions fit in int64: an epoch of one position) and refuses one outside it with
    ValueError naming ``epoch`` and the value."""
    ds = make(SHARDS, [1, 1, 1], 2, epoch_length=1)
    ds.set_epoch(2**62)
    assert ds.epoch == 2**62
    ds.set_epoch(2**62 - 1)  # kept exactly (int64, never a float's 24 or 53 bits)
    assert ds.epoch == 2**62 - 1
    with pytest.raises(ValueError, match=rf"^epoch should be in the interval \[0, {2**62}\], "
                                         rf"but got epoch={epoch}$"):  # fmt: skip
        ds.set_epoch(epoch)


def test_a_state_of_another_seed_or_epoch_is_refused_naming_both_values():
    """Invariant: a state saved with another seed is refused naming the seed then and now; one
    saved in another epoch says which set_epoch to call first."""
    state = make(SHARDS, [1, 1, 1], 2).state_dict()
    with pytest.raises(ValueError, match=r"^state does not match this dataset: seed was 0 when "
                                         r"saved, but is 1 now$"):  # fmt: skip
        make(SHARDS, [1, 1, 1], 2, seed=1).load_state_dict(state)
    later = make(SHARDS, [1, 1, 1], 2)
    later.set_epoch(1)
    with pytest.raises(ValueError, match=r"^state does not match this dataset: epoch was 0 when "
                                         r"saved, but is 1 now: call set_epoch\(0\) first$"):  # fmt: skip
        later.load_state_dict(state)


def _said(run, *args) -> list[str]:
    """The messages of the FrameworkWarnings that ``run(*args)`` raised."""
    from distsampling.guards import FrameworkWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(*args)
    return [str(w.message) for w in caught if w.category is FrameworkWarning]


def _dispatcher(dataset, processes: int):
    """accelerate's own ``DataLoaderDispatcher`` over ``dataset``, its process count set to
    ``processes`` and its broadcasts left out (``distributed_type=None``), so that its code runs
    in this one process (the loop matrix runs it on 2 real processes)."""
    import types

    from accelerate.data_loader import DataLoaderDispatcher

    dispatcher = DataLoaderDispatcher(dataset, batch_size=2)
    if processes > 1:
        dispatcher.state = types.SimpleNamespace(
            num_processes=processes, process_index=0, distributed_type=None, device="cpu"
        )
    return dispatcher


def dispatcher_refuses(share, whole) -> None:
    """Under accelerate's real ``DataLoaderDispatcher`` ``set_epoch``: one process sets the
    epoch of ``share`` (rank 0 of 2) silently; two are refused in these exact words; ``whole``
    (the share of one rank) is read silently. Both sharded datasets hold to it."""
    name = type(share).__name__
    assert _said(_dispatcher(share, 1).set_epoch, 1) == [] and share.epoch == 1  # no split
    with pytest.raises(RuntimeError) as err:
        _dispatcher(share, 2).set_epoch(3)
    assert str(err.value) == (
        f"{name} already holds one rank's share (of num_replicas=2), and "
        "accelerate's DataLoaderDispatcher would read it on process 0 only and split its batches "
        "over 2 processes: each process would train on about 1/2 of its share. Prepare the model "
        "and optimizer, not the loader (model, optimizer = accelerator.prepare(model, "
        "optimizer)), and iterate the loader as built"
    )
    assert _said(_dispatcher(whole, 2).set_epoch, 2) == [] and whole.epoch == 2


def iterable_shard_sets_the_epoch_and_refuses_reading(share) -> None:
    """Under accelerate's ``IterableDatasetShard`` (2 processes): its ``set_epoch`` sets the
    epoch of ``share`` and is not refused; its ``__iter__`` is, before a sample, naming it."""
    from accelerate.data_loader import IterableDatasetShard

    shard = IterableDatasetShard(share, batch_size=2, num_processes=2, process_index=0)
    shard.set_epoch(1)
    assert share.epoch == 1
    words = f"^{type(share).__name__} already holds one rank's share .* accelerate's "
    with pytest.raises(RuntimeError, match=words + "IterableDatasetShard would split it again"):
        next(iter(shard))


def test_accelerates_dispatcher_setting_the_epoch_of_a_ranks_share_is_refused():
    """Invariant: accelerate's ``DataLoaderDispatcher`` (``prepare(loader)`` over an iterable
    dataset) calls ``set_epoch`` on every process, then reads the dataset on process 0 only and
    splits its batches: a rank's share of a mixture would train each process on a part of it.
    Its real ``set_epoch`` raises on every process, before any batch (so no process waits in its
    broadcast), naming the dispatcher and the split; one process, or a share of one rank, is
    read without a word."""
    pytest.importorskip("accelerate")
    dispatcher_refuses(make([[3, 2], [4]], [1, 1], 2, world=2, rank=0),
                       make([[3, 2], [4]], [1, 1], 2, world=1, rank=0))  # fmt: skip


def test_one_workers_state_on_another_world_batch_or_workers_is_refused_naming_both():
    """Invariant: one worker's state resumes the same topology only: loaded on another
    ``num_replicas`` or ``batch_size``, or into a dataset declared with another
    ``num_workers``, it is refused naming the values then and now, and what to load instead."""
    state = make(SHARDS, [1, 1, 1], 2, 2, 0, num_workers=2).state_dict()
    then = r"state was saved on num_replicas=2, batch_size=2, but is loaded on "
    how = r": load every worker's state of one rank at once \(load_state_dict\(loader_dataset_states\(loader_state\)\)\)$"
    with pytest.raises(ValueError, match="^" + then + "num_replicas=3, batch_size=2" + how):
        make(SHARDS, [1, 1, 1], 2, 3, 0).load_state_dict(state)
    with pytest.raises(ValueError, match="^" + then + "num_replicas=2, batch_size=4" + how):
        make(SHARDS, [1, 1, 1], 4, 2, 0).load_state_dict(state)
    with pytest.raises(ValueError, match=r"^state was saved with num_workers=2, but this dataset "
                                         r"has num_workers=3" + how):  # fmt: skip
        make(SHARDS, [1, 1, 1], 2, 2, 0, num_workers=3).load_state_dict(state)
    make(SHARDS, [1, 1, 1], 2, 2, 0).load_state_dict(state)  # undeclared: takes the state's


def test_consumed_after_workers_read_an_epoch_whose_loaded_step_this_process_read_counts_from_its_start():
    """Invariant: a state loaded inside a step, whose rest the main process read itself, hands
    the next loader's workers nothing (they read the epoch from its first step): then
    ``state_dict(consumed=k)`` is ``k`` samples into the epoch, and more than the epoch holds is
    refused, naming its size."""

    def fresh():
        return make(SHARDS, [1, 3, 2], 2, 2, 1, num_workers=2)

    whole = list(fresh())  # the main process reads what the two workers would, in step order
    mid = fresh()
    next(iter(mid))
    ds = fresh()
    ds.load_state_dict(mid.state_dict())  # inside step 0: slot 1
    assert list(ds) == whole[1:]
    ds.set_epoch(0)  # the epoch again, on purpose
    list(DataLoader(ds, batch_size=2, num_workers=2))  # the workers: the epoch from its start
    for k in (0, 3):
        again = fresh()
        again.load_state_dict(ds.state_dict(consumed=k))
        assert list(again) == whole[k:]
    with pytest.raises(ValueError, match=rf"^consumed should be in the interval \[0, {len(whole)}\], "
                                         rf"but got consumed={len(whole) + 1}$"):  # fmt: skip
        ds.state_dict(consumed=len(whole) + 1)


@pytest.mark.parametrize(("saved_on", "loaded_on"), [(0, 0), (1, 0), (0, 1)])
def test_right_after_a_load_the_state_is_the_loaded_place_and_consumed_counts_from_it(
    saved_on, loaded_on
):
    """Invariant: before any ``iter()``, a loaded dataset saves the place it loaded (on this
    rank: a state of another rank of the run is this rank's at the same step, its counts
    counted again), and ``consumed=`` counts from that place: 0 is the same place, more is
    refused until an ``iter()`` hands samples out, and then resumes exactly the rest of the
    uninterrupted run."""
    whole = list(make(SHARDS, [1, 1, 1], 2, 2, loaded_on))
    saver = make(SHARDS, [1, 1, 1], 2, 2, saved_on)
    it = iter(saver)
    for _ in range(5):
        next(it)
    saved = saver.state_dict()  # step 2, slot 1 (slot 0: source 2 on rank 0, 0 on rank 1)
    here = make(SHARDS, [1, 1, 1], 2, 2, loaded_on)
    here.load_state_dict(saved)
    mine = make(SHARDS, [1, 1, 1], 2, 2, loaded_on)
    it = iter(mine)
    for _ in range(5):
        next(it)
    assert here.state_dict() == mine.state_dict()  # this rank's place and counts
    assert here.state_dict(consumed=0) == mine.state_dict()
    with pytest.raises(ValueError, match=r"^consumed should be <= 0 \(samples handed out\): the "
                                         r"latest iter\(\) handed out 0, but got consumed=1$"):  # fmt: skip
        here.state_dict(consumed=1)
    it = iter(here)
    assert [next(it) for _ in range(3)] == whole[5:8]  # the loop uses 2 of them
    at_7 = here.state_dict(consumed=2)
    again = make(SHARDS, [1, 1, 1], 2, 2, loaded_on)
    again.load_state_dict(at_7)
    assert list(again) == whole[7:]


def test_until_exhausted_epoch_0_starts_at_step_0_while_a_schedule_keeps_the_source_unread():
    """Invariant: epoch 0 begins at step 0 even when the source that ends epochs is not read in
    the first steps (a schedule gives it weight 0 until step 3): those steps belong to epoch 0,
    and its batches are its one reader's windows of the tree from step 0 on."""
    weights = [(0, [1, 0, 0]), (3, [1, 1, 1])]
    ds = make(SHARDS, weights, 2, 1, 0, until_exhausted=1, with_source=True)
    got = list(ds)
    totals = [sum(s) for s in SHARDS]
    ks = reader_sources(totals, weights, 2, 1, 1, 0, range(len(got) // 2))
    assert [k for k, _ in got] == ks
    assert [k for k, _ in got[:6]] == [0] * 6 and len(ds) == len(got)


def test_before_the_loaders_workers_are_known_a_rank_has_one_reader():
    """Invariant: with ``num_workers`` not given and no ``iter()`` yet, each rank is one reader
    (the main process): ``counts_at`` and the state are those of ``num_workers=1``; the first
    ``iter()`` in a loader's workers fixes the readers."""
    undeclared, one = (
        make(SHARDS, [1, 2, 1], 2, 2, 0),
        make(SHARDS, [1, 2, 1], 2, 2, 0, num_workers=1),
    )
    assert undeclared.counts_at(3).tolist() == one.counts_at(3).tolist()
    assert [len(rank) for rank in undeclared.counts_at(3)] == [1, 1]
    assert undeclared.state_dict()["readers"] == [0]
    next(undeclared.iter_worker(0, 2))
    assert [len(rank) for rank in undeclared.counts_at(3)] == [2, 2]


def test_under_accelerates_dispatcher_every_pass_is_refused_by_set_epoch_before_a_batch():
    """Invariant: accelerate's ``DataLoaderDispatcher`` calls ``set_epoch`` and then iterates
    the dataset in each pass: every pass is refused there, by ``set_epoch``, before the
    dispatcher reads a sample (``__iter__``'s check looks for accelerate's per-process shards
    only, and is never reached)."""
    pytest.importorskip("accelerate")
    share = make([[3, 2], [4]], [1, 1], 2, world=2, rank=0)
    dispatcher = _dispatcher(share, 2)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="accelerate's DataLoaderDispatcher would read it"):
            next(iter(dispatcher))
        assert share._progress is None, "the dispatcher began a pass"


def test_in_the_main_process_the_epoch_is_the_latest_set_epochs_before_the_next_iter():
    """Invariant: in the main process (``num_workers=0``) ``epoch`` and ``len()`` follow
    ``set_epoch`` at once, also after a pass was read (only a worker keeps the epoch it started
    with)."""
    ds = make(SHARDS, [1, 2, 1], 2, 2, 0)
    list(ds)
    ds.set_epoch(1)
    assert ds.epoch == 1
    other = make(SHARDS, [1, 2, 1], 2, 2, 0)
    other.set_epoch(1)
    assert len(ds) == len(other) and list(ds) == list(other)


def _rows(batches) -> list[list[list[int]]]:
    """A loader's batches of ``(source, shard, offset)`` samples, as lists (collated: a tensor
    per field)."""
    return [[t.tolist() for t in batch] for batch in batches]


def _slow_start(_: int) -> None:
    import time

    time.sleep(0.5)  # the main process's set_epoch lands before the worker's iter()


def test_a_workers_first_iter_reads_the_epoch_set_when_its_loader_started_and_later_ones_the_latest():
    """Invariant: a loader's worker reads the epoch that was set when the loader started it,
    even if ``set_epoch`` comes before the worker's first ``iter()``; a persistent worker's
    next passes read each epoch set since."""

    def epoch_of(e):
        ds = make(SHARDS, [1, 2, 1], 2, 2, 0, num_workers=1)
        ds.set_epoch(e)
        return _rows(DataLoader(ds, batch_size=2))

    ds = make(SHARDS, [1, 2, 1], 2, 2, 0, num_workers=1)
    it = iter(DataLoader(ds, batch_size=2, num_workers=1, worker_init_fn=_slow_start))
    ds.set_epoch(1)  # late: the loader started its worker at epoch 0
    assert _rows(it) == epoch_of(0)
    ds = make(SHARDS, [1, 2, 1], 2, 2, 0, num_workers=1)
    loader = DataLoader(ds, batch_size=2, num_workers=1, persistent_workers=True)
    for e in range(3):
        ds.set_epoch(e)
        assert _rows(loader) == epoch_of(e)


@pytest.mark.parametrize("consumed", [1, 3, 5])
def test_after_an_elastic_resume_a_consumed_count_inside_a_step_resumes_any_rank_exactly(consumed):
    """Invariant: on the grid an elastic resume started (1 rank -> 2), rank 1's place after
    ``consumed`` samples (inside a step: its slots read so far counted from rank 1's own
    positions of the new grid) resumes exactly the rest of its uninterrupted run."""
    states = _states_at(make(SHARDS, [1, 1, 1], 2, 1, 0), 0, 3)

    def resumed():
        ds = make(SHARDS, [1, 1, 1], 2, 2, 1)
        ds.load_state_dict(states)
        return ds

    whole, ds = list(resumed()), resumed()
    it = iter(ds)
    head = [next(it) for _ in range(consumed)]
    again = resumed()
    again.load_state_dict(ds.state_dict(consumed=consumed))
    assert head + list(again) == whole


def test_the_repr_names_the_sources_their_totals_and_every_setting():
    """Invariant: ``repr`` says how many sources and their totals, and every setting that
    decides the stream."""
    ds = make(SHARDS, [1, 2, 1], 2, 3, 1, seed=5, until_exhausted=2)
    assert repr(ds) == (
        "ShardedMixtureDataset(3 sources, totals=[7, 7, 6], batch_size=2, num_replicas=3, rank=1, "
        "seed=5, shuffle=True, seekable=False, until_exhausted=2)"
    )


@pytest.mark.parametrize(("b", "consumed"), [(2, 0), (2, 1), (2, 3), (3, 1), (3, 5)])
def test_consumed_after_set_epoch_of_a_new_epoch_counts_from_that_epochs_start(b, consumed):
    """Invariant: after ``set_epoch`` of another epoch and before its ``iter()``,
    ``state_dict(consumed=k)`` is ``k`` samples into the new epoch (the loop's previous
    ``iter()`` was of the epoch before): loaded, it reads the rest of the new epoch. The whole
    epoch may be consumed, not one sample more."""
    ds = make(SHARDS, [1, 2, 1], b, 2, 1)
    it = iter(ds)
    for _ in range(3):
        next(it)
    ds.set_epoch(1)
    state = ds.state_dict(consumed=consumed)
    fresh = make(SHARDS, [1, 2, 1], b, 2, 1)
    fresh.set_epoch(1)
    whole = list(fresh)
    again = make(SHARDS, [1, 2, 1], b, 2, 1)
    again.set_epoch(1)
    again.load_state_dict(state)
    assert list(again) == whole[consumed:]
    end = ds.state_dict(consumed=len(whole))  # the epoch read through: fresh's place now
    assert (end["step"], end["slot"]) == (fresh.state_dict()["step"], 0)
    with pytest.raises(ValueError, match=rf"^consumed should be in the interval \[0, {len(whole)}\], "
                                         rf"but got consumed={len(whole) + 1}$"):  # fmt: skip
        ds.state_dict(consumed=len(whole) + 1)


def test_the_main_process_asked_for_its_place_while_workers_read_the_epoch_is_told_how():
    """Invariant: a fresh dataset's place is its epoch's first step, slot 0; once a loader's
    workers read the epoch, the main process (which holds none of their progress) refuses
    ``state_dict()`` without ``consumed=``, naming StatefulDataLoader and ``consumed=``; the
    next epoch, not read yet, has a place again, and once this process read some of it before
    the workers, the refusal names its own ``iter()`` as behind them."""
    ds = make(SHARDS, [1, 2, 1], 2, 2, 1, num_workers=1)
    why = (
        "state_dict() was called in the main process, but DataLoader workers (num_workers=1) read "
        "this epoch ({}){}: resume through torchdata's StatefulDataLoader (it asks every worker), "
        "or pass consumed= (the samples the loop used)"
    )

    def refusal() -> str:
        with pytest.raises(RuntimeError) as info:
            ds.state_dict()
        return str(info.value)

    state = ds.state_dict()
    assert (state["step"], state["slot"], state["readers"]) == (0, 0, [0])
    list(DataLoader(ds, batch_size=2, num_workers=1))
    assert refusal() == why.format(0, "")
    ds.set_epoch(1)
    state = ds.state_dict()
    assert (state["epoch"], state["slot"]) == (1, 0) and state["step"] == _epoch_steps(ds)[0]
    next(iter(ds))  # this process reads some of epoch 1 itself, then the workers read it
    ds.set_epoch(1)  # the epoch again, on purpose
    list(DataLoader(ds, batch_size=2, num_workers=1))
    assert refusal() == why.format(1, " after this process's own iter()")


def test_the_main_process_reading_for_two_readers_saves_a_whole_step_as_the_next_one():
    """Invariant: with ``num_workers=2`` declared and read in the main process (every reader's
    steps, in step order), a state taken after a whole step is the next step, slot 0; loaded,
    it reads the rest exactly."""
    ds = make(SHARDS, [1, 2, 1], 2, 2, 1, num_workers=2)
    whole = list(make(SHARDS, [1, 2, 1], 2, 2, 1, num_workers=2))
    it = iter(ds)
    head = [next(it) for _ in range(2)]
    state = ds.state_dict()
    assert (state["step"], state["slot"]) == (1, 0)
    again = make(SHARDS, [1, 2, 1], 2, 2, 1, num_workers=2)
    again.load_state_dict(state)
    assert head + list(again) == whole


def test_an_epoch_with_no_step_has_no_sample_to_consume():
    """Invariant: an epoch shorter than where its next global batch starts (``epoch_length=1``,
    a global batch of 4: epoch 1 has no step) has ``len()`` 0; ``consumed=0`` is its place and
    ``consumed=1`` is refused naming the interval ``[0, 0]``."""
    ds = make(SHARDS, [1, 2, 1], 2, 2, 1, epoch_length=1)
    ds.set_epoch(1)
    assert len(ds) == 0
    assert ds.state_dict(consumed=0)["step"] == 1
    with pytest.raises(ValueError, match=r"^consumed should be in the interval \[0, 0\], but got "
                                         r"consumed=1$"):  # fmt: skip
        ds.state_dict(consumed=1)
    assert list(ds) == []


def test_an_elastic_resume_before_any_draw_is_a_fresh_run_on_the_new_grid():
    """Invariant: resumed on another grid at step 0 (nothing drawn), every source starts at
    pass 0 (an int, as JSON writes it) with no leftovers, and the dataset reads what a fresh
    one on that grid reads."""
    import json

    ds = make(SHARDS, [1, 2, 1], 2, 1, 0)
    ds.load_state_dict(_states_at(make(SHARDS, [1, 2, 1], 2, 2, 0), 0, 0))
    g = ds.state_dict()["generation"]
    assert json.dumps([g["first"], g["read"], g["lead"]]) == "[[0, 0, 0], [0, 0, 0], [[], [], []]]"
    assert list(ds) == list(make(SHARDS, [1, 2, 1], 2, 1, 0))


def test_a_state_is_a_json_ready_copy_with_exactly_its_fields():
    """Invariant: ``state_dict()`` holds exactly its documented fields (its generation too),
    survives JSON unchanged, and is a copy: changing it (its sources, its generation's lead and
    first) changes nothing in the dataset or in its next state."""
    import copy
    import json

    ds = make(SHARDS, [1, 2, 1], 2, 1, 0)
    ds.load_state_dict(_states_at(make(SHARDS, [1, 2, 1], 2, 2, 0), 0, 2))  # a lead to copy
    state = ds.state_dict()
    assert sorted(state) == ["counts", "epoch", "generation", "kind", "num_workers", "past",
                             "rank", "readers", "seed", "shuffle", "slot", "sources", "step",
                             "version", "worker"]  # fmt: skip
    assert sorted(state["generation"]) == ["batch_size", "before", "epoch", "first", "lead",
                                           "num_replicas", "num_workers", "origin", "read",
                                           "start"]  # fmt: skip
    assert json.loads(json.dumps(state)) == state
    kept = copy.deepcopy(state)
    state["sources"][0]["set"] = "changed"
    state["generation"]["first"][0] = -1
    for lead in state["generation"]["lead"]:
        for interval in lead:
            interval[0] = -1
    assert any(state["generation"]["lead"]) and ds.state_dict() == kept


@pytest.mark.parametrize(
    ("world", "b", "workers"), [(1, 3, 0), (3, 2, 0), (2, 3, 2), (2, 2, 3), (2, 30, 0), (1, 60, 2)]
)
def test_batch_at_names_the_source_shard_and_offset_every_rank_reads_at_each_step(
    world, b, workers
):
    """Invariant: ``batch_at(step)[r]`` is exactly rank ``r``'s micro-batch of that step, as
    ``(source, shard, offset)``, read by no one (over passes, and with loader workers as
    readers): what every rank's loader yields at that step; with micro-batches of 30 and 60 too,
    where a step holds many slots of one source on one rank (each its own count, in order)."""
    weights = [1, 3, 2]
    declared = workers or None
    per_rank = [rank_batches(make(SHARDS, weights, b, world, r, num_workers=declared, epoch_length=60), workers)
                for r in range(world)]  # fmt: skip
    probe = make(SHARDS, weights, b, world, 0, num_workers=declared, epoch_length=60)
    steps = min(map(len, per_rank))
    assert steps * b * world > 2 * sum(map(sum, SHARDS))  # past a pass of every source
    for s in range(steps):
        assert probe.batch_at(s) == [per_rank[r][s] for r in range(world)]


def test_an_elastic_resume_keeps_the_epoch_length_given():
    """Invariant: resumed elastically (2 ranks x micro-batch 2 -> 3 x 3, past its sources' total), a dataset whose epoch is
    ``epoch_length`` positions (not its sources' total) ends that epoch where the
    uninterrupted run would: what the old ranks read plus what the new ones read is the epoch,
    whole global batches of each grid."""
    old = [make(SHARDS, [1, 3, 2], 2, 2, r, epoch_length=60) for r in range(2)]
    read = sum(len(rank_batches(ds, 0)[:12]) * 2 for ds in old)  # 12 steps of 2 x 2: past 20
    states = _states_at(old[0], 0, 12)
    new = [make(SHARDS, [1, 3, 2], 3, 3, r, epoch_length=60) for r in range(3)]
    for ds in new:
        ds.load_state_dict(states)
    rest = sum(len(list(ds)) for ds in new)
    assert read == 48 and read + rest == 48 + 2 * 9  # positions 48.. 60 in global batches of 9


def test_a_main_process_that_read_its_whole_epoch_is_placed_at_the_next_steps_first_slot():
    """Invariant: after the main process reads its whole epoch (``num_workers=0``), its place is
    the step after the last one, slot 0 (not one sample into it); so ``consumed=`` may be at
    most what it handed out, and the error names that count."""
    ds = make(SHARDS, [1, 1, 1], 2, 2, 0)
    whole = list(ds)
    state = ds.state_dict()
    assert (state["step"], state["slot"]) == (len(ds._steps(0)), 0) and len(whole) == 10
    assert ds.state_dict(consumed=10) == state
    with pytest.raises(ValueError, match=r"^consumed should be <= 10 \(samples handed out\): the "
                                         r"latest iter\(\) handed out 10, but got consumed=11$"):  # fmt: skip
        ds.state_dict(consumed=11)


def test_counts_at_a_step_before_the_grid_is_refused_naming_it():
    """Invariant: ``counts_at(step)`` counts from the grid's first step: a step before it is
    refused, naming ``step`` and the value (0 on a fresh grid; after an elastic resume at step
    12, the new grid's first step)."""
    ds = make(SHARDS, [1, 1, 1], 2, 2, 0)
    with pytest.raises(ValueError, match=r"^step should be >= 0, but got step=-1$"):
        ds.counts_at(-1)
    assert ds.counts_at(0).tolist() == [[[0, 0, 0]], [[0, 0, 0]]]
    states = _states_at(make(SHARDS, [1, 3, 2], 2, 2, 0, epoch_length=60), 0, 12)
    new = make(SHARDS, [1, 3, 2], 3, 3, 0, epoch_length=60)
    new.load_state_dict(states)
    start = new._gen["start"]
    assert start > 0 and new.counts_at(start).tolist() == [[[0, 0, 0]]] * 3
    with pytest.raises(ValueError, match=rf"^step should be >= {start}, but got step={start - 1}$"):
        new.counts_at(start - 1)


def test_accelerates_iterable_shard_may_set_the_epoch_and_is_refused_where_it_reads():
    """Invariant: accelerate's ``IterableDatasetShard`` (``dispatch_batches=False``) forwards
    ``set_epoch`` to the dataset before each pass: that sets the epoch and is not refused (the
    dispatcher alone is refused there); its ``__iter__`` is, before a sample, naming it."""
    pytest.importorskip("accelerate")
    share = make([[3, 2], [4]], [1, 1], 2, world=2, rank=0)
    iterable_shard_sets_the_epoch_and_refuses_reading(share)
    assert share._progress is None, "a sample was read"


def resumed_rank_batches(loaded, workers: int, b: int) -> list[list]:
    """A rank's loader batches after a resume: each DataLoader worker loads the state into its
    own copy (``loaded()``), and the loader takes their batches in turn."""
    per = []
    for w in range(workers):
        out = list(loaded().iter_worker(w, workers))
        per.append([out[i : i + b] for i in range(0, len(out), b)])
    return [per[i % len(per)][i // len(per)] for i in range(sum(map(len, per)))]


@given(args, st.data())
def test_a_main_process_state_at_a_step_boundary_resumes_under_workers_exactly(a, data):
    """Invariant: a state the main process saved at any step boundary (``num_workers`` declared),
    or at the start of an epoch before any worker ran (``num_workers`` not declared, as when a
    plain DataLoader's workers read the last epoch and the main process saves at the next
    one), loaded into each worker's copy, yields exactly the rest of the rank's uninterrupted
    loader batches."""
    shards, weights = a["mix"]
    workers, b = max(1, a["workers"]), a["b"]
    declared = data.draw(st.booleans())
    rank = data.draw(st.integers(0, a["world"] - 1))
    kw = {
        "seed": a["seed"],
        "seekable": a["seekable"],
        "num_workers": workers if declared else None,
    }

    def fresh() -> ShardedMixtureDataset:
        ds = make(shards, weights, b, a["world"], rank, **kw)
        ds.set_epoch(a["epochs"] - 1)
        return ds

    whole = [x for batch in rank_batches(fresh(), workers) for x in batch]
    k = data.draw(st.integers(0, len(fresh()) // b)) if declared else 0
    main = fresh()
    if k:
        it = iter(main)
        head = [next(it) for _ in range(k * b)]
    else:
        head = []
    state = main.state_dict()

    def loaded() -> ShardedMixtureDataset:
        ds = fresh()
        ds.load_state_dict(state)
        return ds

    assert head + [x for batch in resumed_rank_batches(loaded, workers, b) for x in batch] == whole


def test_iter_worker_refuses_a_worker_or_a_count_out_of_range_naming_it():
    """Invariant: ``iter_worker(worker, num_workers)`` refuses a negative count and a worker
    outside ``[0, num_workers - 1]`` (``[0, 0]`` for the main process), in these exact words."""
    ds = make(SHARDS, [1, 3, 2], 2, num_workers=2)
    for call, words in (
        ((-1, 2), "worker should be in the interval [0, 1], but got worker=-1"),
        ((2, 2), "worker should be in the interval [0, 1], but got worker=2"),
        ((0, -1), "num_workers should be >= 0, but got num_workers=-1"),
        ((1, 0), "worker should be in the interval [0, 0], but got worker=1"),
        ((1,), "worker should be in the interval [0, 0], but got worker=1"),
    ):
        with pytest.raises(ValueError) as err:
            next(ds.iter_worker(*call))
        assert str(err.value) == words


def test_by_default_iter_worker_is_the_main_process_reading_every_reader():
    """Invariant: ``iter_worker()`` is worker 0 of 0, the main process: what ``iter()`` yields
    with no DataLoader workers, after which the main process's ``state_dict()`` is its own
    (no worker read the epoch)."""
    by_default, main = make(SHARDS, [1, 3, 2], 2, 2, 1), make(SHARDS, [1, 3, 2], 2, 2, 1)
    assert list(by_default.iter_worker()) == list(main)
    assert by_default.state_dict() == main.state_dict()


def test_a_state_of_another_epoch_than_the_one_read_is_dropped():
    """Invariant: a state loaded, then ``set_epoch`` to another epoch before reading, is not
    used: the epoch set is read from its start."""
    ds = make(SHARDS, [1, 3, 2], 2)
    it = iter(ds)
    next(it)
    resumed = make(SHARDS, [1, 3, 2], 2)
    resumed.load_state_dict(ds.state_dict())
    resumed.set_epoch(1)
    epoch_1 = make(SHARDS, [1, 3, 2], 2)
    epoch_1.set_epoch(1)
    assert list(resumed) == list(epoch_1)


def test_a_main_process_state_dict_while_workers_read_the_epoch_is_refused():
    """Invariant: once DataLoader workers read an epoch, the main process does not know their
    places: its ``state_dict()`` for that epoch is refused in these exact words."""
    words = (
        "state_dict() was called in the main process, but DataLoader workers (num_workers=2) "
        "read this epoch (0): resume through torchdata's StatefulDataLoader (it asks every "
        "worker), or pass consumed= (the samples the loop used)"
    )
    ds = make(SHARDS, [1, 3, 2], 2, num_workers=2)
    batches = iter(DataLoader(ds, batch_size=2, num_workers=2))
    next(batches)
    with pytest.raises(RuntimeError) as err:
        ds.state_dict()
    assert str(err.value) == words
    del batches
    ds = make(SHARDS, [1, 3, 2], 2, num_workers=2)
    worker = copy.copy(ds)  # a worker's copy, in this process: the shared memory is shared
    next(worker.iter_worker(1, 2))
    with pytest.raises(RuntimeError) as err:
        ds.state_dict()
    assert str(err.value) == words
    # the mark is the epoch + 1, exactly for any epoch set_epoch takes (a float's 24 bits would
    # not do; an epoch past 2**24 takes too long to reach to show it by reading)
    assert ds._in_workers.dtype == torch.int64


def test_a_sources_fingerprint_holds_its_count_names_set_sizes_and_first_name():
    """Invariant: each source's entry in a state is ``{"shards", "names", "set", "sizes",
    "first"}``: shards alike with other sizes differ in ``sizes`` alone; a source with no
    shards has none first."""
    sources = make([[3, 2], [4], []], [1, 1, 0], 2).state_dict()["sources"]
    assert [set(s) for s in sources] == [{"shards", "names", "set", "sizes", "first"}] * 3
    assert [s["shards"] for s in sources] == [2, 1, 0] and sources[2]["first"] is None
    other = make([[3, 1], [4], []], [1, 1, 0], 2).state_dict()["sources"][0]
    assert {k for k in other if other[k] != sources[0][k]} == {"sizes"}


def _elastic_words(states) -> str:
    """The error of loading ``states`` on rank 0 of 2 (another topology)."""
    with pytest.raises(ValueError) as info:
        make(SHARDS, [1, 3, 2], 2, 2, 0, shuffle=False).load_state_dict(states)
    return str(info.value)


def test_an_elastic_resume_refuses_what_is_not_every_worker_state_of_one_run_at_a_boundary():
    """Invariant: worker states loaded on another topology are refused, in these words, unless
    they are every worker's state of one rank of one run (workers 0..n-1, one generation, one
    num_workers), each at a step boundary, with the counts the mixture gives at that step."""
    states = _states_at(make(SHARDS, [1, 3, 2], 2, shuffle=False), 2, 3)  # steps 0, 2 | 1
    every = "state should list every worker's state of one rank (workers 0..n-1, one run), "
    assert _elastic_words(states[1:]) == every + "but got workers [1]"
    assert _elastic_words([states[0], states[0]]) == every + "but got workers [0, 0]"
    other_loader = {**states[1], "num_workers": 3}  # the same run, read by another loader
    assert _elastic_words([states[0], other_loader]) == every + "but got workers [0, 1]"
    other_run = {**states[1], "generation": {**states[1]["generation"], "start": 1}}
    assert _elastic_words([states[0], other_run]) == every + "but got workers [0, 1]"
    inside = make(SHARDS, [1, 3, 2], 2, shuffle=False)
    next(inside.iter_worker(0, 2))  # worker 0 read one sample of its step: slot 1
    assert _elastic_words([inside.state_dict(), states[1]]) == (
        "state should be at a step boundary to resume on another topology, but got slots "
        "[1, 0] of batch_size=2"
    )
    drew = states[0]["counts"][0]  # reader 0 reads steps 0, 2, 4: at step 3 as at step 4
    at = make(SHARDS, [1, 3, 2], 2, shuffle=False, num_workers=2).counts_at(3)
    assert drew == at[0][0].tolist()
    more = [c + (k == 1) for k, c in enumerate(drew)]
    assert _elastic_words([{**states[0], "counts": [more]}, states[1]]) == (
        f"state of worker 0 says reader 0 drew counts={more}, but the mixture gives {drew} at "
        "step 3: a state of another run"
    )
    # a reader without its counts is never paired off in silence (zip's own words)
    assert "zip() argument 2 is shorter" in _elastic_words([{**states[0], "counts": []}, states[1]])


@pytest.mark.parametrize("world2", [2, 3])
def test_a_state_saved_before_any_read_resumes_on_another_world_as_its_fresh_run(world2):
    """Invariant: a dataset's state before it read anything (no num_workers known yet: one
    reader), loaded on another world, reads what that world's fresh datasets read."""
    fresh = make(SHARDS, [1, 3, 2], 2, shuffle=False).state_dict()
    for r in range(world2):
        resumed = make(SHARDS, [1, 3, 2], 2, world2, r, shuffle=False)
        resumed.load_state_dict([fresh])
        assert rank_batches(resumed, 0) == rank_batches(make(SHARDS, [1, 3, 2], 2, world2, r,
                                                             shuffle=False), 0)  # fmt: skip


def test_an_elastic_resume_keeps_the_sources_after_an_empty_one():
    """Invariant: a source with no sample (weight 0) between two others is carried through an
    elastic resume: the new ranks read the later source's passes intact (each sample once
    before any twice)."""
    shards = [[3, 0, 4], [0], [6]]
    old = make(shards, [1, 0, 2], 2, shuffle=False)
    read = [x for batch in rank_batches(old, 0)[:2] for x in batch]
    states = _states_at(make(shards, [1, 0, 2], 2, shuffle=False), 0, 2)
    new = [make(shards, [1, 0, 2], 2, 2, r, shuffle=False) for r in range(2)]
    for ds in new:
        ds.load_state_dict(states)
    read += [x for ds in new for batch in rank_batches(ds, 0) for x in batch]
    times = Counter(o for k, _, o in read if k == 2)
    assert set(times) == set(range(6)) and max(times.values()) - min(times.values()) <= 1


@pytest.mark.parametrize("workers", [0, 2])
def test_an_elastic_resume_reads_the_same_whatever_the_dataset_read_before_it(workers):
    """Invariant: a dataset that read an epoch to its end, then loads every worker's state of
    another run at the next epoch's first step, reads what a fresh dataset loading them reads:
    where its own last epoch ended is never carried into the loaded run."""
    other = make(SHARDS, [1, 3, 2], 2, shuffle=False)
    other.set_epoch(1)
    states = _states_at(other, 2, 0)  # 2 workers, at epoch 1's first step
    used = make(SHARDS, [1, 3, 2], 2, shuffle=False)
    rank_batches(used, workers)  # epoch 0, to its end
    used.set_epoch(1)
    used.load_state_dict(states)
    fresh = make(SHARDS, [1, 3, 2], 2, shuffle=False)
    fresh.set_epoch(1)
    fresh.load_state_dict(states)
    assert rank_batches(used, workers) == rank_batches(fresh, workers)


@pytest.mark.parametrize(
    ("weights", "kwargs", "error", "message"),
    [
        ([1, 1, 1], {"until_exhausted": 3}, ValueError, "until_exhausted should be in the interval [0, 2], but got until_exhausted=3"),
        ([1, 1, 1], {"until_exhausted": -1}, ValueError, "until_exhausted should be in the interval [0, 2], but got until_exhausted=-1"),
        ([1, 1, 1], {"until_exhausted": "0"}, TypeError, "until_exhausted should be an integer, but got until_exhausted='0' of type str"),
        ([1, 1, 1], {"until_exhausted": 0, "epoch_length": 10}, ValueError, "epoch_length should be None with until_exhausted (the source's passes are the epochs), but got epoch_length=10"),
        ([1, 0, 1], {"until_exhausted": 1}, ValueError, "until_exhausted=1 names a source whose last weight is 0: it would never run out"),
        (np.array([1.0, 0.0, 1.0]), {"until_exhausted": 1}, ValueError, "until_exhausted=1 names a source whose last weight is 0.0: it would never run out"),
        ([(0, [1, 1, 1]), (4, (1, 0, 1))], {"until_exhausted": 1}, ValueError, "until_exhausted=1 names a source whose last weight is 0: it would never run out"),
        ([1, 1, 1], {"num_workers": -1}, ValueError, "num_workers should be >= 0, but got num_workers=-1"),
        ([1, 1, 1], {"num_workers": "2"}, TypeError, "num_workers should be an integer, but got num_workers='2' of type str"),
    ],
)  # fmt: skip
def test_until_exhausted_and_num_workers_refuse_what_they_cannot_mean_naming_the_value(
    weights, kwargs, error, message
):
    """Invariant: ``until_exhausted`` names a source by its index, never with an epoch length of
    its own, and never one whose last weight is 0 (it would never run out; the weight as given,
    a numpy one as a Python number); ``num_workers`` is a count >= 0 (0: the main process, one
    reader, as 1)."""
    with pytest.raises(error) as info:
        make(SHARDS, weights, 2, **kwargs)
    assert str(info.value) == message
    main, one = make(SHARDS, [1, 1, 1], 2, num_workers=0), make(SHARDS, [1, 1, 1], 2, num_workers=1)
    assert list(main) == list(one)


@pytest.mark.parametrize(("name", "value"), [("seekable", "yes"), ("with_source", 1)])
def test_seekable_and_with_source_refuse_a_value_that_is_not_a_bool_naming_it(name, value):
    """Invariant: ``seekable`` and ``with_source`` take a bool only, and name themselves."""
    with pytest.raises(TypeError) as info:
        make(SHARDS, [1, 1, 1], 2, **{name: value})
    assert str(info.value) == f"{name} should be a boolean value, but got {name}={value!r}"


@pytest.mark.parametrize(
    ("epoch", "world3", "workers3"), [(0, 3, 0), (0, 2, 2), (1, 3, 0), (1, 2, 2)]
)
def test_two_elastic_resumes_in_one_epoch_keep_passes_intact_lengths_and_sources(
    epoch, world3, workers3
):
    """Invariant: an epoch resumed twice (1 rank to step 2, then 2 ranks to step 5, then
    ``world3`` ranks with ``workers3`` workers each) reads every source's passes intact (no
    sample twice before every sample once: what all read, and what the passes in flight have
    left, is every pass up to the first not begun, in epoch 0); each last rank's ``len()`` is the samples every
    rank read before on the earlier grids plus what it reads; its sources are
    ``MixtureSampler``'s after the same two elastic resumes; the epoch's last global batch
    holds its last position, as on one grid (each grid's origin carried on)."""
    b, weights, totals = 2, [1, 3, 2], [sum(s) for s in SHARDS]
    first = make(SHARDS, weights, b, shuffle=False)
    first.set_epoch(epoch)
    reads = [x for batch in rank_batches(first, 0)[:2] for x in batch]
    states = _states_at(first, 0, 2)
    middle = [make(SHARDS, weights, b, 2, r, shuffle=False) for r in range(2)]
    for ds in middle:
        ds.set_epoch(epoch)
        ds.load_state_dict(states)
    steps = 5 - 2  # the middle grid's steps, from the resume to the next one
    reads += [x for ds in middle for batch in rank_batches(ds, 0)[:steps] for x in batch]
    later = _states_at(middle[0], 0, steps)
    last = [make(SHARDS, weights, b, world3, r, shuffle=False) for r in range(world3)]
    start = later[0]["step"]  # the last grid's first step: its trees start there
    for r, ds in enumerate(last):
        ds.set_epoch(epoch)
        ds.load_state_dict(later)
        batches = rank_batches(ds, workers3)
        assert len(ds) == (2 + steps) * b + sum(map(len, batches))
        reads += [x for batch in batches for x in batch]
        grid = range(start, start + len(batches))
        assert [x[0] for batch in batches for x in batch] == reader_sources(
            totals, weights, b, world3, max(1, workers3), r, grid, start=start
        )
    closing = make(SHARDS, weights, 1, shuffle=False)  # where the passes in flight stand
    closing.set_epoch(epoch)
    closing.load_state_dict(_states_at(last[0], workers3, len(rank_batches(last[0], workers3))))
    gen, reads = closing.state_dict()["generation"], Counter(reads)
    # the epoch ends where it would on one grid: its last global batch holds position (e + 1)·L
    L = first.mixture.epoch_length
    assert (epoch + 1) * L <= gen["origin"] < (epoch + 1) * L + world3 * b
    if epoch == 0:  # epoch 0: the passes begin with it
        assert_every_pass_whole(SHARDS, reads, gen)


@pytest.mark.parametrize("consumed", [0, 1, 3])
def test_a_consumed_count_right_after_an_elastic_resume_counts_from_the_loaded_step(consumed):
    """Invariant: ``state_dict(consumed=k)`` of a dataset just resumed elastically, before its
    ``iter()`` (a plain DataLoader's main process, whose workers read ahead), is ``k`` samples
    past the loaded step: loaded, it reads the rest of the resumed run."""
    states = _states_at(make(SHARDS, [1, 1, 1], 2, 1, 0), 0, 3)

    def resumed():
        ds = make(SHARDS, [1, 1, 1], 2, 2, 1)
        ds.load_state_dict(states)
        return ds

    whole = list(resumed())
    again = resumed()
    again.load_state_dict(resumed().state_dict(consumed=consumed))
    assert whole[:consumed] + list(again) == whole


@pytest.mark.parametrize("steps", range(0, 11, 2))
def test_an_elastic_resume_near_a_pass_boundary_leaves_every_pass_whole(steps):
    """Invariant: 6 readers (3 ranks x 2 workers) of a small, heavy source cross its pass
    boundaries at different steps (an epoch of 60 samples, 10 steps, reads it 18 times); resumed after ``steps`` steps on 2 ranks x 3 workers, what
    all read plus what the passes in flight leave is every pass up to the first not begun,
    each sample once a pass, whichever passes the readers were in."""
    shards, weights, b = [[2], [3, 1], [5]], [3, 1, 1], 2
    old = [make(shards, weights, b, 3, r, shuffle=False, epoch_length=60) for r in range(3)]
    reads = Counter(x for ds in old for batch in rank_batches(ds, 2)[:steps] for x in batch)
    states = _states_at(old[0], 2, steps)
    new = [make(shards, weights, b, 2, r, shuffle=False, epoch_length=60) for r in range(2)]
    for ds in new:
        ds.load_state_dict(states)
    after = [rank_batches(ds, 3) for ds in new]
    reads += Counter(x for batches in after for batch in batches for x in batch)
    closing = make(shards, weights, 1, shuffle=False, epoch_length=60)
    closing.load_state_dict(_states_at(new[0], 3, len(after[0])))
    gen = closing.state_dict()["generation"]
    assert_every_pass_whole(shards, reads, gen)


def test_an_elastic_resume_in_a_later_epoch_counts_only_that_epochs_reads_in_len():
    """Invariant: a run resumed elastically in epoch 0 and again in epoch 1 counts in ``len()``
    only what epoch 1 read before its own resume, never epoch 0's."""
    b = 2
    first = make(SHARDS, [1, 3, 2], b, shuffle=False)
    states = _states_at(first, 0, 2)
    two = make(SHARDS, [1, 3, 2], b, 2, 0, shuffle=False)
    two.load_state_dict(states)
    rank_batches(two, 0)  # the rest of epoch 0
    two.set_epoch(1)
    later = _states_at(two, 0, 3)  # 3 steps of epoch 1
    three = make(SHARDS, [1, 3, 2], b, 3, 0, shuffle=False)
    three.set_epoch(1)
    three.load_state_dict(later)
    assert len(three) == 3 * b + sum(map(len, rank_batches(three, 0)))


# --- passes stay whole at any step: the readers' spread is bounded (closed forms, long runs) ----


def _stretches(weights) -> int:
    return len(_entries(weights))


@given(args, st.integers(0, 20_000))
def test_at_any_step_the_readers_spread_is_bounded_and_overlap_is_at_most_readers_times_b(a, step):
    """Invariant: at any step (up to 20,000, counted in closed form by counts_at, nothing read)
    the readers' counts of a source differ by at most ``D = stretches × (b + 4·bound())``, and
    no reader has read into a segment of a source that another reader has not finished (every
    reader's last draw is in a segment at or before the one every reader's next draw is in):
    the reads are passes read whole and one pass read in part, so the overlap of two passes
    (``Σ max(0, reads - P - 1)``) is 0, at most ``readers × b``, whatever the spread."""
    shards, weights = a["mix"]
    nw = max(1, a["workers"])
    ds = make(shards, weights, a["b"], a["world"], num_workers=nw, shuffle=False)
    totals = [sum(s) for s in shards]
    bound = MixtureSampler(totals, weights, a["b"], a["world"], 0, layout="per_rank").bound()
    D = _stretches(weights) * (a["b"] + 4 * bound)
    counts = np.array(ds.counts_at(step)).reshape(-1, len(shards))  # (R, K)
    for k, T in enumerate(totals):
        c = counts[:, k]
        assert c.max() - c.min() <= D
        if not T:
            continue
        last = [ds._draw(k, q, x - 1)[0] for q, x in enumerate(c.tolist()) if x]
        ahead = []  # the pass of each reader's next draw (none where it never draws again)
        for q, x in enumerate(c.tolist()):
            with contextlib.suppress(IndexError):
                ahead.append(ds._draw(k, q, x)[0])
        assert max(last, default=-1) <= min(ahead, default=max(last, default=-1))


@given(args, st.integers(1, 300), st.integers(0, 300), st.data())
def test_across_an_elastic_resume_the_overlap_of_two_passes_is_0_at_most_readers_times_b(
    a, before, after, data
):
    """Invariant: a run read for ``before`` steps on ``W`` ranks × ``n`` workers, resumed
    elastically at that step boundary on ``W'`` × ``n'`` (micro-batch ``b'``) and read for
    ``after`` steps more, has at every step boundary an overlap of two passes of 0, at most
    ``readers × b`` on either grid: the new grid reads the unread rest of the pass in flight
    first, in its own global order, then the next passes."""
    shards, weights = a["mix"]
    nw, b, W = a["workers"], a["b"], a["world"]
    W2, nw2, b2 = (
        data.draw(st.integers(1, 4)),
        data.draw(mixture_worker_counts),
        data.draw(mixture_batch_sizes),
    )
    L = before * W * b + after * W2 * b2  # positions of the epoch: both parts, as global batches
    old = [make(shards, weights, b, W, r, epoch_length=L, num_workers=max(1, nw)) for r in range(W)]
    n = max(1, nw)  # worker w yields steps w, w + n, ...: each one's below `before`
    per = [[list(islice(ds.iter_worker(w, nw), len(range(w, before, n)) * b)) for w in range(n)]
           for ds in old]  # fmt: skip
    steps = [[x for r in range(W) for x in per[r][s % n][s // n * b : (s // n + 1) * b]]
             for s in range(before)]  # fmt: skip
    states = _states_at(old[0], nw, before)
    new = [make(shards, weights, b2, W2, r, epoch_length=L, num_workers=max(1, nw2))
           for r in range(W2)]  # fmt: skip
    for ds in new:
        ds.load_state_dict(states)
    assert all(y > x for lead in new[0]._gen["lead"] for _, x, y in lead.tolist())
    rest = [rank_batches(ds, nw2) for ds in new]
    steps += [[x for rank in rest for x in rank[s]] for s in range(min(map(len, rest)))]
    assert overlap(shards, steps) == 0 <= min(W * max(1, nw) * b, W2 * max(1, nw2) * b2)


@given(args, st.integers(1, 60), st.integers(0, 4000), st.data())
def test_what_a_stretch_leaves_at_any_draw_is_every_draw_counted_once(a, before, G, data):
    """Invariant: on a grid whose leftovers ``L`` came from an elastic resume, once the readers
    have made the first ``G`` draws of source ``k``'s global order (``reach``), the leftovers
    and first fresh pass they leave (``_rest``, what a schedule's change or another resume
    carries on) account for every draw once: ``first'·T - L' = first·T - L + G``, the
    leftovers one pass's non-empty intervals (none at a segment's edge, ``G - L ≡ 0 mod T``)."""
    shards, weights = a["mix"]
    nw = max(1, a["workers"])
    old = make(shards, weights, a["b"], a["world"], num_workers=nw, epoch_length=10**6)
    states = _states_at(old, a["workers"], before)
    new = make(shards, weights, data.draw(mixture_batch_sizes), data.draw(st.integers(1, 4)),
               num_workers=data.draw(st.integers(1, 3)), epoch_length=10**6)  # fmt: skip
    new.load_state_dict(states)
    for k, T in enumerate(new.totals):
        _, starts, first = new._plan(k, 0)
        if not T or k not in new._grid.pieces[0][2].paths:
            continue
        g = G if data.draw(st.booleans()) else int(starts[-1]) + (G // T) * T  # an edge, or not
        left, nxt = new._rest(k, 0, new._grid.reach(k, 0, g))
        assert nxt * T - int((left[:, 2] - left[:, 1]).sum()) == first * T - int(starts[-1]) + g
        assert (left[:, 2] > left[:, 1]).all() and len(set(left[:, 0].tolist())) <= 1


def test_the_spread_of_the_aliasing_topologies_stays_what_it_was_at_step_400():
    """Invariant: in the topologies where workers reading every n-th step aliased with the
    tree's periods (the spread grew 8x from step 400 to step 3,200), the readers' spread at
    step 3,200 is no more than at any step: at most ``b + 4·bound()``."""
    for world, b, nw, weights in [(2, 3, 2, [0.5, 0.3, 0.2]),
                                  (8, 4, 2, [0.5, 0.25, 0.125, 0.0625, 0.0625]),
                                  (16, 2, 4, [1, 2, 3, 4, 5, 6])]:  # fmt: skip
        shards = [[100]] * len(weights)
        ds = make(shards, weights, b, world, num_workers=nw)
        bound = MixtureSampler([100] * len(weights), weights, b, world, 0).bound()
        for step in (400, 3200, 25600):
            counts = np.array(ds.counts_at(step)).reshape(-1, len(weights))
            assert (counts.max(0) - counts.min(0)).max() <= b + 4 * bound


# --- a resume never rewrites the past; a later change of the mix continues exactly -----------


def test_a_state_whose_weights_disagree_before_its_step_is_refused_in_mixture_samplers_words():
    """Invariant: a state saved at step 5 under weights ``[.6, .3, .1]`` loaded into a dataset
    of ``[.2, .3, .5]`` is refused naming the step and both mixes, in the words MixtureSampler
    uses for the same load; so is one saved on another rank (Lightning's route)."""
    totals = [sum(s) for s in SHARDS]
    ds = make(SHARDS, [0.6, 0.3, 0.1], 2, 2, 0, num_workers=1)
    it = ds.iter_worker(0, 0)
    for _ in range(5 * 2):
        next(it)
    state = ds.state_dict()
    mix = MixtureSampler(totals, [0.6, 0.3, 0.1], 2, 2, 0)
    it = iter(mix)
    for _ in range(5 * 2):
        next(it)
    with pytest.raises(ValueError) as theirs:
        MixtureSampler(totals, [0.2, 0.3, 0.5], 2, 2, 0).load_state_dict(mix.state_dict())
    for rank in (0, 1):
        with pytest.raises(ValueError) as ours:
            make(SHARDS, [0.2, 0.3, 0.5], 2, 2, rank, num_workers=1).load_state_dict(state)
        assert str(ours.value) == str(theirs.value)
        assert "before step 5" in str(ours.value) and "0.6, 0.3, 0.1" in str(ours.value)


@given(args, st.data())
def test_a_change_of_the_mix_at_or_after_the_saved_step_resumes_as_its_uninterrupted_run(a, data):
    """Invariant: a worker's state saved at any sample of the epoch under weights ``w`` loads into
    a dataset whose schedule changes the mix at the saved step or later, and yields exactly
    what that schedule's uninterrupted run yields from there (a reader's runs follow its own
    counts: nothing of the later mix is needed to place what was read)."""
    shards, _ = a["mix"]
    K = len(shards)
    before = [1] * K
    after = data.draw(st.lists(st.integers(0, 3), min_size=K, max_size=K))
    after = [w if sum(shards[k]) else 0 for k, w in enumerate(after)]
    before = [w if sum(shards[k]) else 0 for k, w in enumerate(before)]
    assume(sum(after) > 0 and sum(before) > 0)
    worker = data.draw(st.integers(0, max(0, a["workers"] - 1)))
    kw = {"seed": a["seed"], "seekable": a["seekable"], "num_workers": max(1, a["workers"])}
    ds = make(shards, before, a["b"], a["world"], 0, **kw)
    whole = list(ds.iter_worker(worker, a["workers"]))
    stop = data.draw(st.integers(0, len(whole)))
    it = ds.iter_worker(worker, a["workers"])
    for _ in range(stop):
        next(it)
    state = ds.state_dict()
    # a schedule changes at step 1 or later: saved at step 0, the change is at its step or after
    change = max(1, state["step"] + (state["slot"] > 0)) + data.draw(st.integers(0, 3))
    schedule = [(0, before), (change, after)]
    again = make(shards, schedule, a["b"], a["world"], 0, **kw)
    again.load_state_dict(state)
    uninterrupted = list(make(shards, schedule, a["b"], a["world"], 0, **kw).iter_worker(
        worker, a["workers"]))  # fmt: skip
    assert whole[:stop] == uninterrupted[:stop]
    assert list(again.iter_worker(worker, a["workers"])) == uninterrupted[stop:]


# --- the loader's batches are the steps ----------------------------------------------------


def as_list(batch: list) -> list:
    """The loader's collate: the batch's samples as they are (a module function: workers pickle
    it)."""
    return list(batch)


class Delegating(IterableDataset):
    """A user's wrapper dataset: its ``__iter__`` delegates to the mixture's (``yield from``)."""

    def __init__(self, inner: ShardedMixtureDataset) -> None:
        self.inner = inner

    def __iter__(self) -> Iterator:
        yield from self.inner


@pytest.mark.parametrize("wrap", [lambda ds: ds, Delegating], ids=["dataset", "wrapped"])
@pytest.mark.parametrize("workers", [0, 2])
def test_a_loader_batch_size_other_than_the_datasets_is_refused_naming_both(workers, wrap):
    """Invariant: a DataLoader whose batch_size is not the dataset's (a batch would hold parts of
    two steps, or part of one) is refused at its first batch, naming both numbers and the fix;
    through a wrapper dataset that delegates to it with ``yield from`` too."""
    for loader_b, what in ((4, "parts of two or more steps"), (1, "a part of a step")):
        ds = wrap(make(SHARDS, [1, 2, 1], 2, num_workers=max(1, workers)))
        with pytest.raises(Exception) as info:
            next(iter(DataLoader(ds, batch_size=loader_b, num_workers=workers, collate_fn=as_list)))
        assert (
            f"the DataLoader's batch_size should be 2, this dataset's batch_size (a batch is a "
            f"step's micro-batch), but got batch_size={loader_b}: each batch would hold {what}, "
            "and no batch would be a step's mix; pass DataLoader(dataset, batch_size=2)"
        ) in str(info.value)
    ds = make(SHARDS, [1, 2, 1], 2, num_workers=max(1, workers))
    assert len(list(DataLoader(ds, batch_size=2, num_workers=workers))) == len(ds) // 2


def test_batch_size_none_with_two_workers_is_warned_that_steps_interleave():
    """Invariant: ``DataLoader(batch_size=None)`` with one reader hands out the steps' samples in
    order, silently; read in the worker with 2 readers, it warns that 2 steps interleave. A
    loader batching at the dataset's size says nothing, with any workers, and only torch's
    ``fetch`` frame is read as the loader's (another frame's batch size is not its)."""
    ds = make(SHARDS, [1, 2, 1], 2, num_workers=2)
    loader = DataLoader(ds, batch_size=None)
    assert len(list(loader)) == len(ds)
    one_at_a_time = type("Fetch", (), {"auto_collation": False})()
    batching = type("Fetch", (), {"auto_collation": True})()

    def fetch_one(samples, fetcher=one_at_a_time, index=None):  # torch's fetcher, by name
        def fetch(self=fetcher, possibly_batched_index=index):
            return next(samples)

        return fetch()

    with pytest.warns(UserWarning, match=r"^DataLoader\(batch_size=None\) hands out samples one "
                      r"at a time, taking one from each of its 2 workers in turn: the samples of 2 "
                      r"steps interleave; pass batch_size=2 \(a batch a step\) to keep each "
                      r"step's micro-batch whole$"):  # fmt: skip
        fetch_one(ds._watched(iter([1, 2]), 2))

    def collect(samples, self=batching, possibly_batched_index=(0, 1, 2)):  # not torch's fetch
        return next(samples)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fetch_one(ds._watched(iter([1, 2]), 1)) == 1  # one worker: the steps in order
        assert fetch_one(ds._watched(iter([1, 2]), 2), batching, [0, 1]) == 1  # whole steps
        assert collect(ds._watched(iter([1, 2]), 2)) == 1  # another frame: nothing checked


def test_a_source_with_fewer_shards_than_readers_unseekable_is_warned_with_its_bound():
    """Invariant: without seekable, a source of fewer non-empty shards than readers warns once,
    naming the source, the shards, the readers, the bound ``1 + R·(largest - 1)/T`` on what is
    drawn per sample yielded, and ``seekable=True``; seekable, or enough shards, says nothing."""
    shards = [[10, 10], [5] * 8]
    ds = make(shards, [1, 1], 2, 4, 0, num_workers=1)
    with pytest.warns(UserWarning) as record:
        list(ds)
    assert [str(w.message) for w in record] == [
        "sources[0] has 2 shards for 4 readers (ranks x workers) and seekable=False: a reader "
        "whose run of a pass starts inside a shard draws that shard's head and drops it, up to "
        "2.8x the samples it yields (1 + readers x (largest shard - 1) / samples a pass); pass "
        "seekable=True, with read(shard, start), to draw only what is yielded"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(make(shards, [1, 1], 2, 4, 0, num_workers=1, seekable=True))
        list(make(shards, [1, 1], 2, 2, 0, num_workers=1))


@pytest.mark.parametrize(
    ("first", "weight", "said"),
    [
        ([12], 1, "sources[0] has 1 shard for 4 readers (ranks x workers) and seekable=False: "),
        ([6, 0, 0, 6], 1, "sources[0] has 2 shards for 4 readers (ranks x workers) and "),
        ([2, 2], 1, "sources[0] has 2 shards for 4 readers (ranks x workers) and "),
        ([1, 1], 1, None),  # shards of one sample: no run starts inside one
        ([1, 1, 1, 10], 1, None),  # as many shards as readers
        ([], 0, None),  # no shard (weight 0)
    ],
)
def test_the_unseekable_warning_counts_non_empty_shards_and_is_said_once(first, weight, said):
    """Invariant: on 4 readers (4 ranks x 1 worker), a source is warned of when its non-empty
    shards (one is "1 shard") are fewer than the readers and one holds 2 samples or more: empty
    shards count for nothing, shards of one sample, as many shards as readers, or none, say
    nothing; and a dataset says it once, whatever the epochs read."""
    ds = make([first, [5] * 8], [weight, 1], 2, 4, 0, num_workers=1)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for epoch in range(3):
            ds.set_epoch(epoch)
            list(ds)
    assert [str(w.message).startswith(said) for w in record] == ([True] if said else [])


# --- a look at the data in the main process, then a DataLoader --------------------------------


@pytest.mark.parametrize(("workers", "persistent"), [(0, False), (2, False), (2, True)])
@settings(settings.get_profile("costly"))  # DataLoader workers: processes
@given(data=st.data(), peek=peek_lengths, batches=loop_batch_counts)
def test_after_a_look_a_loaders_state_resumes_exactly_or_names_the_workers_and_the_way_out(
    workers, persistent, data, peek, batches
):
    """Invariant: peek ``peek`` samples in the main process (num_workers not given), train on
    ``batches`` batches of a DataLoader (0 or 2 workers, persistent or not): the workers read as
    the loader's readers (the look fixed nothing); ``state_dict()`` with no ``consumed`` refuses
    once workers read, naming them, StatefulDataLoader and ``consumed=``; ``state_dict(consumed
    =c)``, any ``c`` the loop used, resumes exactly: what the loop used then what a fresh dataset
    resumed from it yields is the uninterrupted epoch (read by the main process; by the same
    loader where no batch came, since no worker may have begun)."""
    shards, weights = data.draw(sharded_mixtures(), label="mix")
    b, world = data.draw(mixture_batch_sizes, label="b"), data.draw(st.integers(1, 2))

    def fresh():
        return make(shards, weights, b, world, world - 1, seed=1)

    def read(ds, n):
        return DataLoader(ds, batch_size=b, num_workers=n, persistent_workers=persistent and n > 0,
                          collate_fn=as_list)  # fmt: skip

    epoch = [x for batch in read(fresh(), workers) for x in batch]
    ds = fresh()
    list(islice(iter(ds), peek))
    ds.set_epoch(0)  # the epoch's start, as the loop sets it
    it = iter(read(ds, workers))
    got = [x for batch in islice(it, batches) for x in batch]
    if workers and got:
        with pytest.raises(RuntimeError) as info:
            ds.state_dict()
        for words in (f"DataLoader workers (num_workers={workers})", "StatefulDataLoader",
                      "consumed="):  # fmt: skip
            assert words in str(info.value)
    c = data.draw(st.integers(0, len(got)), label="consumed")
    state = json.loads(json.dumps(ds.state_dict(consumed=c)))
    del it
    resumed = fresh()
    resumed.load_state_dict(state)
    # a state saved before any batch came may precede every worker's start (a race): it then
    # fixes no readers, as a fresh epoch, and the loader that resumes it fixes them, read as the
    # loop read it; once a batch came, the state fixes them and the main process reads on alike
    unsure = bool(workers) and not got
    loader = read(resumed, workers) if unsure else DataLoader(resumed, batch_size=None)
    rest = [x for batch in loader for x in (batch if unsure else [batch])]
    assert [tuple(x) for x in got[:c] + rest] == [tuple(x) for x in epoch]


def test_a_main_process_that_read_an_earlier_epoch_as_one_reader_refuses_workers_naming_num_workers():
    """Invariant: with num_workers not given, a main process that read epoch 0 (one reader a
    rank) and a loader of 2 workers in epoch 1 would read the run as two layouts: the workers
    refuse, naming ``num_workers=2`` and a new dataset; a look in the same epoch is only a look."""
    ds = make(SHARDS, [1, 2, 1], 2)
    list(ds)  # epoch 0, read in the main process
    ds.set_epoch(1)
    worker = copy.copy(ds)  # a worker's copy, in this process: the shared memory is shared
    with pytest.raises(ValueError) as info:
        worker.iter_worker(0, 2)
    assert str(info.value) == (
        "num_workers should be given to ShardedMixtureDataset(num_workers=2): the main process "
        "read epoch 0 as one reader a rank, and this DataLoader's 2 workers would read the run as "
        "2 readers; pass num_workers=2 to the dataset (the main process then reads what the "
        "workers would), or build a new dataset"
    )
    looked = make(SHARDS, [1, 2, 1], 2)
    next(iter(looked))  # a look in epoch 0, then the loader's workers in epoch 0
    assert list(copy.copy(looked).iter_worker(1, 2)) == list(
        make(SHARDS, [1, 2, 1], 2, num_workers=2).iter_worker(1, 2)
    )
    assert looked._readers() == 2  # fixed by the workers, seen in the main process


@given(sharded_mixtures(), mixture_batch_sizes, st.integers(16, 24), st.integers(4, 6),
       st.integers(0, 20))  # fmt: skip
def test_counts_at_of_many_readers_are_the_sources_they_read_counted_step_by_step(
    mix, b, world, nw, step
):
    """Invariant: with 64 readers or more (whose windows' counts come from routing the span of
    tree positions they cover at once), counts_at(S)[r][w][k] is still how many of rank r's
    slots at steps s < S with s ≡ w (mod workers) read source k, each step routed alone."""
    shards, weights = mix
    ds = make(shards, weights, b, world, num_workers=nw)
    expected = np.zeros((world, nw, len(shards)), np.int64)
    for s in range(step):
        for r, ks in enumerate(ds._grid.step_sources(s).tolist()):
            np.add.at(expected[r, s % nw], ks, 1)
    assert (ds.counts_at(step) == expected).all()


@given(args, st.integers(0, 60))
def test_the_total_draws_of_a_source_before_a_step_are_every_readers_summed_through_a_schedule(
    a, step
):
    """Invariant: ``C_k(S)`` (until_exhausted's search for the end of an epoch) is every reader's
    count of source ``k`` before step ``S`` summed, schedule stretch by stretch: the stretches
    before ``S`` whole, the one holding ``S`` up to it."""
    shards, weights = a["mix"]
    ds = make(shards, weights, a["b"], a["world"], num_workers=max(1, a["workers"]))
    counts = ds.counts_at(step)
    for k in range(len(shards)):
        assert ds._grid.total(k, step) == int(counts[..., k].sum())


@pytest.mark.parametrize("step", [0, 1, 7, 130])
def test_a_ranks_own_readers_counted_alone_are_its_row_of_counts_at_with_64_workers(step):
    """Invariant: a rank's own readers (what a worker counts) are its row of counts_at, also
    with 64 workers a rank on 5 ranks, whose windows lie far apart (``ρ·W + r``: counted down
    the tree point by point, not by routing the span between them)."""
    ds = make(SHARDS, [1, 3, 2], 2, 5, 2, num_workers=64)
    assert ds._counts(step, [2])[0] == ds.counts_at(step)[2].tolist()


def draw_by_draw(grid, k: int, p: int, G: int) -> np.ndarray:
    """``(R,)``: how many of the first ``G`` draws of source ``k`` in ``grid``'s stretch ``p``
    (its tree taken on past its end) each reader makes, routed slot by slot in the global order
    (step by step from the stretch's first, a step's ranks in order, a rank's slots in order),
    4,096 steps at a time."""
    W, n, b = grid.W, grid.n, grid.b
    lo, _, tree = grid.pieces[p]
    want, left = np.zeros(W * n, np.int64), G
    for s0 in range(lo, 2**62, 4096):
        s = np.arange(s0, s0 + 4096)  # (S,) steps
        rho = s % n  # (S,) the reader of each rank at each step
        u = ((own_steps(lo, s, rho, n) + rho * W) * b)[:, None] + np.arange(W * b)  # (S, W·b)
        slots = np.flatnonzero(_route(tree, u.ravel())[0] == k)[:left]  # k's, in global order
        np.add.at(want, (slots // b) % W * n + rho[slots // (W * b)], 1)  # reader r·n + ρ
        left -= len(slots)
        if not left:
            return want


@given(args, st.integers(0, 3000), st.sampled_from([1, 5, 1 << 16]), st.data())
def test_reach_is_each_readers_share_of_the_first_g_draws_of_a_stretchs_global_order(
    a, G, near, data
):
    """Invariant: ``reach(k, p, G)`` (where a reader's segment of a pass begins and ends) is,
    for every reader, how many of the first ``G`` draws of source ``k`` in stretch ``p`` it
    makes, the draws in the global order (step by step from the stretch's first step, its
    tree taken on past its end; a step's ranks in order; a rank's slots in order), counted
    here one draw at a time; also when the steps about the line are found by closed-form
    probes (``near``: the steps counted one by one, at most)."""
    shards, weights = a["mix"]
    nw = max(1, a["workers"])
    ds = make(shards, weights, a["b"], a["world"], num_workers=nw)
    grid = ds._grid
    grid.near = near
    p = data.draw(st.integers(0, len(grid.pieces) - 1))
    tree = grid.pieces[p][2]
    for k in range(len(shards)):
        if k not in tree.paths:
            assert not grid.reach(k, p, G).any()
            continue
        path = tree.paths[k]
        w = (path[-1][0] if path[-1][2] else path[-1][1]) / (path[0][0] + path[0][1]) if path else 1
        g = min(G, int(w * grid.W * grid.b * 2000))  # at most about 2,000 steps to count
        assert grid.reach(k, p, g).tolist() == draw_by_draw(grid, k, p, g).tolist()
