"""ShardedIterableDataset against WebDataset's and Hugging Face datasets' splits, by their real code.

``.venv-peers/bin/python -m benchmarks.peers_sharded [REPEATS]`` (``make bench-peers`` runs it)
writes ``benchmarks/results/peers_sharded.{md,json}``. The shards are ``bench_sharded``'s: 37
shard names whose sizes come from its ``shard_sizes()`` (long tail, 2,000,000 samples), read in
the listed order (no shuffle: the peers' default). A sample is ``(shard, i)``; no file is read,
so what is measured is the split. W = 8 ranks, each simulated in this process with its rank set
the way a user sets it, each read through a real ``DataLoader`` with 2 workers.

- ``ShardedIterableDataset(names, sizes, read, num_replicas=8, rank=r, shuffle=False)``, and the
  same with ``seekable=True`` (``read(name, start)`` starts at sample ``start``).
- WebDataset: ``DataPipeline(SimpleShardList(names), split_by_node, split_by_worker, expand)``,
  ``expand`` a generator stage yielding each shard's samples. ``split_by_node`` reads the rank
  from ``RANK``/``WORLD_SIZE`` (what torchrun sets), so they are set around each rank's loader.
- WebDataset + ``with_epoch``: the same pipeline with ``.with_epoch(ceil(T / (W * workers)))``,
  WebDataset's answer to unequal counts: each worker repeats its shards and stops at that count.
- Hugging Face datasets: ``IterableDataset.from_generator(gen, gen_kwargs={"shards": names})``
  (so ``n_shards = 37``), then ``split_dataset_by_node(ds, rank=r, world_size=8)``.

Figures counted on the ids that came out of the 8 x 2 DataLoader workers: each rank's
sample count (``rank_min``, ``rank_max``, ``count_spread`` = max - min: DDP hangs if it is not
0), ``read_twice`` (samples yielded more than once, beyond our padding of fewer than W samples;
the peers do not pad) and ``never_read``. ``Msamples/s``: the 8 ranks' splits iterated one after
another in one process (rank split only: ``DataLoader`` workers are not simulated in process),
samples yielded per second; ``direct_Msamples/s``: the same library over all shards with no
split (ours: the plain loop over ``read``, which one rank of ours matches in ``bench_sharded``);
``split_vs_direct_%``: the first over the second, in % (goal >= 90: the split costs nothing).
``drawn_per_sample``: the samples those 8 splits draw from the shards (``read``'s iterators), per
sample of the epoch (1.0: each drawn once; a split that skips still draws). ``loader_s``: the wall
time of the 8 ranks' DataLoaders, one after another.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import repeat
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, get_worker_info

from distsampling import ShardedIterableDataset

from ._harness import ROOT, Comparison, measure
from .bench_sharded import NUM_SHARDS, TOTAL, WORKERS, WORLD, shard_sizes

BATCH = 1000  # samples per DataLoader batch (ids travel from workers in batches)
SIZES = shard_sizes(NUM_SHARDS, TOTAL)
NAMES = [f"shard-{k:02d}" for k in range(NUM_SHARDS)]  # descriptors (WebDataset wants str)
INDEX = {name: k for k, name in enumerate(NAMES)}
STARTS = np.cumsum([0, *SIZES]).tolist()  # global id of (shard k, sample i): STARTS[k] + i
PADDING = -(-TOTAL // WORLD) * WORLD - TOTAL  # ours: the head repeated to fill the last rank


DRAWN = [False, 0]  # counting on?, samples drawn from the shards so far (untimed pass only)


def read(name: str, start: int = 0) -> Iterator[tuple[int, int]]:
    """One shard's samples, ``(shard index, sample index)``, in order, from sample ``start`` on."""
    k = INDEX[name]
    samples = zip(repeat(k), range(start, SIZES[k]))
    return _counting(samples) if DRAWN[0] else samples


def _counting(samples: Iterator[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    for sample in samples:
        DRAWN[1] += 1
        yield sample


def directly() -> Iterator[tuple[int, int]]:
    """Every shard, in the listed order: no split."""
    for name in NAMES:
        yield from read(name)


def hf_generator(shards: list[str]) -> Iterator[dict[str, int]]:
    """The generator of ``datasets.IterableDataset.from_generator``: it takes a list of shards."""
    for name in shards:
        for k, i in read(name):
            yield {"shard": k, "i": i}


def wds_expand(src: Iterable[dict]) -> Iterator[tuple[int, int]]:
    """WebDataset stage: shard descriptors ``{"url": name}`` in, the shard's samples out."""
    for shard in src:
        yield from read(shard["url"])


def global_id(sample: object) -> int:
    k, i = (sample["shard"], sample["i"]) if isinstance(sample, dict) else sample
    return STARTS[k] + i


def collate_ids(samples: list) -> tuple[int, list[int]]:
    """A batch as ``(worker id, global ids)``: runs in the DataLoader worker."""
    info = get_worker_info()
    return (-1 if info is None else info.id), [global_id(s) for s in samples]


class Rank:
    """Sets ``RANK``/``WORLD_SIZE`` for the ``with`` block (what torchrun gives each rank)."""

    def __init__(self, rank: int) -> None:
        self.env = {"RANK": str(rank), "WORLD_SIZE": str(WORLD)}

    def __enter__(self) -> None:
        self.saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)

    def __exit__(self, *exc: object) -> None:
        for k, v in self.saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def build(name: str, rank: int | None, num_workers: int) -> Iterable:
    """Contender ``name``'s dataset for ``rank`` (``None``: all shards, no split)."""
    if name in ("ours", "ours_seekable"):
        if rank is None:
            return directly()
        return ShardedIterableDataset(NAMES, SIZES, read, num_replicas=WORLD, rank=rank,
                                      shuffle=False, seekable=name == "ours_seekable")  # fmt: skip
    if name in ("webdataset", "webdataset_with_epoch"):
        import webdataset as wds

        if rank is None:
            return wds.DataPipeline(wds.SimpleShardList(NAMES), wds_expand)
        pipeline = wds.DataPipeline(
            wds.SimpleShardList(NAMES), wds.split_by_node, wds.split_by_worker, wds_expand
        )
        if name == "webdataset_with_epoch":  # each worker's share of one rank's T / W
            pipeline = pipeline.with_epoch(-(-TOTAL // (WORLD * max(num_workers, 1))))
        return pipeline
    import datasets
    from datasets.distributed import split_dataset_by_node

    datasets.disable_progress_bars()
    ds = datasets.IterableDataset.from_generator(hf_generator, gen_kwargs={"shards": NAMES})
    assert ds.num_shards == NUM_SHARDS, ds.num_shards
    return ds if rank is None else split_dataset_by_node(ds, rank=rank, world_size=WORLD)


def gather(name: str) -> list[dict[int, list[int]]]:
    """Every rank's ids through a real DataLoader with ``WORKERS`` workers: ``[{worker: ids}]``."""
    per_rank = []
    for rank in range(WORLD):
        with Rank(rank):  # the workers fork inside: they inherit RANK/WORLD_SIZE
            loader = DataLoader(build(name, rank, WORKERS), batch_size=BATCH,
                                num_workers=WORKERS, collate_fn=collate_ids)  # fmt: skip
            by_worker: dict[int, list[int]] = {}
            for worker, ids in loader:
                by_worker.setdefault(worker, []).extend(ids)
        per_rank.append(by_worker)
    return per_rank


def counted(per_rank: list[dict[int, list[int]]], padding: int) -> dict[str, float]:
    """The split's figures, from the ids alone."""
    counts = [sum(map(len, ws.values())) for ws in per_rank]
    seen = Counter(x for ws in per_rank for ids in ws.values() for x in ids)
    if any(not 0 <= x < TOTAL for x in seen):
        raise AssertionError("a sample id outside the shards came out")
    return {
        "rank_min": min(counts),
        "rank_max": max(counts),
        "count_spread": max(counts) - min(counts),
        "read_twice": sum(seen.values()) - len(seen) - padding,
        "never_read": TOTAL - len(seen),
    }


def _drain(it: Iterable) -> int:
    n = 0
    for _ in it:
        n += 1
    return n


def split_speed(timer, name: str, params: dict[str, int]) -> dict[str, float]:
    """One fresh-process run of contender ``name``: its ids through DataLoaders, then its speed."""
    here = {"num_shards": NUM_SHARDS, "total": TOTAL, "world": WORLD, "workers": WORKERS}
    if params != here:  # the shards and the world are this module's: the table must say so
        raise ValueError(f"this benchmark runs {here}, but was asked for {params}")
    t0 = time.perf_counter()
    figures = counted(gather(name), PADDING if name.startswith("ours") else 0)
    figures["loader_s"] = time.perf_counter() - t0
    # direct: the same library over all shards, no split
    t0 = time.perf_counter()
    n = _drain(build(name, None, 1))
    direct = n / (time.perf_counter() - t0) / 1e6
    if n != TOTAL:
        raise AssertionError(f"{name}: reading the shards directly gave {n} samples, not {TOTAL}")
    DRAWN[:] = True, 0  # an untimed pass of the 8 splits: how many samples they draw in all
    for rank in range(WORLD):
        with Rank(rank):
            _drain(build(name, rank, 1))
    DRAWN[0] = False
    figures["drawn_per_sample"] = DRAWN[1] / TOTAL
    ranks = []
    for rank in range(WORLD):  # built (and RANK set) outside the timed span
        with Rank(rank):
            ranks.append(build(name, rank, 1))
    timer.start()
    n = 0
    for rank, ds in enumerate(ranks):
        with Rank(rank):  # WebDataset reads the rank when iteration starts
            n += _drain(ds)
    timer.stop()
    split = n / (timer.t_end - timer.t0) / 1e6
    return {**figures, "Msamples/s": split, "direct_Msamples/s": direct,
            "split_vs_direct_%": 100 * split / direct}  # fmt: skip


def ours(timer, **params: int) -> dict[str, float]:
    return split_speed(timer, "ours", params)


def ours_seekable(timer, **params: int) -> dict[str, float]:
    return split_speed(timer, "ours_seekable", params)


def webdataset(timer, **params: int) -> dict[str, float]:
    return split_speed(timer, "webdataset", params)


def webdataset_with_epoch(timer, **params: int) -> dict[str, float]:
    return split_speed(timer, "webdataset_with_epoch", params)


def hugging_face(timer, **params: int) -> dict[str, float]:
    return split_speed(timer, "hugging_face", params)


COMPARISON = Comparison(
    title=f"{NUM_SHARDS} long-tail shards, {TOTAL:,} samples, W = {WORLD} ranks x {WORKERS} "
    "DataLoader workers",
    contenders={
        "ShardedIterableDataset": "peers_sharded:ours",
        "ShardedIterableDataset, seekable": "peers_sharded:ours_seekable",
        "WebDataset split_by_node + split_by_worker": "peers_sharded:webdataset",
        "WebDataset ... + with_epoch": "peers_sharded:webdataset_with_epoch",
        "HF datasets split_dataset_by_node": "peers_sharded:hugging_face",
    },
    baseline="ShardedIterableDataset",
    params={"num_shards": NUM_SHARDS, "total": TOTAL, "world": WORLD, "workers": WORKERS},
    note="counts from the ids the DataLoaders delivered; speed of the rank split in one process",
    columns=(
        "rank_min",
        "rank_max",
        "count_spread",
        "read_twice",
        "never_read",
        "drawn_per_sample",
        "Msamples/s",
        "direct_Msamples/s",
        "split_vs_direct_%",
        "loader_s",
    ),
    ratios=("Msamples/s",),
)


def main() -> None:
    from .__main__ import medians_by_params, report

    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    machine = f"{platform.machine()}, torch {torch.__version__}, {os.cpu_count()} cores"
    versions = ", ".join(
        f"{m} {__import__(m).__version__}" for m in ("webdataset", "datasets")
    )  # the peers' versions, with the machine
    figures = measure(COMPARISON, repeats)
    text = report(COMPARISON, figures)
    print(text, flush=True)
    header = (
        f"_Measured by `make bench-peers` on {machine} ({versions}); median (min – max) of "
        f"{repeats} fresh-process runs; **ratios** of medians against the table's baseline; "
        "`load_1m`: the machine's load average after each run._\n"
    )
    results_dir = ROOT / "benchmarks" / "results"
    Path(results_dir / "peers_sharded.md").write_text(header + "\n" + text)
    result = {"title": COMPARISON.title, "baseline": COMPARISON.baseline,
              "params": COMPARISON.params, "figures": figures}  # fmt: skip
    summary = {"machine": machine, "peers": versions, "repeats": repeats, "comparisons": [result]}
    summary["medians"] = medians_by_params([result])  # what the docs quote (docs/hooks/figures.py)
    Path(results_dir / "peers_sharded.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
