"""Time to the first index after ``set_epoch``: DistributedSampler alone vs OrderAhead, N = 1e7, 1e8.

A shuffled epoch starts with ``torch.randperm(N)``, which the first index waits for. Each run
builds the sampler (world 8, rank 0), reads all of epoch 0, "trains" for ``train_s`` seconds (a
sleep: the GPU's time, during which OrderAhead draws epoch 1 on its thread), then times
``set_epoch(1)``, ``iter()`` and the first index. ``train_s`` is chosen longer than one
``randperm(N)`` on a busy 2-core machine, so the draw is done when the loop asks; the spread
would show any wait for it. ``peak_MiB`` is the memory that span allocates (the plain sampler's
permutation; OrderAhead's was allocated during the sleep).

N = 1e8 runs without ``--large``: it is the size the wrapper is for.

Also here: does ``randperm`` release the GIL? A Python loop counts turns in the main thread for
as long as ``randperm(1e8)`` runs on another thread (OrderAhead's arrangement), against the same
loop alone for as long. With the GIL held during the draw the loop would stop (ratio near 0);
released, it runs on (near 1 with a spare core; lower when the cores are busy).
"""

from __future__ import annotations

import threading
import time

import torch

from distsampling import DistributedSampler, OrderAhead

from ._harness import Comparison

WORLD, SEED = 8, 0


def _first_index_after_set_epoch(timer, sampler, train_s: float) -> None:
    sampler.set_epoch(0)
    for _ in sampler:  # epoch 0, read whole: OrderAhead starts drawing epoch 1 at its 2nd index
        pass
    time.sleep(train_s)  # the rest of the training epoch
    timer.start()
    sampler.set_epoch(1)
    next(iter(sampler))
    timer.first()
    timer.stop()


def plain(timer, n: int, train_s: float) -> None:
    sampler = DistributedSampler(range(n), num_replicas=WORLD, rank=0, seed=SEED)
    _first_index_after_set_epoch(timer, sampler, train_s)


def ahead(timer, n: int, train_s: float) -> None:
    sampler = OrderAhead(DistributedSampler(range(n), num_replicas=WORLD, rank=0, seed=SEED))
    _first_index_after_set_epoch(timer, sampler, train_s)


def _turns(until: threading.Event) -> tuple[int, float]:
    # a Python loop: turns until the event is set, and how long it ran. Both contenders run this
    # very loop (the same work per turn), so their ratio says only whether the draw lets it run
    turns, t0 = 0, time.perf_counter()
    while not until.is_set():
        turns += 1
    return turns, time.perf_counter() - t0


def loop_alone(timer, n: int) -> dict[str, float]:
    g = torch.Generator().manual_seed(SEED)
    t0 = time.perf_counter()
    torch.randperm(n, generator=g, dtype=torch.int32)  # how long the draw takes here, alone
    draw_s = time.perf_counter() - t0
    done = threading.Event()
    alarm = threading.Timer(draw_s, done.set)  # sleeps, then ends the loop: no core taken
    timer.start()
    alarm.start()
    turns, spent = _turns(done)  # the loop alone, for as long as the draw took
    timer.stop()
    alarm.join()
    return {"Mturns/s": turns / spent / 1e6}


def loop_beside_randperm(timer, n: int) -> dict[str, float]:
    done, g = threading.Event(), torch.Generator().manual_seed(SEED)

    def draw() -> None:
        torch.randperm(n, generator=g, dtype=torch.int32)
        done.set()

    thread = threading.Thread(target=draw)
    timer.start()
    thread.start()
    turns, spent = _turns(done)  # the loop, while the other thread draws
    timer.stop()
    thread.join()
    return {"Mturns/s": turns / spent / 1e6}


def suite(large: bool) -> list[Comparison]:
    first = [
        Comparison(
            title=f"First index after set_epoch, N={n:.0e}, world 8, after a {train_s:g} s epoch",
            contenders={
                "DistributedSampler": "bench_ahead:plain",
                "OrderAhead(DistributedSampler)": "bench_ahead:ahead",
            },
            baseline="DistributedSampler",
            params={"n": n, "train_s": train_s},
            note="set_epoch + iter + first index",
            columns=("first_s", "peak_MiB"),
        )
        for n, train_s in [(10**7, 3.0), (10**8, 25.0)]
    ]
    gil = Comparison(
        title="A Python loop while randperm(1e8) runs on another thread",
        contenders={
            "loop alone": "bench_ahead:loop_alone",
            "loop beside randperm(1e8)": "bench_ahead:loop_beside_randperm",
        },
        baseline="loop alone",
        params={"n": 10**8},
        note="loop turns per second, in millions; near 0 would mean randperm holds the GIL",
        columns=("Mturns/s", "time_s"),
        ratios=("Mturns/s",),
    )
    return [*first, gil]
