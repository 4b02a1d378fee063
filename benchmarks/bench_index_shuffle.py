"""IndexShuffleSampler: one rank's epoch without the epoch's permutation, N = 1e8 and 5.85e9.

N = 1e8, world 64, rank 0: ``set_epoch``, then this rank's share as a list of Python ints
(``first_s``: the first index out), for torch's ``DistributedSampler`` (a Python list of all
``N`` indices on every rank), ours (``randperm`` as an int32 tensor, the share converted) and
``IndexShuffleSampler`` (the order computed at the share's positions only). N = 1e8 runs
without ``--large``: it is the size the sampler is for (torch's run takes seconds and GBs).

N = 5,850,000,000 (LAION-5B's pairs), world 1024, rank 0: no permutation of that length fits in
memory (an int64 one is 47 GB), so ``IndexShuffleSampler`` runs alone, against a floor taken in
the same process: iterating a ready Python list of the same 5,712,891 ints, the least any
sampler that hands out Python ints costs. The process first reads one index of epoch 0 (torch's
lazy start-up is not the sampler's), then the span is ``set_epoch(1)``, ``iter``, the first
index (``first_s``) and the whole share, discarded as read (``time_s``; ``peak_MiB``: the memory
it grew by). After the span the same share is built as a list and iterated (``floor_s``);
``x_floor`` is ``time_s / floor_s`` of that one process, so its spread is the ratio's own.

Both also run with ``torch.set_num_threads(1)`` (``1 torch thread``): the cipher and its
bookkeeping are numpy's, on one thread, so torch's intra-op threads should change nothing
(they used to cost more than they saved on these small blocks once the other cores were busy,
as a training process's cores are).

A few positions at a time (``where``, or a user's loop over some indices): ``index_shuffle``
called ``calls`` times on one position as an int (the Python path), on 8 ints (the Python
path, one call), and on a one-element tensor (the array path, numpy's fixed cost per call),
the baseline: ``us_per_call`` is the time of one call.

Then the resumable form at that size: the first index of a new epoch, and after loading the
state that rank 0 of 1024 saved after 1000 indices, on rank 5 of 768 (an elastic resume). Its
``iter()`` asks the order a block at a time from where it resumed, as the plain form does, so
its first index costs one block: never ``O(share)``, let alone ``O(N)``. Each process warms its
operations up on one block first.
"""

from __future__ import annotations

import time
from itertools import chain, islice

import torch
import torch.utils.data as tud

from distsampling import (
    DistributedSampler,
    IndexShuffleSampler,
    ResumableIndexShuffleSampler,
    index_shuffle,
)

from ._harness import ROOT, Comparison

EPOCH = 1
LAION = 5_850_000_000  # LAION-5B's image-text pairs
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
PER_INDEX = 1 << 16  # indices per run in the per-index comparison


def _share_as_list(timer, sampler) -> None:
    timer.start()
    sampler.set_epoch(EPOCH)
    it = iter(sampler)
    first = next(it)
    timer.first()
    share = [first, *it]  # this rank's epoch, as Python ints
    timer.stop()
    assert len(share) == len(sampler)


def torch_(timer, n: int, world: int) -> None:
    _share_as_list(timer, tud.DistributedSampler(range(n), num_replicas=world, rank=0))


def ours(timer, n: int, world: int) -> None:
    _share_as_list(timer, DistributedSampler(range(n), num_replicas=world, rank=0))


def shuffled_at_positions(timer, n: int, world: int) -> None:
    _share_as_list(timer, IndexShuffleSampler(range(n), num_replicas=world, rank=0))


def shuffled_one_thread(timer, n: int, world: int) -> None:
    torch.set_num_threads(1)
    shuffled_at_positions(timer, n, world)


def share_and_floor_one_thread(timer, n: int, world: int) -> dict[str, float]:
    torch.set_num_threads(1)
    return share_and_floor(timer, n, world)


def share_and_floor(timer, n: int, world: int) -> dict[str, float]:
    sampler = IndexShuffleSampler(range(n), num_replicas=world, rank=0)
    next(iter(sampler))  # epoch 0's first index: torch's first calls are behind us
    timer.start()
    sampler.set_epoch(EPOCH)
    it = iter(sampler)
    next(it)
    timer.first()
    for _ in it:
        pass
    timer.stop()
    share = sampler.indices()  # the same share, as a ready int64 tensor ...
    t0 = time.perf_counter()  # ... turned into ints a block at a time, as any tensor sampler must
    # (numpy's tolist: the faster of the two, and the one the sampler uses)
    for _ in chain.from_iterable(block.numpy().tolist() for block in share.split(1 << 14)):
        pass
    tensor_floor_s = time.perf_counter() - t0
    ready = share.tolist()  # ... and as a ready list of Python ints
    t0 = time.perf_counter()
    for _ in ready:
        pass
    floor_s = time.perf_counter() - t0
    span = timer.t_end - timer.t0
    return {
        "floor_s": floor_s,
        "x_floor": span / floor_s,
        "tensor_floor_s": tensor_floor_s,
        "x_tensor_floor": span / tensor_floor_s,
    }


def _first_index(timer, sampler, state: dict | None = None) -> None:
    index_shuffle(torch.arange(1 << 15), LAION, 0)  # torch's first calls, on one block
    timer.start()
    if state is None:
        sampler.set_epoch(EPOCH)
    else:
        sampler.load_state_dict(state)
    next(iter(sampler))
    timer.first()
    timer.stop()


def plain_first(timer, n: int, world: int, resume_world: int) -> None:
    _first_index(timer, IndexShuffleSampler(range(n), num_replicas=world, rank=0))


def resumable_first(timer, n: int, world: int, resume_world: int) -> None:
    _first_index(timer, ResumableIndexShuffleSampler(range(n), num_replicas=world, rank=0))


def resumed_first(timer, n: int, world: int, resume_world: int) -> None:
    saver = ResumableIndexShuffleSampler(range(n), num_replicas=world, rank=0)
    saver.set_epoch(EPOCH)
    # the state after 1000 indices, as rank 0 saves it (what iter() read is not measured here)
    state = saver.state_dict() | {"position": 1000}
    sampler = ResumableIndexShuffleSampler(range(n), num_replicas=resume_world, rank=5)
    _first_index(timer, sampler, state)


def grain_per_index(timer, n: int, world: int, count: int) -> dict[str, float]:
    import grain.python as grain  # in the peers' venv only

    grain.IndexSampler(n, shuffle=True, num_epochs=1, seed=1)[0]  # its first call, untimed
    timer.start()
    shard = grain.ShardOptions(shard_index=3, shard_count=world, drop_remainder=False)
    sampler = grain.IndexSampler(n, shard_options=shard, shuffle=True, num_epochs=1, seed=0)
    # Grain's loader asks shard k for the global indices k, k + world, ... (its own stride)
    keys = [sampler[3 + step * world].record_key for step in range(count)]
    timer.first()
    timer.stop()
    assert len(set(keys)) == count and all(0 <= k < n for k in keys)
    return {"us_per_index": (timer.t_end - timer.t0) / count * 1e6}


def ours_per_index(timer, n: int, world: int, count: int) -> dict[str, float]:
    sampler = IndexShuffleSampler(range(n), num_replicas=world, rank=3)
    index_shuffle(torch.arange(1 << 15), n, 0)  # torch's first calls, untimed
    timer.start()
    sampler.set_epoch(EPOCH)
    keys = list(islice(sampler, count))
    timer.first()
    timer.stop()
    assert len(set(keys)) == count and all(0 <= k < n for k in keys)
    return {"us_per_index": (timer.t_end - timer.t0) / count * 1e6}


def _calls(timer, positions: list, n: int, calls: int) -> dict[str, float]:
    index_shuffle(positions[0], n, 1)  # first calls (imports, caches) untimed
    timer.start()
    for k in range(calls):
        index_shuffle(positions[k % len(positions)], n, 0)
    timer.first()
    timer.stop()
    return {"us_per_call": (timer.t_end - timer.t0) / calls * 1e6}


def one_int(timer, n: int, calls: int) -> dict[str, float]:
    return _calls(timer, [n // 3 + k for k in range(64)], n, calls)


def eight_ints(timer, n: int, calls: int) -> dict[str, float]:
    return _calls(timer, [[n // 3 + k + j for j in range(8)] for k in range(64)], n, calls)


def one_element_tensor(timer, n: int, calls: int) -> dict[str, float]:
    return _calls(timer, [torch.tensor([n // 3 + k]) for k in range(64)], n, calls)


def suite(large: bool) -> list[Comparison]:
    n, world = 10**8, 64
    epoch = Comparison(
        title=f"One rank's epoch, N={n:.0e}, world {world}",
        contenders={
            "torch": "bench_index_shuffle:torch_",
            "distsampling DistributedSampler": "bench_index_shuffle:ours",
            "IndexShuffleSampler": "bench_index_shuffle:shuffled_at_positions",
            "IndexShuffleSampler, 1 torch thread": "bench_index_shuffle:shuffled_one_thread",
        },
        baseline="torch",
        params={"n": n, "world": world},
        note="set_epoch + the share as a list of Python ints",
        columns=("time_s", "first_s", "peak_MiB"),
    )
    billions = Comparison(
        title=f"One rank's epoch, N={LAION:,}, world 1024 ({-(-LAION // 1024):,} indices)",
        contenders={
            "IndexShuffleSampler": "bench_index_shuffle:share_and_floor",
            "IndexShuffleSampler, 1 torch thread": "bench_index_shuffle:share_and_floor_one_thread",
        },
        baseline="IndexShuffleSampler",
        params={"n": LAION, "world": 1024},
        note="set_epoch + the share read and discarded; floor_s: a ready list of as many ints "
        "iterated in the same process, x_floor = time_s / floor_s; tensor_floor_s: a ready int64 "
        "tensor of the share turned into ints a block of 2**14 at a time and iterated",
        columns=(
            "first_s",
            "time_s",
            "floor_s",
            "x_floor",
            "tensor_floor_s",
            "x_tensor_floor",
            "peak_MiB",
        ),
        ratios=("first_s", "time_s"),
    )
    resume = Comparison(
        title=f"First index of the resumable form, N={LAION:,}, world 1024",
        contenders={
            "IndexShuffleSampler, new epoch": "bench_index_shuffle:plain_first",
            "ResumableIndexShuffleSampler, new epoch": "bench_index_shuffle:resumable_first",
            "ResumableIndexShuffleSampler, resumed on 768": "bench_index_shuffle:resumed_first",
        },
        baseline="IndexShuffleSampler, new epoch",
        params={"n": LAION, "world": 1024, "resume_world": 768},
        note="set_epoch (or load_state_dict) + iter + the first index",
        columns=("first_s", "peak_MiB"),
    )
    few = Comparison(
        title=f"A few positions a call, N={LAION:,}",
        contenders={
            "index_shuffle(tensor([p])), the array path": "bench_index_shuffle:one_element_tensor",
            "index_shuffle(p), an int": "bench_index_shuffle:one_int",
            "index_shuffle([8 ints])": "bench_index_shuffle:eight_ints",
        },
        baseline="index_shuffle(tensor([p])), the array path",
        params={"n": LAION, "calls": 20_000},
        note="us_per_call: the time of one call, over `calls` calls in one process",
        columns=("us_per_call", "time_s"),
    )
    comparisons = [epoch, billions, resume, few]
    if PEERS_PYTHON.exists():  # Grain lives in the peers' venv (make .venv-peers/.installed)
        comparisons.append(
            Comparison(
                title=f"Per index against Grain's IndexSampler, N={LAION:,}, world 1024, "
                f"{PER_INDEX:,} indices",
                contenders={
                    "grain IndexSampler": "bench_index_shuffle:grain_per_index",
                    "IndexShuffleSampler": "bench_index_shuffle:ours_per_index",
                },
                baseline="grain IndexSampler",
                params={"n": LAION, "world": 1024, "count": PER_INDEX},
                note="both in the peers' venv (.venv-peers): set_epoch or a new sampler, then "
                "the first `count` indices of rank 3's share as ints; us_per_index = time / count",
                columns=("us_per_index", "time_s", "peak_MiB"),
                python=str(PEERS_PYTHON),
            )
        )
    else:
        print(
            f"(Grain's IndexSampler is measured in {PEERS_PYTHON.parent.parent}: make bench-peers)"
        )
    return comparisons
