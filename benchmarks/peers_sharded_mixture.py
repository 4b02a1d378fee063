"""ShardedMixtureDataset against the streaming mixtures users pick instead, by their real code.

``.venv-peers/bin/python -m benchmarks.peers_sharded_mixture [REPEATS]`` (``make bench-peers``
runs it) writes ``benchmarks/results/peers_sharded_mixture.{md,json}``.

The data: ``bench_mixture``'s three-source task, 60,000 / 6,000 / 600 samples at 0.5 / 0.3 / 0.2,
in shards of 500 samples (300 for the last source: 120 + 12 + 2 shards). A sample is its
``(source, index in the source)``: nothing is decoded, so what is measured is the mixing and the
loader. Each peer reads the same shards in its own format, written once into
``/tmp/distsampling-bench-sharded-mixture``: ``.npy`` files of the indices (ours, Hugging Face
and torchdata read them through a generator, as ``read(shard)``), MDS shards by Mosaic's
``MDSWriter`` (``size_limit`` set for about 500 samples a shard), LitData chunks by its
``optimize()`` (``chunk_size=500``). The contenders, every one with seed 0:

- ours: ``ShardedMixtureDataset(sources, [0.5, 0.3, 0.2], 8, num_replicas=W, rank=r,
  num_workers=2)``, twice: through torchdata's ``StatefulDataLoader`` (resume: its
  ``state_dict()``, which asks every worker for its state after every batch), and through a
  plain ``DataLoader`` (resume: the dataset's ``state_dict(consumed=...)``, from the samples
  the loop used);
- Mosaic: ``StreamingDataset(streams=[Stream(local=..., proportion=w) ...], batch_size=8,
  shuffle=True, batching_method="random" | "stratified")`` through its ``StreamingDataLoader``;
- LitData: ``CombinedStreamingDataset([StreamingDataset(dir, shuffle=True) ...],
  weights=[...], iterate_over_all=False)`` through its ``StreamingDataLoader``;
- Hugging Face: ``interleave_datasets`` of ``IterableDataset.from_generator`` sources (one
  generator input per shard), ``probabilities=[...]``, ``stopping_strategy="all_exhausted"``,
  then ``split_dataset_by_node``; read through ``StatefulDataLoader`` (what its docs advise for
  resuming);
- torchdata: ``MultiNodeWeightedSampler`` of one ``IterableWrapper`` per source (the rank's
  samples of it, every W-th, read front to back: torchdata.nodes leaves the split to the user),
  ``Batcher``, ``Loader``. It has no DataLoader workers: it reads in the main process.

Measured:

- **Composition** on W = 8 ranks of micro-batch 8, 2 DataLoader workers each: every rank a
  process of its own (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` set as
  torchrun sets them, a gloo group where LitData needs one), its first 937 batches gathered and
  laid out step by step (rank r's t-th batch at step t), then ``bench_mixture``'s figures:
  ``prefix``, ``batch`` and ``rank`` deviation of the source counts (0 is exact) and
  ``repeats`` within a pass; ``overlap``, the overlap at a pass boundary: at each step
  boundary, for each source, the samples read past its lowest unfinished pass ``P`` (``Σ_i
  max(0, reads_i - P - 1)``, ``P`` the fewest reads of any sample), the most over the steps
  and sources (0: no pass begins before the one before it ends). ``positions``: how many of
  the 59,968 the peer delivered on every rank (a loader that ends early is measured on what it
  gave).
- **Speed**, one rank, 2 workers, in fresh processes (median, min – max of the repeats):
  ``first_1e6_s``, construction to the first batch over 1e6 samples (900,000 / 90,000 / 10,000
  in shards of 10,000, on disk in each format); ``first_1e8_s`` the same over 1e8 samples
  (90,000,000 / 9,000,000 / 1,000,000): lazy generators for the contenders that take them (no
  sample on disk: ours, Hugging Face, torchdata), Mosaic's MDS shards and LitData's chunks
  written once (2 GB each: about 15 minutes here, and 25 minutes with 2 ``optimize()``
  workers); ``samples/s``: the small task read through the loader's 2 workers after the first
  batch, up to 59,968 samples (torchdata.nodes has no DataLoader workers);
  ``main_samples/s``: the same, in the main process, sample by sample from the mixture's own
  iterator with no loader around it (torchdata.nodes: its ``Loader`` over the sampler).
- **Resume** after 1.5 epochs, one rank, 2 workers: epoch 0 read, half of epoch 1 read, the
  loader's (or dataset's) own state taken, a new loader loads it and reads on; ``exact`` when
  what it reads equals the rest of the uninterrupted epoch 1.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np
import torch

from ._harness import ROOT, Comparison, Timer, measure, spread
from .peers_mixture import MICRO, STEPS, WORLD, quality
from .peers_shards import (
    HUGE,
    LARGE,
    SMALL,
    WEIGHTS,
    _shards,
    _streaming,
    litdata_dirs,
    mds_dirs,
    npy_shards,
    read_npy,
    write_all,
)

WORKERS, SEED = 2, 0
NAMES = {
    "ours": "ShardedMixtureDataset, StatefulDataLoader",
    "ours_dataloader": "ShardedMixtureDataset, DataLoader",
    "mosaic_random": "Mosaic StreamingDataset, batching random",
    "mosaic_stratified": "Mosaic StreamingDataset, batching stratified",
    "litdata": "LitData CombinedStreamingDataset",
    "hugging_face": "HF interleave_datasets + split_dataset_by_node",
    "torchdata": "torchdata MultiNodeWeightedSampler",
}


# --- the contenders: a loader of one rank ---------------------------------------------------


def pairs(batch: object) -> list[tuple[int, int]]:
    """A batch as ``[(source, index)]``, whatever the peer's loader made of it: the default
    collate's ``{"k": tensor, "i": tensor}`` or ``[k tensor, i tensor]``, or torchdata's list of
    pairs. Each loader keeps its own collate: Mosaic and LitData count samples on it."""
    if isinstance(batch, dict):
        ks, ids = batch["k"], batch["i"]
    elif len(batch) == 2 and isinstance(batch[0], torch.Tensor):
        ks, ids = batch
    else:
        return [(int(k), int(i)) for k, i in batch]
    return list(zip(torch.as_tensor(ks).tolist(), torch.as_tensor(ids).tolist(), strict=True))


def batches(dl) -> Iterator[list[tuple[int, int]]]:
    """A loader's batches as ``[(source, index)]``."""
    return map(pairs, dl)


def _hf_gen(paths: list[str], k: int) -> Iterator[dict[str, int]]:
    for path in paths:
        for i in read_npy(path):
            yield {"k": k, "i": i}


def _hf_lazy(shards: list[tuple[int, int]], k: int) -> Iterator[dict[str, int]]:
    for a, b in shards:
        for i in range(a, b):
            yield {"k": k, "i": i}


def _every(it: Iterator[int], k: int, rank: int, world: int) -> Iterator[tuple[int, int]]:
    for j, i in enumerate(it):
        if j % world == rank:
            yield k, i


def _npy_chain(paths: list[str]) -> Iterator[int]:
    for path in paths:
        yield from read_npy(path)


def _lazy_chain(shards: list[tuple[int, int]]) -> Iterator[int]:
    for a, b in shards:
        yield from range(a, b)


def _lazy_read(shard: tuple[int, int]) -> Iterator[int]:
    return iter(range(*shard))


def loader(name: str, scale: str, rank: int = 0, world: int = 1, workers: int = WORKERS):
    """``(loader, dataset)`` of contender ``name`` for ``rank`` of ``world``; batches of
    ``MICRO`` ``(source, index)`` pairs."""
    if scale == "huge":  # 1e8 as lazy shards: (start, stop) descriptors
        sizes, per = HUGE
        lazy = [[(r.start, r.stop) for r in _shards(n, p)] for n, p in zip(sizes, per, strict=True)]
    if name in ("ours", "ours_dataloader"):
        from torchdata.stateful_dataloader import StatefulDataLoader

        from distsampling import ShardedMixtureDataset

        if scale == "huge":
            sources = [(sh, [b - a for a, b in sh], _lazy_read) for sh in lazy]
        else:
            paths = npy_shards(scale)
            sources = [(ps, [len(r) for r in _shards(n, p)], read_npy)
                       for ps, n, p in zip(paths, *(SMALL if scale == "small" else LARGE),
                                           strict=True)]  # fmt: skip
        ds = ShardedMixtureDataset(sources, WEIGHTS, MICRO, num_replicas=world, rank=rank,
                                   seed=SEED, with_source=True, num_workers=workers)  # fmt: skip
        make = StatefulDataLoader if name == "ours" else torch.utils.data.DataLoader
        return make(ds, batch_size=MICRO, num_workers=workers), ds
    if name.startswith("mosaic"):
        streaming = _streaming()

        streams = [streaming.Stream(local=d, proportion=w)
                   for d, w in zip(mds_dirs(scale), WEIGHTS, strict=True)]  # fmt: skip
        ds = streaming.StreamingDataset(streams=streams, batch_size=MICRO, shuffle=True,
                                        shuffle_seed=SEED, batching_method=name.split("_")[1])  # fmt: skip
        return streaming.StreamingDataLoader(ds, batch_size=MICRO, num_workers=workers), ds
    if name == "litdata":
        import litdata

        parts = [litdata.StreamingDataset(d, shuffle=True, seed=SEED) for d in litdata_dirs(scale)]
        ds = litdata.CombinedStreamingDataset(parts, seed=SEED, weights=WEIGHTS,
                                              iterate_over_all=False)  # fmt: skip
        return litdata.StreamingDataLoader(ds, batch_size=MICRO, num_workers=workers), ds
    if name == "hugging_face":
        import datasets
        from datasets.distributed import split_dataset_by_node
        from torchdata.stateful_dataloader import StatefulDataLoader

        datasets.disable_progress_bars()
        if scale == "huge":
            parts = [datasets.IterableDataset.from_generator(_hf_lazy, gen_kwargs={"shards": sh, "k": k})
                     for k, sh in enumerate(lazy)]  # fmt: skip
        else:
            parts = [datasets.IterableDataset.from_generator(_hf_gen, gen_kwargs={"paths": ps, "k": k})
                     for k, ps in enumerate(npy_shards(scale))]  # fmt: skip
        mixed = datasets.interleave_datasets(parts, probabilities=WEIGHTS, seed=SEED,
                                             stopping_strategy="all_exhausted")  # fmt: skip
        ds = split_dataset_by_node(mixed, rank=rank, world_size=world)
        return StatefulDataLoader(ds, batch_size=MICRO, num_workers=workers), ds
    if name == "torchdata":
        from torchdata.nodes import Batcher, IterableWrapper, Loader
        from torchdata.nodes import MultiNodeWeightedSampler as Weighted

        if scale == "huge":
            makes = [partial(_lazy_chain, sh) for sh in lazy]
        else:
            makes = [partial(_npy_chain, ps) for ps in npy_shards(scale)]
        nodes = {str(k): IterableWrapper(_RankSource(make, k, rank, world))
                 for k, make in enumerate(makes)}  # fmt: skip
        sampler = Weighted(nodes, {str(k): w for k, w in enumerate(WEIGHTS)}, rank=rank,
                           world_size=world, seed=SEED)  # fmt: skip
        return Loader(Batcher(sampler, MICRO, drop_last=False)), sampler
    raise ValueError(f"unknown contender {name!r}")


class _RankSource:
    """A source as a rank reads it for torchdata: every ``iter()`` starts from the source's start."""

    def __init__(self, make, k: int, rank: int, world: int) -> None:
        self.make, self.args = make, (k, rank, world)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return _every(self.make(), *self.args)


def _set_epoch(name: str, ds, epoch: int) -> None:
    if name in ("ours", "ours_dataloader", "hugging_face"):
        ds.set_epoch(epoch)


# --- composition: W ranks, each a process -----------------------------------------------------


def rank_job(name: str, out: str) -> None:
    """One rank's first ``STEPS`` batches, as ``[(source, index)]`` in ``out`` (a rank process)."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if name == "litdata":  # LitData finds the ranks through torch.distributed only
        torch.distributed.init_process_group(
            "gloo", init_method=f"file://{Path(out).parent}/store", rank=rank, world_size=world
        )
    dl, _ = loader(name, "small", rank, world)
    got = []
    for batch in batches(dl):
        got.append(batch)
        if len(got) == STEPS:
            break
    Path(out).write_text(json.dumps(got))


def composition(name: str) -> dict[str, float | str]:
    """``bench_mixture``'s figures of ``name`` over W ranks, each a process, as torchrun runs."""
    if name.startswith("mosaic"):
        _streaming()  # imported without its vision part (see benchmarks/peers.py)
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
    with socket.socket() as free:  # a port for the peers that start torch.distributed (Mosaic)
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for r in range(WORLD):
            env = {**os.environ, "RANK": str(r), "WORLD_SIZE": str(WORLD), "LOCAL_RANK": str(r),
                   "LOCAL_WORLD_SIZE": str(WORLD), "MASTER_ADDR": "127.0.0.1",
                   "MASTER_PORT": str(port)}  # fmt: skip
            cmd = [sys.executable, "-m", "benchmarks.peers_sharded_mixture", "rank", name,
                   f"{tmp}/{r}.json"]  # fmt: skip
            procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE,
                                          text=True))  # fmt: skip
        errors = []
        for p in procs:
            try:
                _, err = p.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
                err += "\n(timed out after 600 s)"
            if p.returncode:
                errors.append(err)
        if errors:
            return {"error": _last_line(errors[0])}
        per_rank = [json.loads(Path(f"{tmp}/{r}.json").read_text()) for r in range(WORLD)]
    # the steps every rank read whole: up to the first short batch of any rank (LitData ends
    # its epoch with one, when its smallest source runs out)
    steps = min(next((s for s, x in enumerate(b) if len(x) != MICRO), len(b)) for b in per_rank)
    if steps == 0:
        return {"error": "no step with a whole micro-batch on every rank"}
    reads = np.array([b[:steps] for b in per_rank], dtype=np.int64)  # (W, steps, b, 2)
    flat = reads.transpose(1, 0, 2, 3).reshape(-1, 2)
    figures = quality(flat[:, 0], flat[:, 1], SMALL[0], WEIGHTS)
    overlap: float | str = pass_overlap(flat[:, 0], flat[:, 1], SMALL[0], WORLD * MICRO)
    if not any(np.bincount(flat[flat[:, 0] == k, 1]).max(initial=0) > 1 for k in range(3)):
        # no sample read twice: no pass boundary was crossed, so its overlap is not measured
        overlap = f"none to measure: no source began a second pass in the {len(flat):,} reads"
    return {**figures, "overlap": overlap, "positions": float(len(flat))}


def pass_overlap(source: np.ndarray, sample: np.ndarray, sizes: list[int], step: int) -> float:
    """The overlap at a pass boundary of a stream of ``(source, sample)`` reads, ``step`` a
    global batch: at every step boundary and for every source, ``Σ_i max(0, reads_i - P - 1)``
    with ``P = min_i reads_i`` (the lowest unfinished pass): the most of them."""
    worst = 0
    for k, size in enumerate(sizes):
        reads = np.zeros(size, np.int64)  # (size,) each sample's reads so far
        mine = source == k  # (n,)
        at = np.flatnonzero(mine)  # (n_k,) its positions, in order
        cuts = np.searchsorted(at, np.arange(step, len(source) + step, step))  # (steps,)
        done = 0
        for cut in cuts.tolist():  # the reads of the steps up to this boundary
            np.add.at(reads, sample[at[done:cut]], 1)
            done = cut
            worst = max(worst, int(np.maximum(0, reads - reads.min() - 1).sum()))
    return float(worst)


def _last_line(err: str) -> str:
    lines = [x for x in err.strip().splitlines() if x.strip()]
    return lines[-1][:200] if lines else "failed"


# --- speed: fresh processes, one rank -------------------------------------------------------


def _first(name: str, scale: str) -> float:
    t0 = time.perf_counter()
    dl, _ = loader(name, scale)
    pairs(next(iter(dl)))
    return time.perf_counter() - t0


def speed(timer, name: str) -> dict[str, float]:
    """The first batch at 1e6 and at 1e8, then samples/s over the small task: in the main
    process first (the mixture's own iterator), then through the loader's 2 workers."""
    figures = {"first_1e6_s": _first(name, "large"), "first_1e8_s": _first(name, "huge")}
    timer.start()  # the harness's span: the main-process reads (the loader's has its own)
    figures["main_samples/s"] = _main_rate(name)
    timer.stop()
    if name == "torchdata":  # torchdata.nodes reads in the main process only
        return figures
    return figures | _rate(Timer(), loader(name, "small")[0])


def _main_rate(name: str, reads: int = 3) -> float:
    """Samples/s of ``name``'s mixture read in the main process, sample by sample, with no
    loader around it (torchdata.nodes: its ``Loader`` over the sampler, no ``Batcher``): what
    mixing and reading cost, without the loader's. The small task after the first sample, read
    ``reads`` times from a fresh ``iter()``; the fastest read counts, as ``timeit`` takes (a
    read this short, about 0.1 s for the fast ones, is easily slowed by the rest of the machine)."""
    if name == "torchdata":
        from torchdata.nodes import Loader

        ds = Loader(loader(name, "small")[1])
    else:
        ds = loader(name, "small")[1]
    best = 0.0
    for epoch in range(reads):
        _set_epoch(name, ds, epoch)  # each read an epoch of its own
        it = iter(ds)
        next(it)
        n, limit = 0, STEPS * WORLD * MICRO - 1
        t0 = time.perf_counter()
        for _ in it:
            n += 1
            if n == limit:
                break
        best = max(best, n / (time.perf_counter() - t0))
        del it
    return best


class _Pairs(torch.utils.data.IterableDataset):
    """``(source, index)`` pairs made up as fast as Python can: no shard read, no mixing."""

    def __iter__(self) -> Iterator[tuple[int, int]]:
        info = torch.utils.data.get_worker_info()
        i, n = (info.id, info.num_workers) if info else (0, 1)
        while True:
            yield i % 3, i
            i += n


def speed_dataloader(timer) -> dict[str, float]:
    """The DataLoader alone: what any contender through it can reach at most, the same loader
    (``batch_size=MICRO``, ``WORKERS`` workers, the default collate) over ``_Pairs``."""
    dl = torch.utils.data.DataLoader(_Pairs(), batch_size=MICRO, num_workers=WORKERS)
    return _rate(timer, dl)


def _rate(timer, dl) -> dict[str, float]:
    """Samples/s of ``dl``'s batches after its first, up to the small task's 59,968."""
    n, limit = 0, STEPS * WORLD * MICRO
    timer.start()
    it = batches(dl)
    n = len(next(it))
    timer.first()
    for batch in it:
        n += len(batch)
        if n >= limit:
            break
    timer.stop()
    return {"samples/s": (n - MICRO) / (timer.t_end - timer.t_first), "samples_read": float(n)}


# --- resume after 1.5 epochs ----------------------------------------------------------------


def resume(name: str) -> str:
    """Whether ``name``'s own resume after 1.5 epochs (one rank, 2 workers) is exact, in words."""
    try:
        dl, ds = loader(name, "small")
        _set_epoch(name, ds, 0)
        epoch0 = list(batches(dl))
        _set_epoch(name, ds, 1)
        epoch1 = list(batches(dl))
        if not epoch1:
            return f"no second epoch (epoch 0: {len(epoch0)} batches, epoch 1: none)"
        dl, ds = loader(name, "small")
        _set_epoch(name, ds, 0)
        list(batches(dl))
        _set_epoch(name, ds, 1)
        it, half = iter(dl), len(epoch1) // 2
        head = [pairs(next(it)) for _ in range(half)]
        # a plain DataLoader has no state: the dataset's, from the samples the loop used
        plain = name == "ours_dataloader"
        state = ds.state_dict(consumed=half * MICRO) if plain else dl.state_dict()
        del it
        dl, ds = loader(name, "small")
        _set_epoch(name, ds, 1)
        (ds if plain else dl).load_state_dict(state)
        rest = list(batches(dl))
    except Exception as e:  # the peer's own words
        traceback.print_exc()
        return f"fails: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    want = epoch1[half:]
    if head + rest == epoch1:
        return "exact"
    same = next(
        (i for i, (a, b) in enumerate(zip(rest, want)) if a != b), min(len(rest), len(want))
    )
    got, due = {x for b in rest for x in b}, {x for b in want for x in b}
    return (
        f"not exact: {len(rest)} batches after the resume for {len(want)}, the first {same} "
        f"equal; {len(got & due)} of the {len(due)} samples due"
    )


# --- the table ------------------------------------------------------------------------------


def _cell(key: str, value) -> str:
    if isinstance(value, str):
        return value
    from .__main__ import _fmt

    lo, mid, hi = (_fmt(key, value[k]) for k in ("min", "median", "max"))
    return f"{mid} ({lo} – {hi})"


COLUMNS = ("first_1e6_s", "first_1e8_s", "samples/s", "main_samples/s", "prefix", "batch", "rank", "repeats",
           "overlap", "positions", "resume", "load_1m")  # fmt: skip


def table(rows: dict[str, dict]) -> str:
    lines = ["| | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for name, figures in rows.items():
        lines.append(
            f"| {NAMES[name]} | "
            + " | ".join(_cell(k, figures.get(k, "not run yet")) for k in COLUMNS)
            + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    """``[REPEATS] [--only NAME,NAME] [--parts speed,composition,resume]``: ``--only`` and
    ``--parts`` rerun those rows' figures into the last results, the others kept."""
    args = sys.argv[1:]
    opt = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}
    repeats = int(args[0]) if args and not args[0].startswith("--") else 5
    todo = opt.get("--only", ",".join(NAMES)).split(",")
    parts = opt.get("--parts", "speed,composition,resume").split(",")
    write_all("speed" in parts)  # every format written once, before any timing
    machine = f"{platform.machine()}, torch {torch.__version__}, {os.cpu_count()} cores"
    versions = ", ".join(f"{m} {_version(m)}" for m in ("streaming", "litdata", "datasets",
                                                        "torchdata"))  # fmt: skip
    results = ROOT / "benchmarks" / "results"
    rows: dict[str, dict] = {name: {} for name in NAMES}
    alone = None  # the DataLoader alone's samples/s, measured with the speed of any row
    if len(todo) < len(NAMES) or len(parts) < 3:  # a partial rerun: the last figures kept
        last = json.loads((results / "peers_sharded_mixture.json").read_text())
        rows = {name: last["figures"].get(label, {}) for name, label in NAMES.items()}
        alone = last.get("dataloader_alone")
    if "speed" in parts:
        contenders = {n: f"peers_sharded_mixture:speed_{n}" for n in todo}
        contenders["dataloader"] = "peers_sharded_mixture:speed_dataloader"  # interleaved too
        try:
            timed = measure(Comparison("speed", contenders, todo[0]), repeats)
        except RuntimeError:
            timed = {}
            for n in todo:  # one at a time: a peer that fails says why in its cells
                one = Comparison("speed", {n: contenders[n]}, n)
                try:
                    timed |= measure(one, repeats)
                except RuntimeError as e:
                    timed[n] = {"error": _last_line(str(e))}
        alone = timed.pop("dataloader", {}).get("samples/s", alone)
    for name in todo:
        for key in ("first_1e6_s", "first_1e8_s", "samples/s", "main_samples/s",
                    "load_1m") * ("speed" in parts):  # fmt: skip
            t = timed[name]
            if "error" in t:
                rows[name][key] = f"fails: {t['error']}"
            else:  # torchdata.nodes has no DataLoader workers
                rows[name][key] = t.get(key, "no DataLoader workers")
        if "composition" in parts:
            comp = composition(name)
            for key in ("prefix", "batch", "rank", "repeats", "overlap", "positions"):
                if "error" in comp:
                    rows[name][key] = f"fails: {comp['error']}"
                else:  # a figure, or the words why there is none
                    value = comp[key]
                    rows[name][key] = value if isinstance(value, str) else spread([value])
        if "resume" in parts:
            rows[name]["resume"] = resume(name)
        print(name, rows[name], flush=True)
    header = (
        f"_Measured by `make bench-peers` on {machine} ({versions}); speed: median (min – max) "
        f"of {repeats} fresh-process runs; composition and resume: one run (they do not vary "
        "with the machine); `load_1m`: the machine's load average after each run._\n"
    )
    title = (
        f"**3 sources of 60,000 / 6,000 / 600 samples at 0.5 / 0.3 / 0.2 in shards of 500, "
        f"{WORKERS} DataLoader workers a rank** — first batch and samples/s on one rank; "
        f"composition over W = {WORLD} ranks, micro-batch {MICRO}, in samples (0 is exact)\n"
    )
    text = header + "\n" + title + "\n" + table(rows)
    if alone is not None:
        text += (
            f"\nThe DataLoader alone, over a dataset that only makes up the pairs (no shard "
            f"read, no mixing), with the same batches of {MICRO} and {WORKERS} workers: "
            f"{_cell('samples/s', alone)} samples/s: the cost of moving each batch's tensors "
            "from a worker to the loop, which every contender read through DataLoader workers "
            "pays.\n"
        )
    print(text, flush=True)
    (results / "peers_sharded_mixture.md").write_text(text)
    summary = {"machine": machine, "peers": versions, "repeats": repeats,
               "figures": {NAMES[n]: f for n, f in rows.items()}, "dataloader_alone": alone}  # fmt: skip
    summary["medians"] = {NAMES[n]: {"small": {k: v["median"] for k, v in f.items()
                                               if isinstance(v, dict)}}
                          for n, f in rows.items()}  # fmt: skip
    (results / "peers_sharded_mixture.json").write_text(json.dumps(summary, indent=1) + "\n")


def _version(module: str) -> str:
    if module == "streaming":
        return _streaming().__version__
    return __import__(module).__version__


def _speed_of(name: str):
    return lambda timer: speed(timer, name)


for _n in NAMES:
    globals()[f"speed_{_n}"] = _speed_of(_n)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "rank":
        rank_job(sys.argv[2], sys.argv[3])
    else:
        main()
