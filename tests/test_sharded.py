"""Properties of ShardedIterableDataset: which rank and which worker reads which sample of shards.

The wide sweeps simulate ranks and workers in process (``iter_worker(k, n)`` is what worker
``k`` of ``n`` runs); real DataLoaders with workers, torchdata's StatefulDataLoader and real
process groups (gloo ranks, two torchrun agents) check the few claims that need them.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import chain, zip_longest
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from distsampling import ShardedIterableDataset, loader_dataset_states, run_nodes, run_world
from sharded_ranks import Reader
from strategies import (
    epochs,
    flags,
    seeds,
    shard_size_lists,
    shard_worker_counts,
    shard_world_sizes,
)

ROOT = Path(__file__).resolve().parent.parent
TESTS, EXAMPLES = str(ROOT / "tests"), str(ROOT / "docs" / "examples")


class LoggingReader(Reader):
    """A Reader that logs every open and every sample drawn: ``opens`` is
    ``[[shard, start, drawn]]`` (``start`` 0 for a front-to-back read)."""

    def __init__(self, sizes: list[int]) -> None:
        super().__init__(sizes)
        self.opens: list[list[int]] = []

    def __call__(self, shard: int, start: int = 0):
        entry = [shard, start, 0]
        self.opens.append(entry)
        for x in super().__call__(shard, start):
            entry[2] += 1
            yield x


class CountingReader(Reader):
    """A Reader that counts the samples each DataLoader worker draws, in shared memory."""

    def __init__(self, sizes: list[int]) -> None:
        super().__init__(sizes)
        self.drawn = torch.zeros(8, dtype=torch.int64).share_memory_()  # one slot per worker

    def __call__(self, shard: int, start: int = 0):
        info = torch.utils.data.get_worker_info()
        for x in super().__call__(shard, start):
            self.drawn[0 if info is None else info.id] += 1
            yield x


def make(sizes, world=1, rank=0, read=None, **kwargs) -> ShardedIterableDataset:
    shards = list(range(len(sizes)))
    return ShardedIterableDataset(shards, sizes, read or Reader(sizes), num_replicas=world,
                                  rank=rank, **kwargs)  # fmt: skip


def read_world(sizes, world, workers, epoch=0, **kwargs) -> list[list[list[int]]]:
    """``[rank][worker]``: the samples each worker of each rank yields in the epoch."""
    out = []
    for rank in range(world):
        ds = make(sizes, world, rank, **kwargs)
        ds.set_epoch(epoch)
        out.append([list(ds.iter_worker(k, workers)) for k in range(workers)])
    return out


world_args = st.fixed_dictionaries(
    {
        "sizes": shard_size_lists,
        "world": shard_world_sizes,
        "workers": shard_worker_counts,
        "seed": seeds,
        "epoch": epochs,
        "drop_last": flags,
        "shuffle": flags,
        "seekable": flags,
    }
)


# --- the split: equal counts, exactly once, workers disjoint ------------------------------------


@given(world_args)
def test_every_rank_yields_the_same_number_of_samples_its_len(args):
    """Invariant: every rank yields len(dataset) samples, ceil(T / W) (floor with drop_last)."""
    total, world = sum(args["sizes"]), args["world"]
    expected = total // world if args["drop_last"] else -(-total // world)
    for rank, workers in enumerate(read_world(**args)):
        assert sum(map(len, workers)) == expected
        assert len(make(args["sizes"], world, rank, drop_last=args["drop_last"])) == expected


@given(world_args)
def test_every_sample_is_read_exactly_once_beyond_fewer_than_w_padding(args):
    """Invariant: over all ranks every sample is read once; the only repeats are padding (fewer
    than W), and drop_last reads no sample twice and leaves out fewer than W."""
    counts = Counter(x for rank in read_world(**args) for w in rank for x in w)
    total, world = sum(args["sizes"]), args["world"]
    repeats = sum(counts.values()) - len(counts)
    if args["drop_last"]:
        assert repeats == 0 and total - len(counts) < world
        assert len(counts) == total // world * world
    else:
        assert set(counts) == set(range(total)) and repeats < world
        assert sum(counts.values()) == -(-total // world) * world


@given(world_args)
def test_no_sample_is_yielded_by_two_workers_of_a_rank(args):
    """Invariant: a rank's samples are distinct (its range of the stream is at most T long),
    so its workers' samples are disjoint, and the ranks' ranges are contiguous."""
    for workers in read_world(**args):
        mine = [x for w in workers for x in w]
        assert len(set(mine)) == len(mine)


@given(world_args)
def test_a_worker_opens_only_shards_it_yields_from_and_draws_nothing_past_its_last_sample(args):
    """Invariant: each read(shard) a worker makes yields it at least one sample; it opens at most
    one shard more than the shards it yields from (the head again, as padding); it draws no
    sample past the last one it yields from that shard; and only its first open draws samples
    it does not yield (the head of its first shard, before its range)."""
    sizes, world, workers = args["sizes"], args["world"], args["workers"]
    reader = LoggingReader(sizes)
    for rank in range(world):
        ds = make(sizes, world, rank, read=reader, seed=args["seed"], shuffle=args["shuffle"],
                  drop_last=args["drop_last"])  # fmt: skip
        ds.set_epoch(args["epoch"])
        for k in range(workers):
            reader.opens.clear()
            got = list(ds.iter_worker(k, workers))
            shard_of = [next(i for i, s in enumerate(reader.starts) if s <= x < s + sizes[i]
                             and sizes[i]) for x in got]  # fmt: skip
            yielded = {i: [x - reader.starts[i] for x in got if shard_of[got.index(x)] == i]
                       for i in set(shard_of)}  # fmt: skip
            assert len(reader.opens) <= len(yielded) + 1
            for n, (shard, _, drawn) in enumerate(reader.opens):
                assert shard in yielded  # never a shard it yields nothing from
                assert drawn == max(yielded[shard]) + 1 or drawn == sizes[shard]
                if n > 0:  # every later open yields its first sample: nothing skipped
                    assert drawn - 1 - min(yielded[shard]) < len(got)
            skipped = sum(d for *_, d in reader.opens) - len(got)
            first = reader.opens[0][0] if reader.opens else None
            assert skipped <= (min(yielded[first]) if first is not None else 0)


@given(world_args)
def test_with_seeking_every_worker_draws_exactly_its_range_and_yields_the_same_samples(args):
    """Invariant: with seekable=True a worker calls read(shard, first) once per run of its
    worker_runs and draws exactly stop - first samples from it: it draws no sample it does not
    yield (the check past a shard's end draws nothing from a shard of the right size); and it
    yields the same samples, in the same order, as the front-to-back read."""
    sizes, world, workers = args["sizes"], args["world"], args["workers"]
    kw = {k: args[k] for k in ("seed", "shuffle", "drop_last")}
    reader = LoggingReader(sizes)
    for rank in range(world):
        seeking, plain = (
            make(sizes, world, rank, read=reader, seekable=True, **kw),
            make(sizes, world, rank, **kw),
        )
        seeking.set_epoch(args["epoch"])
        plain.set_epoch(args["epoch"])
        for k in range(workers):
            reader.opens.clear()
            got = list(seeking.iter_worker(k, workers))
            assert got == list(plain.iter_worker(k, workers))
            runs = seeking.worker_runs(k, workers)
            assert reader.opens == [[i, first, stop - first] for i, first, stop in runs]
            assert sum(drawn for *_, drawn in reader.opens) == len(got)


@given(shard_size_lists, seeds, epochs)
def test_the_shard_order_is_distributed_samplers_order_of_the_shards(sizes, seed, epoch):
    """Invariant: the epoch reads the shards in torch DistributedSampler's order of range(S)
    with (seed, epoch), whole and in order: the same on every rank, with no communication."""
    order = torch.utils.data.DistributedSampler(range(len(sizes)), 1, 0, shuffle=True, seed=seed)
    order.set_epoch(epoch)
    reader = Reader(sizes)
    expected = [x for shard in order for x in reader(shard)]
    assert read_world(sizes, 1, 1, epoch, seed=seed) == [[expected]]


@given(shard_size_lists.filter(lambda s: sum(x > 0 for x in s) >= 2), seeds)
def test_an_epoch_is_reproducible_and_another_epoch_reads_another_order(sizes, seed):
    """Invariant: the same (seed, epoch) reads the same stream; among 20 epochs, orders differ."""
    streams = [read_world(sizes, 2, 2, e, seed=seed) for e in range(20)]
    assert read_world(sizes, 2, 2, 7, seed=seed) == streams[7]
    assert len({json.dumps(s) for s in streams}) > 1


def test_without_shuffle_the_stream_is_the_shards_in_order_padded_by_its_head():
    """Invariant: shuffle=False reads shards 0, 1, ... and pads the last rank with the head."""
    sizes = [3, 0, 1, 4]  # ids 0..7
    assert read_world(sizes, 3, 1, shuffle=False) == [[[0, 1, 2]], [[3, 4, 5]], [[6, 7, 0]]]
    assert read_world(sizes, 3, 2, shuffle=False, drop_last=True) == [
        [[0], [1]], [[2], [3]], [[4], [5]]
    ]  # fmt: skip


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"shards": []}, ValueError, r"shards should hold at least one shard, but got shards=\[\]"),
        ({"sizes": [1, 2]}, ValueError,
         r"sizes should hold one size per shard \(len\(shards\)=3\), but got len\(sizes\)=2"),
        ({"sizes": [1, -2, 3]}, ValueError, r"sizes\[1\] should be >= 0, but got sizes\[1\]=-2"),
        ({"sizes": [1, 2.5, 3]}, TypeError, r"sizes\[1\] should be an integer, but got sizes\[1\]=2.5"),
        ({"sizes": "123"}, TypeError, r"sizes should be a sequence .* but got sizes='123'"),
        ({"shards": 3}, TypeError, r"shards should be a sequence .* but got shards=3 of type int"),
        ({"read": "open"}, TypeError, r"read should be a callable, .* but got read='open'"),
        ({"rank": 2}, ValueError, r"Invalid rank 2, rank should be in the interval \[0, 1\]"),
        ({"shuffle": "yes"}, TypeError, r"shuffle should be a boolean value, but got shuffle='yes'"),
        ({"seekable": 1}, TypeError, r"seekable should be a boolean value, but got seekable=1"),
        ({"seed": 2**64}, ValueError, r"seed should be in the interval"),
    ],
)  # fmt: skip
def test_bad_arguments_are_named_with_their_value(kwargs, error, message):
    """Invariant: a bad argument raises an error naming it and the value it got."""
    args = {"shards": ["a", "b", "c"], "sizes": [1, 2, 3], "read": Reader([1, 2, 3]),
            "num_replicas": 2, "rank": 0, **kwargs}  # fmt: skip
    shards, sizes, read = args.pop("shards"), args.pop("sizes"), args.pop("read")
    with pytest.raises(error, match=message):
        ShardedIterableDataset(shards, sizes, read, **args)


@pytest.mark.parametrize(
    ("true_sizes", "message"),
    [
        ([3, 1, 2], r"shard 'c' \(shards\[2\]\) ended before its sample 2, but sizes\[2\]=3"),
        ([3, 1, 4], r"shard 'c' \(shards\[2\]\) yielded more than 3 samples, but sizes\[2\]=3"),
        ([3, 0, 3], r"shard 'b' \(shards\[1\]\) ended before its sample 0, but sizes\[1\]=1"),
    ],
)
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("seekable", [False, True])
def test_a_shard_of_another_size_than_sizes_says_so_never_a_short_epoch(true_sizes, message,
                                                                        workers, seekable):  # fmt: skip
    """Invariant: a shard whose read yields fewer or more samples than its size (from `start`
    with seeking) raises an error naming the shard, the expected size and where it went wrong,
    on the worker that reads it."""
    reader = Reader(true_sizes)
    ds = ShardedIterableDataset(["a", "b", "c"], [3, 1, 3],
                                lambda s, *start: reader("abc".index(s), *start), num_replicas=1,
                                rank=0, shuffle=False, seekable=seekable)  # fmt: skip
    with pytest.raises(ValueError, match=message):
        for k in range(workers):
            list(ds.iter_worker(k, workers))


def test_empty_shards_are_allowed_and_never_opened():
    """Invariant: shards of size 0 are valid; none is opened; all empty reads nothing."""
    reader = LoggingReader([0, 2, 0])
    assert list(make([0, 2, 0], read=reader, shuffle=False)) == [0, 1]
    assert [shard for shard, *_ in reader.opens] == [1]
    assert list(make([0, 0], 3, 2)) == [] and len(make([0, 0], 3, 2)) == 0


# --- resume -----------------------------------------------------------------------------------


@given(world_args, st.data())
def test_a_state_resumes_a_worker_where_it_stopped(args, data):
    """Invariant: a worker's state_dict after m samples (through JSON) makes a new dataset's
    iter() yield exactly the rest: no replay, no skipped sample; every iter() of that epoch.
    With seeking, the resumed worker draws exactly the samples it yields."""
    sizes, world, epoch = args["sizes"], args["world"], args["epoch"]
    rank = data.draw(st.integers(0, world - 1))
    kw = {k: args[k] for k in ("seed", "shuffle", "drop_last", "seekable")}
    ds = make(sizes, world, rank, **kw)
    ds.set_epoch(epoch)
    whole = list(ds)
    m = data.draw(st.integers(0, len(whole)))
    it = iter(ds)
    head = [next(it) for _ in range(m)]
    state = json.loads(json.dumps(ds.state_dict()))
    assert state["position"] == m
    reader = LoggingReader(sizes)
    again = make(sizes, world, rank, read=reader, **kw)
    again.set_epoch(epoch)
    again.load_state_dict(state)
    assert head + list(again) == whole
    if kw["seekable"]:
        assert sum(drawn for *_, drawn in reader.opens) == len(whole) - m
    assert head + list(again) == whole


@given(world_args, shard_world_sizes, shard_worker_counts, st.data())
def test_every_workers_state_resumes_on_another_world_reading_each_sample_once(args, world2,
                                                                               workers2, data):  # fmt: skip
    """Invariant: W1 ranks each read the same first m_k samples of worker k's range; rank 0's
    worker states, loaded on W2 ranks, read the rest: every sample of the epoch once over both
    runs, repeats only padding (fewer than W1 + W2), every new rank the same count; with
    seeking, every new rank draws exactly the samples it yields."""
    sizes, world, workers, epoch = args["sizes"], args["world"], args["workers"], args["epoch"]
    kw = {k: args[k] for k in ("seed", "shuffle", "drop_last", "seekable")}
    total, read, states = sum(sizes), [], None
    spans = [len(list(make(sizes, world, 0, **kw).iter_worker(k, workers))) for k in range(workers)]
    stops = [data.draw(st.integers(0, s)) for s in spans]
    for rank in range(world):
        ds = make(sizes, world, rank, **kw)
        ds.set_epoch(epoch)
        rank_states = []
        for k in range(workers):
            it = ds.iter_worker(k, workers)
            read += [next(it) for _ in range(stops[k])]
            rank_states.append(json.loads(json.dumps(ds.state_dict())))
        states = states or rank_states
    counts = []
    for rank in range(world2):
        reader = LoggingReader(sizes)
        ds = make(sizes, world2, rank, read=reader, **kw)
        ds.set_epoch(epoch)
        ds.load_state_dict(states)
        mine = [x for k in range(workers2) for x in ds.iter_worker(k, workers2)]
        assert len(mine) == len(ds)
        if kw["seekable"]:
            assert sum(drawn for *_, drawn in reader.opens) == len(mine)
        counts.append(len(mine))
        read += mine
    assert len(set(counts)) == 1
    c = Counter(read)
    if kw["drop_last"]:
        assert max(c.values(), default=1) == 1
    else:
        assert set(c) == set(range(total)) and sum(c.values()) - len(c) < world + world2


def test_a_second_elastic_resume_keeps_every_sample_once():
    """Invariant: W1=3 -> W2=2 -> W3=4, each run stopped part way: every sample read once
    beyond padding (the todo list of a resumed run is carried in its states)."""
    sizes, read, states = [7, 0, 12, 5, 1, 9], [], None
    for world, workers, stop in [(3, 2, 3), (2, 3, 2), (4, 1, None)]:
        next_states = None
        for rank in range(world):
            ds = make(sizes, world, rank, seed=9)
            ds.set_epoch(4)
            if states is not None:
                ds.load_state_dict(states)
            rank_states = []
            for k in range(workers):
                it = ds.iter_worker(k, workers)
                read += list(it) if stop is None else [x for _, x in zip(range(stop), it)]
                rank_states.append(ds.state_dict())
            next_states = next_states or rank_states
        states = next_states
    c = Counter(read)
    assert set(c) == set(range(sum(sizes))) and sum(c.values()) - len(c) < 3 + 2 + 4


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"shards": "0" * 16}, r"shards was '0000000000000000' when saved, but is '[0-9a-f]{16}' now"),
        ({"seed": 1}, r"seed was 1 when saved, but is 0 now"),
        ({"drop_last": True}, r"drop_last was True when saved, but is False now"),
        ({"epoch": 3}, r"epoch was 3 when saved, but is 0 now: call set_epoch\(3\) first"),
        ({"num_workers": 2}, r"state was saved by worker 0 of 2, but is read by worker 0 of 1: "
                             r"resume with the same num_workers, or load every worker's state"),
        ({"num_replicas": 3}, r"saved on num_replicas=3, but is loaded on num_replicas=2: load "
                              r"every worker's state at once"),
        ({"todo": [[5, 3]]}, r"state has a bad todo=\[\[5, 3\]\] for 13 samples"),
        ({"position": 8}, r"position should be in the interval \[0, 7\], but got position=8"),
        ({"kind": "Other"}, r"state is not a ShardedIterableDataset state_dict\(\)"),
    ],
)  # fmt: skip
def test_a_state_of_another_run_is_refused_naming_what_differs(change, message):
    """Invariant: a state of another shard list, seed, flag, epoch, worker layout or world, or a
    malformed one, is refused with the field and both values, never resumed wrongly (a worker
    layout when the state is read: only then is the reading worker known)."""
    sizes = [4, 9]
    state = {**make(sizes, 2, 0, seed=0).state_dict(), **change}
    ds = make(sizes, 2, 0, seed=0)
    with pytest.raises(ValueError, match=message):
        ds.load_state_dict(state)
        list(ds)


def test_a_list_of_states_missing_a_worker_is_refused():
    """Invariant: the elastic form needs every worker of one rank; a gap is named."""
    ds = make([4, 9], 2, 0)
    list(ds.iter_worker(1, 2))
    with pytest.raises(ValueError, match=r"every worker's state of one rank .* got workers \[1\]"):
        make([4, 9], 3, 0).load_state_dict([ds.state_dict()])
    with pytest.raises(TypeError, match=r"state should be a dict from state_dict\(\), but got"):
        make([4, 9], 3, 0).load_state_dict([None])


# --- real DataLoaders with workers --------------------------------------------------------------

SIZES = [5, 0, 17, 3, 1, 40, 2]  # 68 samples: on 2 ranks 34 each


@pytest.mark.parametrize("num_workers", [0, 1, 2, 3])
def test_num_workers_changes_only_the_order_batches_take_turns_over_worker_ranges(num_workers):
    """Invariant: with n workers a rank's batches are the DataLoader's round robin over the n
    contiguous worker ranges (each cut into batches, its last one partial); the samples, and
    their number, are the same for every num_workers."""
    ds = make(SIZES, 2, 1, seed=3)
    ds.set_epoch(2)
    n = max(num_workers, 1)
    ranges = [list(ds.iter_worker(k, n)) for k in range(n)]
    per_worker = [[r[i : i + 3] for i in range(0, len(r), 3)] for r in ranges]
    expected = [b for turn in zip_longest(*per_worker) for b in turn if b is not None]
    got = [b.tolist() for b in DataLoader(ds, batch_size=3, num_workers=num_workers)]
    assert got == expected
    assert sorted(chain(*got)) == sorted(read_world(SIZES, 2, 1, epoch=2, seed=3)[1][0])


def test_persistent_workers_see_every_set_epoch():
    """Invariant: the epoch lives in shared memory, so persistent workers read each epoch's order."""
    ds = make(SIZES, 2, 0, seed=3)
    loader = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
    for epoch in (0, 1):
        ds.set_epoch(epoch)
        fresh = make(SIZES, 2, 0, seed=3)
        fresh.set_epoch(epoch)
        expected = sorted(x for k in range(2) for x in fresh.iter_worker(k, 2))
        assert sorted(x for b in loader for x in b.tolist()) == expected


@pytest.mark.parametrize("num_workers", [0, 3])
def test_a_seekable_read_through_a_dataloader_draws_only_what_it_yields(num_workers):
    """Invariant: through a real DataLoader (worker processes), seekable=True yields the same
    batches as the front-to-back read, and its workers together draw exactly the samples the
    rank yields; the front-to-back read draws more (the heads it skips)."""
    batches, drawn = {}, {}
    for seekable in (False, True):
        reader = CountingReader(SIZES)
        ds = make(SIZES, 2, 1, read=reader, seed=3, seekable=seekable)
        ds.set_epoch(2)
        batches[seekable] = [b.tolist() for b in DataLoader(ds, batch_size=3,
                                                            num_workers=num_workers)]  # fmt: skip
        drawn[seekable] = int(reader.drawn.sum())
    assert batches[True] == batches[False]
    assert drawn[True] == len(make(SIZES, 2, 1)) < drawn[False]


@settings(max_examples=12)
@given(shard_size_lists, st.sampled_from([0, 2]), st.integers(0, 8), seeds, flags)
def test_stateful_dataloader_resumes_exactly_what_an_uninterrupted_run_yields(sizes, workers,
                                                                              stop, seed,
                                                                              seekable):  # fmt: skip
    """Invariant: torchdata's StatefulDataLoader, stopped after `stop` batches and resumed from
    its JSON state in a new loader, yields exactly the uninterrupted run's batches after it."""

    def loader() -> StatefulDataLoader:
        ds = make(sizes, 2, 1, seed=seed, seekable=seekable)
        ds.set_epoch(1)
        return StatefulDataLoader(ds, batch_size=3, num_workers=workers)

    whole = [b.tolist() for b in loader()]
    first, it = loader(), None
    it = iter(first)
    head = [next(it).tolist() for _ in range(min(stop, len(whole)))]
    state = json.loads(json.dumps(first.state_dict()))
    del it, first
    resumed = loader()
    resumed.load_state_dict(state)
    assert head + [b.tolist() for b in resumed] == whole


def test_stateful_dataloader_states_of_2_ranks_resume_on_3_ranks_reading_each_sample_once():
    """Invariant: 2 ranks with StatefulDataLoaders of 2 workers stop after 3 batches; rank 0's
    loader state (every worker's dataset state) resumes 3 ranks, each with 2 workers: every
    sample of the epoch read once beyond padding, every new rank the same count."""
    read, states = [], None
    for rank in range(2):
        ds = make(SIZES, 2, rank, seed=3)
        ds.set_epoch(5)
        loader = StatefulDataLoader(ds, batch_size=4, num_workers=2)
        it = iter(loader)
        read += [x for _ in range(3) for x in next(it).tolist()]
        states = states or loader_dataset_states(json.loads(json.dumps(loader.state_dict())))
        del it
    counts = []
    for rank in range(3):
        ds = make(SIZES, 3, rank, seed=3)
        ds.set_epoch(5)
        ds.load_state_dict(states)
        mine = [x for b in DataLoader(ds, batch_size=4, num_workers=2) for x in b.tolist()]
        counts.append(len(mine))
        read += mine
    c = Counter(read)
    assert len(set(counts)) == 1 and set(c) == set(range(sum(SIZES)))
    assert sum(c.values()) - len(c) < 2 + 3


# --- real process groups ------------------------------------------------------------------------


def check_gathered(ranks: list[dict], sizes: list[int], world: int) -> None:
    """Each epoch: every rank read len(dataset) samples, every sample once beyond padding."""
    assert [r["rank"] for r in ranks] == list(range(world))
    for epoch in range(len(ranks[0]["epochs"])):
        read = [r["epochs"][epoch] for r in ranks]
        assert {len(x) for x in read} == {ranks[0]["len"]} == {-(-sum(sizes) // world)}
        c = Counter(chain(*read))
        assert set(c) == set(range(sum(sizes))) and sum(c.values()) - len(c) < world
    assert ranks[0]["epochs"][0] != ranks[0]["epochs"][1]  # another order each epoch


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
@pytest.mark.timeout(240)
def test_gloo_ranks_with_loader_workers_read_each_sample_once_in_equal_counts():
    """Invariant: 3 real gloo ranks, DataLoaders of 2 workers, 2 epochs: gathered, every rank
    read the same count and every sample once beyond padding."""
    results = run_world("sharded_ranks:read_through_loaders", 3, SIZES, 2, 2, timeout=180,
                        pythonpath=[TESTS])  # fmt: skip
    check_gathered(results[0]["ranks"], SIZES, 3)


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
@pytest.mark.timeout(300)
def test_two_torchrun_nodes_with_loader_workers_read_each_sample_once_in_equal_counts():
    """Invariant: two torchrun agents (--nnodes=2), RANK from the process group, LOCAL_RANK 0 on
    both: the ranks split by RANK, read equal counts, every sample once beyond padding."""
    results = run_nodes("sharded_ranks:read_through_loaders", 2, 1, SIZES, 2, 2, timeout=240,
                        pythonpath=[TESTS])  # fmt: skip
    ranks = results[0]["ranks"]
    assert [r["local_rank"] for r in ranks] == [0, 0]
    check_gathered(ranks, SIZES, 2)


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
@pytest.mark.timeout(240)
def test_a_naive_shard_split_times_out_the_all_reduce_and_the_sharded_dataset_finishes():
    """Invariant (the tutorial's run): unequal shards split rank r -> shards r, r + W on 2 gloo
    ranks leave one rank in an all-reduce the other never joins (its 5 s timeout fires, the
    run ends); ShardedIterableDataset gives both ranks the same steps and both finish."""
    naive = run_world("sharded_hang:naive_rank", 2, timeout=120, pythonpath=[EXAMPLES])
    assert naive[0].endswith("then the all-reduce timed out") and naive[1].endswith("finished")
    ours = run_world("sharded_hang:sharded_rank", 2, timeout=120, pythonpath=[EXAMPLES])
    assert ours == ["6 steps, finished"] * 2
