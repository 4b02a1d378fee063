"""Properties of ShardedIterableDataset: which rank and which worker reads which sample of shards.

The wide sweeps simulate ranks and workers in process (``iter_worker(k, n)`` is what worker
``k`` of ``n`` runs); real DataLoaders with workers, torchdata's StatefulDataLoader and real
process groups (gloo ranks, two torchrun agents) check the few claims that need them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from itertools import chain, islice, pairwise, zip_longest
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from distsampling import (
    FrameworkWarning,
    ShardedIterableDataset,
    loader_dataset_states,
    run_nodes,
    run_world,
)
from distsampling.streaming import sharded
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
#: the package's warning when a pass reads the epoch of the pass before, with no set_epoch since
AGAIN = r"began a pass with no set_epoch since the previous one began: it reads epoch \d+ again"
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


def shard_order(num_shards, shuffle=True, seed=0, epoch=0) -> list[int]:
    """The epoch's order of the shards: torch DistributedSampler's order of range(S), one rank."""
    sampler = torch.utils.data.DistributedSampler(range(num_shards), 1, 0, shuffle=shuffle,
                                                  seed=seed)  # fmt: skip
    sampler.set_epoch(epoch)
    return list(sampler)


def expected_samples(sizes, todo, world, rank, worker, workers, *, shuffle=True, seed=0, epoch=0,
                     drop_last=False) -> list[tuple[int, int]]:  # fmt: skip
    """``(shard, offset)`` of each sample worker ``worker`` of ``workers`` on ``rank`` yields, one
    by one, by the module docstring's arithmetic: the rest (the ``todo`` positions of the stream)
    padded with its head or cut, rank ``r``'s ``L`` positions from ``r * L``, the worker's part."""
    stream = [
        (i, o) for i in shard_order(len(sizes), shuffle, seed, epoch) for o in range(sizes[i])
    ]
    rest = [stream[p] for a, b in todo for p in range(a, b)]
    length = len(rest) // world if drop_last else -(-len(rest) // world)
    lo, hi = length * worker // workers, length * (worker + 1) // workers
    return [rest[(rank * length + x) % len(rest)] for x in range(lo, hi)]


def maximal_runs(samples) -> list[tuple[int, int, int]]:
    """``(shard, first, stop)`` runs of consecutive samples of one shard, each as long as it goes."""
    runs: list[list[int]] = []
    for shard, offset in samples:
        if runs and runs[-1][0] == shard and runs[-1][2] == offset:
            runs[-1][2] += 1
        else:
            runs.append([shard, offset, offset + 1])
    return [tuple(r) for r in runs]


def expected_opens(runs, seekable) -> list[list[int]]:
    """LoggingReader's ``opens`` for reading ``runs``: with seeking one ``read(shard, first)`` per
    run drawing its samples; front to back one ``read(shard)`` wherever the shard changes or goes
    back (padding), drawing up to the last sample it yields, the samples between dropped."""
    opens: list[list[int]] = []
    for n, (shard, first, stop) in enumerate(runs):
        if seekable:
            opens.append([shard, first, stop - first])
        elif n == 0 or shard != runs[n - 1][0] or first < runs[n - 1][2]:
            opens.append([shard, 0, stop])
        else:
            opens[-1][2] = stop
    return opens


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
            got, by_open = [], []  # the samples yielded, and by which open (the latest one)
            for x in ds.iter_worker(k, workers):
                got.append(x)
                by_open.append(len(reader.opens) - 1)
            shards = {next(i for i, s in enumerate(reader.starts) if s <= x < s + sizes[i]
                           and sizes[i]) for x in got}  # fmt: skip
            assert len(reader.opens) <= len(shards) + 1
            for n, (shard, _, drawn) in enumerate(reader.opens):
                # what this open yielded: offsets in its shard (a padding head reopens a shard)
                mine = [x - reader.starts[shard] for x, o in zip(got, by_open) if o == n]
                assert mine  # never an open it yields nothing from
                assert drawn == max(mine) + 1 or drawn == sizes[shard]
                if n > 0:  # every later open yields its first sample: nothing skipped
                    assert min(mine) == 0
            skipped = sum(d for *_, d in reader.opens) - len(got)
            head = [x - reader.starts[reader.opens[0][0]] for x, o in zip(got, by_open) if o == 0]
            assert skipped <= (min(head) if head else 0)


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


@pytest.mark.parametrize("seekable", [False, True])
@pytest.mark.parametrize(
    ("sizes", "world", "consumed", "world2"),
    [
        ([5, 2], 1, 2, 2),  # the rest [2, 7): rank 1 reads shard 1, then shard 0 from sample 2
        ([10], 2, 2, 1),  # ranks read [0, 2) and [5, 7): the rest is two pieces of shard 0
        ([4, 6, 3], 3, 1, 2),
    ],
)
def test_after_an_elastic_resume_each_rank_reads_the_runs_of_the_rest(sizes, world, consumed,
                                                                      world2, seekable):  # fmt: skip
    """Invariant: after W1 ranks each read `consumed` samples, a new rank of W2 reads the maximal
    runs of its range of the rest: where its padding wraps from the rest's end to its head, a run
    of another shard never merges with the last one; where the rest leaves a gap in a shard, a
    front-to-back read goes on in the open shard (one read(shard)) and a seekable one seeks."""
    ds = make(sizes, world, 0, shuffle=False)
    it = ds.iter_worker()
    for _ in range(consumed):
        next(it)
    states = [ds.state_dict()]
    for rank in range(world2):
        reader = LoggingReader(sizes)
        again = make(sizes, world2, rank, read=reader, shuffle=False, seekable=seekable)
        again.load_state_dict(states)
        todo = again.state_dict()["todo"]
        samples = expected_samples(sizes, todo, world2, rank, 0, 1, shuffle=False)
        runs = maximal_runs(samples)
        assert again.worker_runs() == runs
        assert list(again) == [reader.starts[i] + offset for i, offset in samples]
        assert reader.opens == expected_opens(runs, seekable)


def test_a_todo_split_into_adjacent_intervals_reads_like_the_whole():
    """Invariant: a todo is a set of stream positions: split at any position (inside a shard or
    between shards) into adjacent intervals, it gives the same worker_runs as the whole stream,
    and the same samples."""
    sizes = [7, 0, 5, 3]
    total = sum(sizes)
    for world, workers in [(1, 1), (2, 2), (3, 1), (2, 3)]:
        for rank in range(world):
            whole = make(sizes, world, rank, seed=1)
            runs = [whole.worker_runs(k, workers) for k in range(workers)]
            samples = list(whole)
            for cut in range(1, total):
                split = make(sizes, world, rank, seed=1)
                split.load_state_dict({**split.state_dict(), "todo": [[0, cut], [cut, total]]})
                assert [split.worker_runs(k, workers) for k in range(workers)] == runs
                assert list(split) == samples


@given(world_args, st.data())
def test_worker_runs_are_the_maximal_runs_of_the_samples_the_arithmetic_assigns(args, data):
    """Invariant: for any todo a state may list (sorted, disjoint, non-empty intervals of the
    stream, adjacent ones too), worker_runs(k, n) is the samples the documented arithmetic gives
    worker k (rank r's range of the rest, padded with its head or cut, then its k-th part), as
    maximal runs: a run never goes on where the previous one stopped in the same shard. Resumed at
    position m, iter_worker yields those samples from the m-th on, and opens each shard once per
    run with seeking, front to back once wherever the shard changes or goes back."""
    sizes, world, workers = args["sizes"], args["world"], args["workers"]
    kw = {k: args[k] for k in ("seed", "shuffle", "drop_last")}
    total, rank = sum(sizes), data.draw(st.integers(0, world - 1))
    cuts = sorted({0, total, *data.draw(st.lists(st.integers(0, total), max_size=8))})
    pieces = [list(p) for p in pairwise(cuts)]  # cuts are distinct: none empty
    todo = [p for p in pieces if data.draw(st.booleans())]
    reader = LoggingReader(sizes)
    ds = make(sizes, world, rank, read=reader, seekable=args["seekable"], **kw)
    ds.set_epoch(args["epoch"])
    for k in range(workers):
        samples = expected_samples(sizes, todo, world, rank, k, workers, epoch=args["epoch"], **kw)
        skip = data.draw(st.integers(0, len(samples)))
        ds.load_state_dict({**ds.state_dict(), "todo": todo, "worker": k, "num_workers": workers,
                            "position": skip})  # fmt: skip
        assert ds.worker_runs(k, workers) == maximal_runs(samples)
        reader.opens.clear()
        got = list(ds.iter_worker(k, workers))
        assert got == [reader.starts[i] + offset for i, offset in samples[skip:]]
        assert reader.opens == expected_opens(maximal_runs(samples[skip:]), args["seekable"])


def test_by_default_worker_runs_and_iter_worker_are_the_main_process_worker_0_of_1():
    """Invariant: worker_runs() and iter_worker() without arguments are worker 0 of 1, what the
    main process reads (num_workers=0): the rank's whole range."""
    ds = make([3, 0, 5, 4], 2, 1, seed=2)
    assert ds.worker_runs() == ds.worker_runs(0, 1)
    assert sum(stop - first for _, first, stop in ds.worker_runs()) == len(ds) == 6
    samples = list(ds)
    assert list(ds.iter_worker()) == list(ds.iter_worker(0, 1)) == samples
    assert len(samples) == 6


def test_in_a_loader_worker_iter_and_state_dict_are_that_workers(monkeypatch):
    """Invariant: in DataLoader worker k of n (get_worker_info()), iter() yields iter_worker(k, n)
    and state_dict(), before and after, names worker k of n. The real loaders with workers below
    prove it end to end; this in-process stand-in for the worker's get_worker_info() is what
    mutation testing can see (it does not follow worker processes)."""
    expected = [list(make(SIZES, 2, 1, seed=3).iter_worker(k, 3)) for k in range(3)]
    for k in range(3):
        info = SimpleNamespace(id=k, num_workers=3)
        monkeypatch.setattr(sharded, "get_worker_info", lambda info=info: info)
        ds = make(SIZES, 2, 1, seed=3)
        assert (ds.state_dict()["worker"], ds.state_dict()["num_workers"]) == (k, 3)
        assert list(ds) == expected[k]
        state = ds.state_dict()
        assert [state[key] for key in ("worker", "num_workers", "position")] == [
            k, 3, len(expected[k])
        ]  # fmt: skip


def test_the_default_seed_is_distributed_samplers_0():
    """Invariant: without seed=, the shards are read in DistributedSampler's order with its
    default seed, 0."""
    sizes = [2, 1, 3, 0, 4, 1, 2, 5]
    reader = Reader(sizes)
    ds = ShardedIterableDataset(list(range(len(sizes))), sizes, reader, num_replicas=1, rank=0)
    expected = [
        x for shard in torch.utils.data.DistributedSampler(range(8), 1, 0) for x in reader(shard)
    ]
    assert list(ds) == expected


def test_a_front_to_back_read_is_called_with_the_shard_alone():
    """Invariant: without seekable, read(shard) gets one argument: a read with no start parameter
    serves every worker, also one whose range starts inside a shard."""
    sizes = [5, 3, 4]
    calls = []

    def read(shard):
        calls.append(shard)
        return iter(range(10 * shard, 10 * shard + sizes[shard]))

    ds = ShardedIterableDataset([0, 1, 2], sizes, read, num_replicas=2, rank=0, shuffle=False)
    assert list(ds.iter_worker(1, 2)) == [3, 4, 10]
    assert calls == [0, 1]


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
        ({"drop_last": "no"}, TypeError, r"drop_last should be a boolean value, but got drop_last='no'"),
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
    on the worker that reads it, and what read should do (with seeking: from `start`)."""
    call = (r"read\(shard, start\) should yield samples start \.\. sizes\[i\] - 1$" if seekable
            else r"read\(shard\) should yield exactly sizes\[i\] samples$")  # fmt: skip
    reader = Reader(true_sizes)
    ds = ShardedIterableDataset(["a", "b", "c"], [3, 1, 3],
                                lambda s, *start: reader("abc".index(s), *start), num_replicas=1,
                                rank=0, shuffle=False, seekable=seekable)  # fmt: skip
    with pytest.raises(ValueError, match=f"{message}: {call}"):
        for k in range(workers):
            list(ds.iter_worker(k, workers))


def test_empty_shards_are_allowed_and_never_opened():
    """Invariant: shards of size 0 are valid; none is opened; all empty reads nothing."""
    reader = LoggingReader([0, 2, 0])
    assert list(make([0, 2, 0], read=reader, shuffle=False)) == [0, 1]
    assert [shard for shard, *_ in reader.opens] == [1]
    assert list(make([0, 0], 3, 2)) == [] and len(make([0, 0], 3, 2)) == 0


@pytest.mark.parametrize(
    ("worker", "num_workers", "error", "message"),
    [
        (0, 0, ValueError, r"^num_workers should be >= 1, but got num_workers=0$"),
        (0, -2, ValueError, r"^num_workers should be >= 1, but got num_workers=-2$"),
        (0, 1.0, TypeError, r"^num_workers should be an integer, but got num_workers=1.0"),
        (-1, 2, ValueError, r"^worker should be in the interval \[0, 1\], but got worker=-1$"),
        (2, 2, ValueError, r"^worker should be in the interval \[0, 1\], but got worker=2$"),
        (3, 2, ValueError, r"^worker should be in the interval \[0, 1\], but got worker=3$"),
        (1, 1, ValueError, r"^worker should be in the interval \[0, 0\], but got worker=1$"),
        ("0", 2, TypeError, r"^worker should be an integer, but got worker='0'"),
    ],
)  # fmt: skip
def test_a_worker_outside_its_num_workers_is_named_with_its_value(worker, num_workers, error,
                                                                 message):  # fmt: skip
    """Invariant: worker_runs and iter_worker take worker k of n with n >= 1 and 0 <= k < n; any
    other refuses naming the argument, its range and its value."""
    ds = make([3, 4], 2, 0)
    with pytest.raises(error, match=message):
        ds.worker_runs(worker, num_workers)
    with pytest.raises(error, match=message):
        list(ds.iter_worker(worker, num_workers))


@pytest.mark.parametrize(
    ("epoch", "error", "message"),
    [
        (-1, ValueError, r"^epoch should be in the interval \[0, 9223372036854775807\], but got "
                         r"epoch=-1$"),
        (2**63, ValueError, r"^epoch should be in the interval \[0, 9223372036854775807\], but got "
                            r"epoch=9223372036854775808$"),
        (1.5, TypeError, r"^epoch should be an integer, but got epoch=1.5"),
    ],
)  # fmt: skip
def test_set_epoch_refuses_an_epoch_outside_int64_naming_it(epoch, error, message):
    """Invariant: an epoch is an int64 >= 0 (it lives in a shared int64 tensor); any other is
    refused naming it, and the epoch stays what it was."""
    ds = make([3, 4], 2, 0)
    ds.set_epoch(5)
    with pytest.raises(error, match=message):
        ds.set_epoch(epoch)
    assert ds.epoch == 5


@pytest.mark.parametrize("epoch", [0, 1, 2**24 + 1, 2**53 + 1, 2**63 - 1])
def test_set_epoch_keeps_any_int64_epoch_exactly_and_reads_its_order(epoch):
    """Invariant: every epoch up to 2**63 - 1 is kept exactly (no float rounding), is the state's
    epoch, and orders the shards as DistributedSampler does for it."""
    sizes = [2, 1, 3, 0, 4, 1, 2, 5]
    reader = Reader(sizes)
    ds = make(sizes, read=reader, seed=0)
    ds.set_epoch(epoch)
    assert ds.epoch == epoch and ds.state_dict()["epoch"] == epoch
    assert list(ds) == [x for shard in shard_order(8, epoch=epoch) for x in reader(shard)]


def test_set_epoch_checks_seed_plus_epoch_only_when_shuffling():
    """Invariant: shuffled, seed + epoch seeds the generator, so it must stay in its range (the
    error names both); without shuffle the epoch draws nothing and any epoch is taken."""
    top = 2**64 - 1
    shuffled = make([3, 4], seed=top)
    shuffled.set_epoch(0)
    with pytest.raises(ValueError, match=r"seed \+ epoch should be in \[-9223372036854775808, "
                                         r"18446744073709551615\] \(torch.Generator's range\), "
                                         r"but got seed=18446744073709551615, epoch=1$"):  # fmt: skip
        shuffled.set_epoch(1)
    in_order = make([3, 4], seed=top, shuffle=False)
    in_order.set_epoch(2**63 - 1)
    assert in_order.epoch == 2**63 - 1 and list(in_order) == list(range(7))


def test_repr_names_the_class_the_shards_samples_and_every_setting():
    """Invariant: repr names the class, the number of shards and samples, and each setting."""
    ds = ShardedIterableDataset(["a", "b", "c"], [3, 0, 4], Reader([3, 0, 4]), num_replicas=3,
                                rank=2, shuffle=False, seed=7, drop_last=True, seekable=True)  # fmt: skip
    assert repr(ds) == ("ShardedIterableDataset(3 shards, 7 samples, num_replicas=3, rank=2, "
                        "shuffle=False, seed=7, drop_last=True, seekable=True)")  # fmt: skip


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
    ds.set_epoch(epoch)  # the epoch again, on purpose
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
    with pytest.warns(FrameworkWarning, match=AGAIN):  # a second pass, no set_epoch: it says so
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
        # len() is the whole epoch's: what each rank read before the resume, then what is left
        assert len(mine) + sum(s["position"] for s in states) == len(ds)
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
        ({"sizes": "0" * 16}, r"sizes was '0000000000000000' when saved, but is '[0-9a-f]{16}' now$"),
        ({"seed": 1}, r"seed was 1 when saved, but is 0 now$"),
        ({"shuffle": False}, r"shuffle was False when saved, but is True now$"),
        ({"drop_last": True}, r"drop_last was True when saved, but is False now$"),
        ({"epoch": 3}, r"epoch was 3 when saved, but is 0 now: call set_epoch\(3\) first"),
        ({"num_workers": 2}, r"state was saved by worker 0 of 2, but is read by worker 0 of 1: "
                             r"resume with the same num_workers, or load every worker's state"),
        ({"num_replicas": 3}, r"saved on num_replicas=3, but is loaded on num_replicas=2: load "
                              r"every worker's state at once \(load_state_dict\(loader_dataset_"
                              r"states\(loader_state\)\)\)$"),
        ({"todo": [[5, 3]]}, r"state has a bad todo=\[\[5, 3\]\] for 13 samples"),
        ({"todo": [[2, 2]]}, r"state has a bad todo=\[\[2, 2\]\] for 13 samples"),
        ({"todo": [[0, 4], [3, 13]]}, r"state has a bad todo=\[\[0, 4\], \[3, 13\]\]"),
        ({"todo": [[0, 14]]}, r"state has a bad todo=\[\[0, 14\]\] for 13 samples"),
        ({"position": 8}, r"position should be in the interval \[0, 7\], but got position=8"),
        # 10 positions left: 5 a rank, so worker 0 of 1 may have read 5, never 6
        ({"todo": [[3, 13]], "position": 6},
         r"position should be in the interval \[0, 5\], but got position=6"),
        # worker 1 of 2 of a rank's 7 positions reads [3, 7): 4 of them
        ({"worker": 1, "num_workers": 2, "position": 5},
         r"position should be in the interval \[0, 4\], but got position=5"),
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
    """Invariant: the elastic form needs every worker of one rank; a gap, or no state at all,
    is named."""
    ds = make([4, 9], 2, 0)
    list(ds.iter_worker(1, 2))
    with pytest.raises(
        ValueError,
        match=r"^state should list every worker's state of one rank "
        r"\(workers 0\.\.n-1, one run\), but got workers \[1\]$",
    ):
        make([4, 9], 3, 0).load_state_dict([ds.state_dict()])
    with pytest.raises(
        ValueError,
        match=r"^state should list every worker's state of one rank "
        r"\(workers 0\.\.n-1, one run\), but got workers \[\]$",
    ):
        make([4, 9], 3, 0).load_state_dict([])  # no worker at all
    with pytest.raises(TypeError, match=r"state should be a dict from state_dict\(\), but got"):
        make([4, 9], 3, 0).load_state_dict([None])


def test_a_fresh_state_is_position_0_of_the_whole_epoch_and_set_epoch_starts_afresh():
    """Invariant: before any iter(), state_dict() is worker 0 of 1 at position 0 with the whole
    stream to do; after part of an epoch, set_epoch to another starts that epoch afresh (the same
    fresh state, for the new epoch); either state resumes the whole epoch."""
    sizes = [5, 0, 4, 3]
    ds = make(sizes, 2, 1, seed=4)
    state = ds.state_dict()
    assert (state["worker"], state["num_workers"], state["position"]) == (0, 1, 0)
    assert state["todo"] == [[0, 12]] and state["epoch"] == 0
    whole = list(make(sizes, 2, 1, seed=4))
    again = make(sizes, 2, 1, seed=4)
    again.load_state_dict(state)
    assert list(again) == whole
    it = iter(ds)
    next(it), next(it)
    ds.set_epoch(1)
    state = ds.state_dict()
    assert (state["worker"], state["num_workers"], state["position"]) == (0, 1, 0)
    assert state["todo"] == [[0, 12]] and state["epoch"] == 1
    fresh = make(sizes, 2, 1, seed=4)
    fresh.set_epoch(1)
    again = make(sizes, 2, 1, seed=4)
    again.set_epoch(1)
    again.load_state_dict(state)
    assert list(again) == list(fresh)


def test_a_loaded_state_saved_again_before_reading_is_the_same_state():
    """Invariant: load_state_dict(state) then state_dict(), with nothing read between, gives the
    state back: the worker, its layout, its position (a checkpoint of a resumed run that has not
    stepped yet)."""
    ds = make([5, 0, 4, 3], 2, 1, seed=4)
    it = ds.iter_worker(1, 3)
    next(it)
    state = json.loads(json.dumps(ds.state_dict()))
    assert (state["worker"], state["num_workers"], state["position"]) == (1, 3, 1)
    again = make([5, 0, 4, 3], 2, 1, seed=4)
    again.load_state_dict(state)
    assert again.state_dict() == state


@pytest.mark.parametrize(
    ("saved", "loaded", "message"),
    [
        ((["a.tar", "b.tar"], [4, 9]), (["a.tar", "c.tar"], [4, 9]),
         r"shards was '[0-9a-f]{16}' when saved, but is '[0-9a-f]{16}' now: if these are the "
         r"same shards, their repr is not the same in every process"),
        ((["a.tar", "b.tar"], [4, 9]), (["a.tar", "b.tar"], [9, 4]),
         r"sizes was '[0-9a-f]{16}' when saved, but is '[0-9a-f]{16}' now$"),
        ((["a.tar", "b.tar"], [4, 9]), (["a.tar", "b.tar"], [3, 10]),
         r"sizes was '[0-9a-f]{16}' when saved, but is '[0-9a-f]{16}' now$"),
    ],
)  # fmt: skip
def test_a_state_of_other_shards_or_sizes_of_the_same_total_is_refused(saved, loaded, message):
    """Invariant: a state remembers which shards and sizes it was saved for: another shard list,
    or other sizes with the same total, is refused, never resumed at positions of another stream;
    the same lists (a new dataset object) are taken."""

    def dataset(shards, sizes):
        return ShardedIterableDataset(shards, sizes, Reader(sizes), num_replicas=2, rank=0)

    state = dataset(*saved).state_dict()
    dataset(*saved).load_state_dict(state)
    with pytest.raises(ValueError, match=message):
        dataset(*loaded).load_state_dict(state)


def test_a_state_missing_any_key_is_not_a_state():
    """Invariant: a dict missing any key of state_dict() is refused as not a state, whichever key
    it lacks, never read part way."""
    state, not_a_state = make([4, 9], 2, 0).state_dict(), r"state is not a \w+ state_dict\(\)"
    for key in state:
        broken = {k: v for k, v in state.items() if k != key}
        with pytest.raises(ValueError, match=not_a_state):
            make([4, 9], 2, 0).load_state_dict(broken)
        with pytest.raises(ValueError, match=not_a_state):
            make([4, 9], 3, 0).load_state_dict([broken])


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


@settings(settings.get_profile("costly"))  # loaders with workers: processes
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


def test_loader_dataset_states_without_workers_is_the_datasets_one_state():
    """Invariant: with num_workers=0 the loader's state holds the dataset's own state: the list
    has that one state, at the samples the loader yielded, and it resumes the rest."""
    ds = make(SIZES, 2, 1, seed=3)
    loader = StatefulDataLoader(ds, batch_size=4)
    it = iter(loader)
    head = [x for _ in range(2) for x in next(it).tolist()]
    states = loader_dataset_states(json.loads(json.dumps(loader.state_dict())))
    assert states == [ds.state_dict()] and states[0]["position"] == 8
    again = make(SIZES, 2, 1, seed=3)
    again.load_state_dict(states)
    assert head + list(again) == list(make(SIZES, 2, 1, seed=3))


def test_loader_dataset_states_refuses_a_state_that_lags_its_worker_snapshots():
    """Invariant: a loader state taken between worker snapshots (snapshot_every_n_steps > 1)
    would not say what was consumed: it is refused, naming the steps since the snapshot; a state
    that does not count steps since its snapshot is read as one taken at it."""
    ds = make(SIZES, 2, 1, seed=3)
    loader = StatefulDataLoader(ds, batch_size=4, num_workers=2, snapshot_every_n_steps=2)
    it = iter(loader)
    for _ in range(3):
        next(it)
    state = json.loads(json.dumps(loader.state_dict()))
    del it
    with pytest.raises(ValueError, match=r"^loader_state should be taken with snapshot_every_n_"
                                         r"steps=1, but got a state 1 steps after its last worker "
                                         r"snapshot$"):  # fmt: skip
        loader_dataset_states(state)
    del state["_steps_since_snapshot"]
    states = loader_dataset_states(state)
    assert [s["worker"] for s in states] == [0, 1] and [s["num_workers"] for s in states] == [2, 2]


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


class _Shard:
    """A shard object as users write them: its default repr holds its address."""

    def __init__(self, path: str) -> None:
        self.path = path


def test_shards_whose_repr_is_not_stable_are_refused_at_once_and_key_names_them():
    """Invariant: a shard whose ``repr`` holds an address (new in every process) could never
    load a state: the constructor says so, naming the shard and ``key=``; with ``key=`` a state
    saved over one set of objects loads over new objects of the same paths (another process)."""
    sizes = [3, 2]
    read = lambda shard: iter(range(sizes[int(shard.path)]))  # noqa: E731
    with pytest.raises(ValueError, match=r"shards\[0\] should have a repr .* pass key="):
        ShardedIterableDataset([_Shard("0"), _Shard("1")], sizes, read, num_replicas=1, rank=0)
    make = lambda: ShardedIterableDataset(  # noqa: E731
        [_Shard("0"), _Shard("1")], sizes, read, num_replicas=1, rank=0, key=lambda s: s.path
    )
    first = make()
    it = iter(first)
    read_before = [next(it), next(it)]
    resumed = make()  # new objects, new addresses: the same names
    resumed.load_state_dict(first.state_dict())
    assert sorted(read_before + list(resumed)) == sorted(make())
    with pytest.raises(TypeError, match=r"key\(shards\[0\]\)=0 of type int"):
        ShardedIterableDataset([_Shard("0")], [3], read, num_replicas=1, rank=0, key=lambda s: 0)


@given(shard_size_lists, shard_world_sizes, shard_worker_counts, st.integers(1, 5), st.data())
def test_with_a_batch_size_each_workers_range_is_whole_batches_and_the_loader_counts_them(
    sizes, world, workers, batch, data
):
    """Invariant: with ``batch_size=B``, worker ``k``'s range of a rank's ``L`` samples is a run
    of whole batches (only the last worker's may end short), the ranges cover the rank's range
    in order, and the batches the workers make number ``ceil(L / B)``: ``len(loader)``."""
    rank = data.draw(st.integers(0, world - 1))
    ds = make(sizes, world, rank, batch_size=batch)
    alone = make(sizes, world, rank)
    runs = [ds.worker_runs(k, workers) for k in range(workers)]
    counts = [sum(stop - first for _, first, stop in r) for r in runs]
    assert sum(counts) == len(ds) == len(alone)
    assert all(c % batch == 0 for c in counts[:-1])
    assert sum(-(-c // batch) for c in counts) == -(-len(ds) // batch)
    samples = [x for k in range(workers) for x in ds.iter_worker(k, workers)]
    assert samples == list(alone)


def test_state_dict_in_the_main_process_refuses_when_workers_read_the_epoch():
    """Invariant: after a ``DataLoader`` with workers read an epoch, the main process's copy
    knows nothing of their places: its ``state_dict()`` says so and names the way out, never
    ``position: 0``; without workers (the main process read it) the state is the place; a new
    epoch the workers have not read is the main process's to describe again."""
    ds = make([4, 3], 1, 0)
    batches = list(DataLoader(ds, batch_size=2, num_workers=2))
    assert sum(len(b) for b in batches) == 7
    with pytest.raises(RuntimeError, match=f"^{re.escape(WORKERS_READ.format(0, ''))}$"):
        ds.state_dict()
    ds.set_epoch(1)
    assert ds.state_dict()["position"] == 0
    alone = make([4, 3], 1, 0)
    list(DataLoader(alone, batch_size=2, num_workers=0))
    assert alone.state_dict()["position"] == 7


#: the main process's refusal once DataLoader workers read the epoch ({0}: the epoch; {1}: what
#: it adds where this process read the epoch too)
WORKERS_READ = (
    "state_dict() was called in the main process, but DataLoader workers read this epoch ({0}) "
    "from their own copies: only they know their places{1}. Resume through torchdata's "
    "StatefulDataLoader (it asks every worker), or read the epoch with num_workers=0 (after "
    "load_state_dict or another set_epoch, a state can be taken here again)"
)
OWN_READS = " (this process's own reads are not the loop's)"


@pytest.mark.parametrize("peek", [1, 4])
def test_a_look_in_the_main_process_before_the_workers_read_does_not_lift_the_refusal(peek):
    """Invariant: a look at ``peek`` samples in the main process (an ``iter()`` there), then a
    DataLoader whose 2 workers train on 2 batches: ``state_dict(consumed=4)`` refuses, naming
    the workers and the way out, not the look (the look's place is not the loop's: resumed from
    it, the loop would read samples again and skip others); a load in the main process places
    the dataset there again, and a state can be taken."""
    sizes = [5, 2, 7, 0, 3, 4]
    ds = make(sizes, 2, 1, batch_size=2)
    ds.set_epoch(0)
    list(islice(iter(ds), peek))  # a look at the data
    ds.set_epoch(0)
    it = iter(DataLoader(ds, batch_size=2, num_workers=2))
    trained = [next(it).tolist(), next(it).tolist()]
    assert sum(map(len, trained)) == 4
    with pytest.raises(RuntimeError, match=f"^{re.escape(WORKERS_READ.format(0, OWN_READS))}$"):
        ds.state_dict(consumed=4)
    del it
    saved = make(sizes, 2, 1, batch_size=2)
    head = list(islice(iter(saved), 3))
    ds.set_epoch(0)
    ds.load_state_dict(saved.state_dict())
    assert ds.state_dict()["position"] == 3
    assert head + list(ds) == list(make(sizes, 2, 1, batch_size=2))


def test_consumed_counts_from_where_the_latest_iter_began_and_before_is_checked():
    """Invariant: in the main process (no workers), ``state_dict(consumed=k)`` is the state
    after ``k`` samples of the latest ``iter()``, which after a load begins at the loaded
    position; more than it handed out is refused with the exact count; a state whose
    ``before`` is not a count >= 0 is refused naming ``before``, whole or in a worker list."""
    whole = list(make([4, 3, 5], 1, 0))
    ds = make([4, 3, 5], 1, 0)
    it = iter(ds)
    for _ in range(5):
        next(it)
    assert ds.state_dict(consumed=3)["position"] == 3
    loaded = make([4, 3, 5], 1, 0)
    loaded.load_state_dict(ds.state_dict(consumed=3))
    it = iter(loaded)
    next(it), next(it)
    state = loaded.state_dict(consumed=1)
    assert state["position"] == 4
    message = r"^consumed should be <= 2 \(samples handed out\): the latest iter\(\) handed out 2, but got consumed=3$"
    with pytest.raises(ValueError, match=message):
        loaded.state_dict(consumed=3)
    resumed = make([4, 3, 5], 1, 0)
    resumed.load_state_dict(state)
    assert whole[:4] + list(resumed) == whole
    words = {-1: "before should be >= 0, but got before=-1",
             "x": "before should be an integer, but got before='x' of type str"}  # fmt: skip
    for bad, error in ((-1, ValueError), ("x", TypeError)):
        with pytest.raises(error, match=f"^{re.escape(words[bad])}$"):
            make([4, 3, 5], 1, 0).load_state_dict({**state, "before": bad})
        with pytest.raises(error, match=f"^{re.escape(words[bad])}$"):
            make([4, 3, 5], 1, 0).load_state_dict([{**state, "before": bad}])


@given(st.integers(1, 4), st.integers(2, 3), st.integers(1, 3), st.data())
def test_every_workers_state_with_a_batch_size_resumes_on_another_world_once(
    batch, workers, world2, data
):
    """Invariant: with ``batch_size=B`` and workers, every worker's state of one rank (each
    stopped after some samples) loads on another world: the ranks before and after read every
    sample once but the padding, and each state's position is checked against its worker's
    whole-batch range (a position past it is refused)."""
    sizes, world = [5, 0, 7, 4], 2
    per_rank = [make(sizes, world, r, batch_size=batch) for r in range(world)]
    spans = [sum(c - a for _, a, c in per_rank[0].worker_runs(k, workers)) for k in range(workers)]
    stops = [data.draw(st.integers(0, span)) for span in spans]  # the ranks read in step
    read, states = [], []
    for ds in per_rank:
        for k in range(workers):
            it = ds.iter_worker(k, workers)
            read += [next(it) for _ in range(stops[k])]
            if ds is per_rank[0]:
                states.append(json.loads(json.dumps(ds.state_dict())))
    lo_hi = [sum(c - a for _, a, c in per_rank[0].worker_runs(k, workers)) for k in range(workers)]
    with pytest.raises(ValueError, match="position"):
        make(sizes, world, 0, batch_size=batch).load_state_dict(
            {**states[0], "position": lo_hi[0] + 1}
        )
    rest = []
    for rank in range(world2):
        ds = make(sizes, world2, rank, batch_size=batch)
        ds.load_state_dict(states)
        rest += list(ds)
    assert set(read + rest) == set(make(sizes, 1, 0))
    repeats = len(read + rest) - len(set(read + rest))
    assert repeats < world + world2


def test_the_new_arguments_and_refusals_say_exactly_what_to_change():
    """Invariant: a ``batch_size`` below 1 and a ``read`` that returns no iterable are refused
    with messages that name the argument and value whole; a state's fingerprint holds the
    batch size, so a state saved with another one is refused naming ``batch_size``."""
    read = lambda shard, start=0: iter(range(start, 3))  # noqa: E731
    with pytest.raises(ValueError) as caught:
        ShardedIterableDataset([0], [3], read, num_replicas=1, rank=0, batch_size=0)
    assert str(caught.value) == "batch_size should be >= 1, but got batch_size=0"
    none = ShardedIterableDataset([0], [3], lambda shard: None, num_replicas=1, rank=0)
    with pytest.raises(TypeError) as caught:
        list(none)
    assert str(caught.value) == (
        "read should return an iterable of the shard's samples, but got read(0)=None for "
        "shard 0 (shards[0])"
    )
    seeking = ShardedIterableDataset(
        [0], [3], lambda shard, start: None, num_replicas=1, rank=0, seekable=True
    )
    with pytest.raises(TypeError) as caught:
        list(seeking)
    assert str(caught.value) == (
        "read should return an iterable of the shard's samples, but got read(0, 0)=None for "
        "shard 0 (shards[0])"
    )
    two = ShardedIterableDataset([0], [3], read, num_replicas=1, rank=0, batch_size=2)
    state = two.state_dict()
    assert state["batch_size"] == 2 and state["before"] == 0
    with pytest.raises(ValueError, match=r"batch_size was 2 when saved, but is 1 now"):
        ShardedIterableDataset([0], [3], read, num_replicas=1, rank=0).load_state_dict(state)


# --- DataLoader workers: len(loader), the batch_size warning, a late set_epoch ---------------------

SIZES_11 = [4, 4, 3]  # a rank of 11 samples: batches of 4 split sample by sample end short twice


def _read_11(shard: int, start: int = 0) -> range:
    return range(10 * shard + start, 10 * shard + SIZES_11[shard])


def test_a_sharded_loader_with_workers_needs_the_batch_size_for_len_to_be_true():
    """Invariant: split sample by sample, two workers each end on a short batch, so the loader
    yields one batch more than ``len(loader)`` (a Trainer stops at ``len`` and never reads it);
    with ``batch_size=`` the workers' ranges are whole batches and ``len(loader)`` is exact."""
    for batch_size, extra in ((None, 1), (4, 0)):
        dataset = ShardedIterableDataset([0, 1, 2], SIZES_11, _read_11, num_replicas=1, rank=0,
                                         batch_size=batch_size)  # fmt: skip
        dl = DataLoader(dataset, batch_size=4, num_workers=2)
        batches = list(dl)
        assert len(batches) == len(dl) + extra == 3 + extra
        with pytest.warns(FrameworkWarning, match=AGAIN):  # the workers' epoch, read again here
            assert sorted(i for b in batches for i in b.tolist()) == sorted(dataset)


WARNED = """
from torch.utils.data import DataLoader
from distsampling import ShardedIterableDataset
sizes = [4, 4, 3]
read = lambda shard, start=0: range(10 * shard + start, 10 * shard + sizes[shard])
dataset = ShardedIterableDataset([0, 1, 2], sizes, read, num_replicas=1, rank=0, batch_size=BATCH)
loader = DataLoader(dataset, batch_size=4, num_workers=2)
for epoch in range(2):
    dataset.set_epoch(epoch)
    print(len(loader), len(list(loader)))
"""


@pytest.mark.parametrize("batch_size", [None, 4])
def test_workers_without_batch_size_warn_once_naming_it_and_the_batches_len_misses(batch_size):
    """Invariant: without ``batch_size=``, worker 0 warns once over two epochs (in a program of
    its own, as a user runs it: the warning is printed by the worker), naming ``batch_size=``,
    the workers' ranges and how many batches ``len(loader)`` misses for the common sizes;
    with it, nothing is said and ``len(loader)`` is what the loader yields."""
    import subprocess
    import sys

    code = WARNED.replace("BATCH", repr(batch_size))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    said = done.stderr
    if batch_size is None:
        assert done.stdout.split() == ["3", "4", "3", "4"]
        assert said.count("ShardedIterableDataset is read by 2 DataLoader workers") == 1
        assert "without batch_size=: split sample by sample (5 + 6 of this rank's 11)" in said
        assert "len(loader) misses up to 1 of them (0 with batch_size=2, 1 with " in said
        assert "Pass ShardedIterableDataset(..., batch_size=B)" in said
    else:
        assert done.stdout.split() == ["3", "3", "3", "3"]
        assert "ShardedIterableDataset" not in said


def test_one_worker_or_a_split_that_cannot_miss_a_batch_is_not_warned_about():
    """Invariant: one worker (its range is the rank's) and a rank whose split can never end on
    two short batches (1 sample) draw no warning (the workers' warnings are recorded here)."""
    import warnings

    with warnings.catch_warnings(record=True) as said:  # a forked worker records into its copy
        warnings.simplefilter("always")
        one = ShardedIterableDataset([0, 1, 2], SIZES_11, _read_11, num_replicas=1, rank=0)
        one._warn_batches(1)
        tiny = ShardedIterableDataset([0], [1], lambda shard: iter([7]), num_replicas=1, rank=0)
        tiny._warn_batches(2)
        two = ShardedIterableDataset([0, 1, 2], SIZES_11, _read_11, num_replicas=1, rank=0)
        two._warn_batches(2)
        two._warn_batches(2)  # once
        empty = ShardedIterableDataset([0], [1], lambda shard: iter([7]), num_replicas=2, rank=0,
                                       drop_last=True)  # fmt: skip
        empty._warn_batches(2)  # a rank of 0 samples: nothing to miss
    assert [str(w.message)[:60] for w in said] == [
        "ShardedIterableDataset is read by 2 DataLoader workers witho"
    ]


def _batches_warned(sizes: list[int], num_workers: int) -> str:
    """The warning about ``num_workers`` workers splitting a rank of ``sizes`` sample by sample,
    its counts found by reading each worker's range as the DataLoader batches it."""
    ds = ShardedIterableDataset(list(range(len(sizes))), sizes, Reader(sizes), num_replicas=1,
                                rank=0)  # fmt: skip
    ranges = [len(list(ds.iter_worker(k, num_workers))) for k in range(num_workers)]
    length = sum(ranges)
    miss = {b: sum(len(range(0, r, b)) for r in ranges) - len(range(0, length, b))
            for b in range(1, length + 1)}  # fmt: skip
    common = ", ".join(
        f"{miss[b]} with batch_size={b}" for b in (2, 4, 8, 16, 32, 64) if b <= length
    )
    return (
        f"ShardedIterableDataset is read by {num_workers} DataLoader workers without batch_size=: "
        f"split sample by sample ({' + '.join(map(str, ranges))} of this rank's {length}), the "
        "workers' short batches make the loader yield more batches than len(loader) counts, and "
        "a Trainer, which ends the epoch at len(loader), never trains on them: len(loader) misses "
        f"up to {max(miss.values())} of them ({common}). Pass ShardedIterableDataset(..., "
        "batch_size=B), B the DataLoader's batch_size"
    )


@pytest.mark.parametrize("sizes", [[4, 4, 3], [2], [70]])
def test_the_batch_size_warning_counts_each_common_batch_size_and_points_at_iter(sizes):
    """Invariant: the warning says, word for word, the workers' ranges and how many batches
    ``len(loader)`` misses for each common batch size up to the rank's length (counted here by
    batching each worker's range), and points at the line that called ``iter()`` on the
    dataset (``stacklevel``: ``_warn_batches``, then ``__iter__``, then that line)."""
    import traceback
    import warnings

    dataset = ShardedIterableDataset(list(range(len(sizes))), sizes, Reader(sizes),
                                     num_replicas=1, rank=0)  # fmt: skip

    def __iter__(num_workers) -> None:  # the frame of ShardedIterableDataset.__iter__
        dataset._warn_batches(num_workers)

    # where stacklevel=3 points: two frames above _warn_batches's own, read off the traceback
    # of a call that fails inside it from the same lines (so it holds also where mutation
    # testing wraps each function in frames of its own)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        for num_workers in ("two", 2):
            try:
                __iter__(num_workers)  # the caller of iter(dataset)
            except TypeError as e:
                frames = traceback.extract_tb(e.__traceback__)
    assert frames[-1].filename == sharded.__file__
    assert [str(w.message) for w in said] == [_batches_warned(sizes, 2)]
    assert (said[0].filename, said[0].lineno) == (frames[-3].filename, frames[-3].lineno)


def _slow_start(worker_id: int) -> None:
    import time

    time.sleep(1.0 * worker_id)  # worker 1 starts its iter() a second after worker 0


def _plans(dataset: ShardedIterableDataset, epochs: int) -> list[list[list[int]]]:
    """Each epoch's batches of 2 from 2 workers, worker 0's and worker 1's in turn (the loader's
    order), each epoch checked whole against ``list(dataset)``, the main process's read.
    (That ``iter()`` is also what lets mutation testing, which sees only this process, run the
    tests below against the worker branch of ``__iter__``.)"""
    plans = []
    for epoch in range(epochs):
        dataset.set_epoch(epoch)
        chunks = [list(dataset.iter_worker(k, 2)) for k in range(2)]
        assert sorted(chunks[0] + chunks[1]) == sorted(dataset)
        chunks = [[c[i : i + 2] for i in range(0, len(c), 2)] for c in chunks]
        plans.append([b for pair in zip_longest(*chunks) for b in pair if b])
    return plans


def test_a_late_set_epoch_never_reaches_a_loader_worker_slow_to_start():
    """Invariant: ``set_epoch(1)`` after the first batch of epoch 0, while worker 1 has not yet
    begun (it starts a second late): the loop reads epoch 0, whole and once, in every worker;
    the next ``iter()`` reads epoch 1. A worker holds the epoch of its loader's ``iter()``."""
    dataset = ShardedIterableDataset([0, 1, 2], SIZES_11, _read_11, num_replicas=1, rank=0,
                                     batch_size=2, seed=1)  # fmt: skip
    plans = _plans(dataset, 2)
    assert plans[0] != plans[1]  # the test can tell the epochs apart
    dl = DataLoader(dataset, batch_size=2, num_workers=2, worker_init_fn=_slow_start)
    dataset.set_epoch(0)
    it = iter(dl)
    first = [next(it).tolist()]
    dataset.set_epoch(1)  # late: worker 1 is still asleep
    assert first + [b.tolist() for b in it] == plans[0]
    assert [b.tolist() for b in dl] == plans[1]


def test_persistent_loader_workers_read_the_epoch_set_before_each_iter():
    """Invariant: with ``persistent_workers=True`` the workers are started once; each later
    ``iter()`` reads the epoch ``set_epoch`` set before it (shared with the workers), not the
    epoch of their start: three epochs, each its own batches, in the loader's order."""
    dataset = ShardedIterableDataset([0, 1, 2], SIZES_11, _read_11, num_replicas=1, rank=0,
                                     batch_size=2, seed=1)  # fmt: skip
    plans = _plans(dataset, 3)
    assert len({str(p) for p in plans}) == 3  # the test can tell the epochs apart
    dl = DataLoader(dataset, batch_size=2, num_workers=2, persistent_workers=True)
    for epoch in range(3):
        dataset.set_epoch(epoch)
        assert [b.tolist() for b in dl] == plans[epoch]


def _log_warnings(path: str, worker_id: int) -> None:
    # a worker_init_fn: this worker's warnings go to `path`, one line each, with its id (under
    # pytest a forked worker would record them into its copy of pytest's list, unseen)
    import warnings

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        with open(path, "a") as f:
            f.write(f"worker {worker_id}: {category.__name__}: {message}\n")

    warnings.showwarning = show


@pytest.mark.parametrize("batch_size", [None, 4])
def test_only_worker_0_warns_once_and_only_without_batch_size(batch_size, tmp_path):
    """Invariant: over two epochs of a loader with 2 workers, the workers' warnings are one,
    from worker 0, without ``batch_size=``, and none with it. Worker 0 alone checks the flag
    the workers share, so no two workers can both find it unset and warn twice."""
    from functools import partial

    said = tmp_path / "said.txt"
    said.touch()
    dataset = ShardedIterableDataset([0, 1, 2], SIZES_11, _read_11, num_replicas=1, rank=0,
                                     batch_size=batch_size)  # fmt: skip
    loader = DataLoader(dataset, batch_size=4, num_workers=2,
                        worker_init_fn=partial(_log_warnings, str(said)))  # fmt: skip
    for epoch in range(2):
        dataset.set_epoch(epoch)
        # every sample once (list(dataset): the main process's read, which also lets mutation
        # testing run this test against the worker branch of __iter__; it reads the workers'
        # epoch again, and says so)
        read = sorted(x for b in loader for x in b.tolist())
        with pytest.warns(FrameworkWarning, match=AGAIN):
            assert read == sorted(dataset)
    lines = said.read_text().splitlines()
    if batch_size is None:
        assert len(lines) == 1
        assert lines[0].startswith(
            "worker 0: UserWarning: ShardedIterableDataset is read by 2 DataLoader workers "
            "without batch_size=: split sample by sample (5 + 6 of this rank's 11)"
        )
    else:
        assert lines == []


# --- accelerate's prepare(loader) over a rank's share: refused before a batch ------------------


def _share(world: int) -> ShardedIterableDataset:
    """A rank's share of two shards (6 and 7 samples), rank 0 of ``world``."""
    read = lambda k, s=0: range(10 * k + s, 10 * k + 6 + k)  # noqa: E731
    return ShardedIterableDataset([0, 1], [6, 7], read, num_replicas=world, rank=0, seed=6)


def test_accelerates_dispatcher_setting_the_epoch_of_a_ranks_share_is_refused():
    """Invariant: accelerate's ``DataLoaderDispatcher`` (``prepare(loader)`` over an iterable
    dataset) calls ``set_epoch`` on every process, then reads the dataset on process 0 only and
    splits its batches: a rank's share would train each process on a part of it. Its real
    ``set_epoch`` raises there, on every process, before any batch, in these exact words; one
    process, or the share of one rank (the whole dataset), is read without a word."""
    pytest.importorskip("accelerate")
    from test_sharded_mixture import dispatcher_refuses

    dispatcher_refuses(_share(2), _share(1))


def test_accelerates_iterable_shard_may_set_the_epoch_and_is_refused_where_it_reads():
    """Invariant: accelerate's ``IterableDatasetShard`` (``dispatch_batches=False``) forwards
    ``set_epoch`` to the dataset before each pass: that sets the epoch and is not refused (the
    dispatcher alone is refused there); its ``__iter__`` is, before a sample, naming it."""
    pytest.importorskip("accelerate")
    from test_sharded_mixture import iterable_shard_sets_the_epoch_and_refuses_reading

    iterable_shard_sets_the_epoch_and_refuses_reading(_share(2))
