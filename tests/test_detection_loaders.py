"""Our endless samplers where detection codebases train: inside detectron2's training loader,
and inside an mmengine Runner.

detectron2 cannot be installed here (no wheel on PyPI for any platform; it builds from its
repository, with a compiler and the internet), so the parts that decide which sample is read
are transcribed below from its source (facebookresearch/detectron2, detectron2/data/build.py
and common.py), its defaults included (``drop_last=True``), as the oracle: its samplers' index streams (``TrainingSampler``,
``RepeatFactorTrainingSampler``) and its loading pattern, ``build_batch_data_loader`` without
aspect grouping. That pattern wraps the sampler in ``ToIterableDataset(dataset, sampler,
shard_chunk_size=batch_size)`` and reads it through a real torch ``DataLoader``: every worker
calls ``iter(sampler)`` once per chunk slot, slices each to its own positions and reads the
slots in turn, then batches. With ours the loader must deliver exactly the batches it delivers
with detectron2's samplers, and after ``load_state_dict`` the stream from the loaded position.
What makes that work is that every ``iter()`` starts at the same point and live iterators don't
disturb each other (the property of tests/test_infinite.py): the workers' slices are then
disjoint and together read the rank's stream.

mmengine (the ``mmengine`` extra: the real code, skipped without it): our ``len()`` and
``set_epoch`` answer as its ``InfiniteSampler``'s do (its indices: tests/test_infinite.py), and
a real ``Runner`` with an ``IterBasedTrainLoop`` trains on the stream's first batches, then
resumes by replaying them.

References:
    detectron2/data/build.py (build_batch_data_loader, trivial_batch_collator,
    worker_init_reset_seed); detectron2/data/common.py (ToIterableDataset,
    _shard_iterator_dataloader_worker, _roundrobin); detectron2/data/samplers/
    distributed_sampler.py (TrainingSampler, RepeatFactorTrainingSampler);
    mmengine/runner/loops.py (IterBasedTrainLoop, _InfiniteDataloaderIterator);
    mmengine/hooks/logger_hook.py, mmengine/hooks/sampler_seed_hook.py;
    mmengine/dataset/sampler.py (InfiniteSampler)
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import warnings
from itertools import islice
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
import torch
import torch.utils.data as torchdata
from hypothesis import given
from torch.utils.data import DataLoader, IterableDataset, Sampler

from distsampling import InfiniteSampler, RepeatFactorSampler
from strategies import (
    endless_sampler_kinds,
    fractional_repeat_factor_lists,
    loader_worker_counts,
    shard_chunk_sizes,
    stream_lengths,
    stream_reads,
    stream_sampler_args,
)

WORLD = 2  # the ranks of the world the loaders run on (num_replicas and rank passed explicitly)
IMAGES = 7  # images of the InfiniteSampler cases
# float32, as detectron2's category-frequency function returns them; each but one has a
# fractional part, so detectron2's rounding uniforms are drawn every pass, as ours are
FACTORS = torch.tensor([0.5, 1.25, 2.0, 0.75, 3.5, 1.5, 0.125], dtype=torch.float32)
SEED = 5
LOADER_TIMEOUT = 60  # seconds a DataLoader waits for a worker's batch before it raises


# --- detectron2's samplers, from detectron2/data/samplers/distributed_sampler.py ----------------


class Detectron2TrainingSampler(Sampler[int]):
    """detectron2's ``TrainingSampler``: one generator seeded once, ``randperm(size)`` pass after
    pass (``arange`` without shuffle), rank ``r`` taking positions ``r, r + W, ...``. The rank and
    world size are passed in where detectron2 asks its process group (``comm``)."""

    def __init__(self, size: int, shuffle: bool, seed: int, rank: int, world_size: int) -> None:
        self._size, self._shuffle, self._seed = size, shuffle, int(seed)
        self._rank, self._world_size = rank, world_size

    def __iter__(self):
        yield from islice(self._infinite_indices(), self._rank, None, self._world_size)

    def _infinite_indices(self):
        g = torch.Generator()
        g.manual_seed(self._seed)
        while True:
            if self._shuffle:
                yield from torch.randperm(self._size, generator=g).tolist()
            else:
                yield from torch.arange(self._size).tolist()


class Detectron2RepeatFactorTrainingSampler(Detectron2TrainingSampler):
    """detectron2's ``RepeatFactorTrainingSampler``: each pass, ``torch.rand`` decides the extra
    copy of every image (stochastic rounding), the indices are listed image by image, then
    shuffled by ``randperm`` from the same generator."""

    def __init__(
        self, repeat_factors: torch.Tensor, shuffle: bool, seed: int, rank: int, world_size: int
    ) -> None:
        super().__init__(len(repeat_factors), shuffle, seed, rank, world_size)
        self._int_part = torch.trunc(repeat_factors)
        self._frac_part = repeat_factors - self._int_part

    def _get_epoch_indices(self, generator: torch.Generator) -> torch.Tensor:
        rands = torch.rand(len(self._frac_part), generator=generator)
        rep_factors = self._int_part + (rands < self._frac_part).float()
        indices: list[int] = []
        for dataset_index, rep_factor in enumerate(rep_factors):
            indices.extend([dataset_index] * int(rep_factor.item()))
        return torch.tensor(indices, dtype=torch.int64)

    def _infinite_indices(self):
        g = torch.Generator()
        g.manual_seed(self._seed)
        while True:
            indices = self._get_epoch_indices(g)
            if self._shuffle:
                yield from indices[torch.randperm(len(indices), generator=g)].tolist()
            else:
                yield from indices.tolist()


# --- detectron2's loading pattern, from detectron2/data/common.py and build.py -------------------


def _roundrobin(*iterables):
    """``roundrobin('ABC', 'D', 'EF') --> A D E B F C`` (the itertools recipe detectron2 copies)."""
    num_active = len(iterables)
    nexts = itertools.cycle(iter(it).__next__ for it in iterables)
    while num_active:
        try:
            for next_ in nexts:
                yield next_()
        except StopIteration:
            num_active -= 1
            nexts = itertools.cycle(islice(nexts, num_active))


def _shard_iterator_dataloader_worker(iterable, chunk_size: int = 1):
    """In DataLoader worker ``w`` of ``n``: one ``islice`` (one ``iter()`` of ``iterable``) per
    chunk slot ``i``, reading positions ``w * chunk + i`` every ``n * chunk``, taken in turn.
    Outside a worker, or with one, the iterable whole."""
    worker_info = torchdata.get_worker_info()
    if worker_info is None or worker_info.num_workers == 1:
        yield from iterable
    else:
        step = worker_info.num_workers * chunk_size
        slots = [
            islice(iterable, worker_info.id * chunk_size + chunk_i, None, step)
            for chunk_i in range(chunk_size)
        ]
        yield from _roundrobin(*slots)


class ToIterableDataset(IterableDataset):
    """A map-style dataset read in the order of ``sampler``, the sampler run inside every worker
    and sharded there (detectron2's ``ToIterableDataset``)."""

    def __init__(
        self, dataset, sampler: Sampler, shard_sampler: bool = True, shard_chunk_size: int = 1
    ) -> None:
        assert not isinstance(dataset, IterableDataset), dataset
        assert isinstance(sampler, Sampler), sampler
        self.dataset, self.sampler = dataset, sampler
        self.shard_sampler, self.shard_chunk_size = shard_sampler, shard_chunk_size

    def __iter__(self):
        if not self.shard_sampler:
            sampler = self.sampler
        else:
            sampler = _shard_iterator_dataloader_worker(self.sampler, self.shard_chunk_size)
        for idx in sampler:
            yield self.dataset[idx]

    def __len__(self) -> int:
        return len(self.sampler)


def trivial_batch_collator(batch: list) -> list:
    """detectron2's default collate: the batch as a list of the dataset's items."""
    return batch


def worker_init_reset_seed(worker_id: int) -> None:
    """detectron2 reseeds the global RNGs of every worker (``seed_all_rng``): no sampler here
    draws from them, so the streams must not change."""
    seed = torch.initial_seed() % 2**31 + worker_id
    np.random.seed(seed)
    torch.manual_seed(seed)
    random.seed(seed)


def build_batch_data_loader(dataset, sampler: Sampler, batch_size: int, num_workers: int):
    """detectron2's ``build_batch_data_loader(..., aspect_ratio_grouping=False)`` for one rank's
    ``batch_size``, with its defaults (``drop_last=True``: every batch full; ``prefetch_factor=2``)
    and a timeout on every worker's batch."""
    return DataLoader(
        ToIterableDataset(dataset, sampler, shard_chunk_size=batch_size),
        batch_size=batch_size,
        drop_last=True,
        num_workers=num_workers,
        collate_fn=trivial_batch_collator,
        worker_init_fn=worker_init_reset_seed,
        prefetch_factor=2 if num_workers > 0 else None,
        timeout=LOADER_TIMEOUT if num_workers > 0 else 0,
    )


def first_batches(loader: DataLoader, count: int) -> list[list[int]]:
    """The loader's first ``count`` batches; its workers stopped right away, not at some later
    garbage collection (see tests/test_docs.py's ``stop_loaders``)."""
    batches = iter(loader)
    try:
        return [next(batches) for _ in range(count)]
    finally:
        if hasattr(batches, "_shutdown_workers"):
            batches._shutdown_workers()


def ours(kind: str, rank: int, shuffle: bool, seed: int = SEED):
    """One rank's sampler of ``kind``, built alike on every rank but for ``rank``."""
    if kind == "InfiniteSampler":
        return InfiniteSampler(range(IMAGES), WORLD, rank, shuffle, seed)
    return RepeatFactorSampler(FACTORS, WORLD, rank, shuffle, seed)


def detectron2s(kind: str, rank: int, shuffle: bool, seed: int = SEED):
    """detectron2's sampler of ``kind`` for the same rank, images and seed."""
    if kind == "InfiniteSampler":
        return Detectron2TrainingSampler(IMAGES, shuffle, seed, rank, WORLD)
    return Detectron2RepeatFactorTrainingSampler(FACTORS, shuffle, seed, rank, WORLD)


def dataset_of(kind: str) -> list[int]:
    """The images, each item its own index, so that a batch shows the indices read."""
    return list(range(IMAGES if kind == "InfiniteSampler" else len(FACTORS)))


# --- the sharding, in one process: any number of workers and chunk sizes -------------------------


def worker_reads(sampler: Sampler, worker: int, workers: int, chunk: int, count: int) -> list[int]:
    """The first ``count`` indices worker ``worker`` of ``workers`` reads through detectron2's
    sharding, run here with that worker's ``get_worker_info()``."""
    info = SimpleNamespace(id=worker, num_workers=workers)
    with mock.patch.object(torchdata, "get_worker_info", return_value=info):
        return list(islice(_shard_iterator_dataloader_worker(sampler, chunk), count))


@given(
    kind=endless_sampler_kinds,
    n=stream_lengths,
    factors=fractional_repeat_factor_lists,
    args=stream_sampler_args,
    workers=loader_worker_counts,
    chunk=shard_chunk_sizes,
    loaded=stream_reads,
)
def test_each_worker_reads_its_chunks_of_the_rank_stream_and_detectron2s_own(
    kind, n, factors, args, workers, chunk, loaded
):
    """Invariant: through detectron2's sharding, worker w of `workers` reads the positions
    (k * workers + w) * chunk + i of its rank's stream (i < chunk, k = 0, 1, ...), index for
    index what it reads with detectron2's sampler; after load_state_dict of a state saved at
    position p, the same positions shifted by p: every worker's iter() starts at the loaded
    position, however many iterators of the sampler have read before."""
    W, r, shuffle, seed = args["num_replicas"], args["rank"], args["shuffle"], args["seed"]
    f32 = torch.tensor(factors, dtype=torch.float32)

    def sampler():
        if kind == "InfiniteSampler":
            return InfiniteSampler(range(n), W, r, shuffle, seed)
        return RepeatFactorSampler(f32, W, r, shuffle, seed)

    if kind == "InfiniteSampler":
        theirs = Detectron2TrainingSampler(n, shuffle, seed, r, W)
    else:
        theirs = Detectron2RepeatFactorTrainingSampler(f32, shuffle, seed, r, W)
    rounds = 3  # chunks each worker reads
    stream = list(islice(sampler(), loaded + rounds * workers * chunk))
    saved = sampler()
    list(islice(saved, loaded))
    resumed = sampler()
    resumed.load_state_dict(json.loads(json.dumps(saved.state_dict())))
    for w in range(workers):
        positions = [(k * workers + w) * chunk + i for k in range(rounds) for i in range(chunk)]
        mine = worker_reads(sampler(), w, workers, chunk, rounds * chunk)
        assert mine == [stream[p] for p in positions]
        assert mine == worker_reads(theirs, w, workers, chunk, rounds * chunk)
        after = worker_reads(resumed, w, workers, chunk, rounds * chunk)
        assert after == [stream[loaded + p] for p in positions]


# --- a real DataLoader with 2 and 3 workers --------------------------------------------------------

BATCHES = 12  # batches read per loader: several passes of every rank's stream, every worker
LOADER_CASES = [
    # (sampler, workers, batch size, shuffle): 2 and 3 workers by batch 2 and 4, for each sampler
    ("InfiniteSampler", 2, 2, True),
    ("InfiniteSampler", 2, 4, False),
    ("InfiniteSampler", 3, 2, False),
    ("InfiniteSampler", 3, 4, True),
    ("RepeatFactorSampler", 2, 2, False),
    ("RepeatFactorSampler", 2, 4, True),
    ("RepeatFactorSampler", 3, 2, True),
    ("RepeatFactorSampler", 3, 4, False),
    # no sharding: in the main process, and in one worker (detectron2 reads the whole stream)
    ("InfiniteSampler", 0, 4, True),
    ("RepeatFactorSampler", 1, 2, True),
]


def case_id(case: tuple) -> str:
    kind, workers, batch, shuffle = case
    return f"{kind}-{workers}workers-batch{batch}-{'shuffled' if shuffle else 'in-order'}"


# --8<-- [start:detectron2]
@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")  # 3 on 2 cores
@pytest.mark.parametrize("case", LOADER_CASES, ids=case_id)
def test_detectron2s_loader_delivers_the_batches_it_delivers_with_its_own_sampler(case, loop_cell):
    """Invariant: on each rank of 2, detectron2's loader (ToIterableDataset sharded by worker and
    chunk, batched by a real DataLoader) delivers exactly the batches with ours that it delivers
    with detectron2's TrainingSampler / RepeatFactorTrainingSampler (fractional factors), and
    they are the rank's stream, batch after batch, in order."""
    kind, workers, batch, shuffle = case
    for rank in range(WORLD):
        with_ours = first_batches(
            build_batch_data_loader(dataset_of(kind), ours(kind, rank, shuffle), batch, workers),
            BATCHES,
        )
        with_theirs = first_batches(
            build_batch_data_loader(
                dataset_of(kind), detectron2s(kind, rank, shuffle), batch, workers
            ),
            BATCHES,
        )
        assert with_ours == with_theirs
        stream = list(islice(ours(kind, rank, shuffle), BATCHES * batch))
        assert with_ours == [stream[i : i + batch] for i in range(0, len(stream), batch)]
    loop_cell(kind, "detectron2's training loader", "passed")


# --8<-- [end:detectron2]


RESUME_CASES = [
    ("InfiniteSampler", 2, 2, True),
    ("InfiniteSampler", 3, 4, False),
    ("RepeatFactorSampler", 3, 2, True),
    ("RepeatFactorSampler", 2, 4, False),
    ("InfiniteSampler", 0, 2, True),
]


# --8<-- [start:detectron2_resume]
@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
@pytest.mark.parametrize("case", RESUME_CASES, ids=case_id)
def test_after_load_state_dict_the_loader_delivers_the_stream_from_the_loaded_position(
    case, loop_cell
):
    """Invariant: the loop trained `done` batches; a sampler advanced by done * batch indices (on
    rank 0: any rank's state loads on every rank) saves a state; loaded into each rank's sampler,
    detectron2's loader delivers exactly the uninterrupted loader's batches from batch `done` on,
    and detectron2's sampler's. Every worker's iter() starts at the loaded position, so the
    workers' chunks start there too (done = 5 is no multiple of the workers: worker 0 now reads
    what another read in the uninterrupted run)."""
    kind, workers, batch, shuffle = case
    done, more = 5, 7
    saved = ours(kind, 0, shuffle)
    list(islice(saved, done * batch))
    state = json.loads(json.dumps(saved.state_dict()))
    for rank in range(WORLD):
        uninterrupted = first_batches(
            build_batch_data_loader(dataset_of(kind), ours(kind, rank, shuffle), batch, workers),
            done + more,
        )
        resumed = ours(kind, rank, shuffle)
        resumed.load_state_dict(state)
        loader = build_batch_data_loader(dataset_of(kind), resumed, batch, workers)
        assert first_batches(loader, more) == uninterrupted[done:]
        theirs = first_batches(
            build_batch_data_loader(
                dataset_of(kind), detectron2s(kind, rank, shuffle), batch, workers
            ),
            done + more,
        )
        assert uninterrupted == theirs
    loop_cell(kind, "detectron2's loader, resumed", "passed", "load_state_dict before building it")


# --8<-- [end:detectron2_resume]


@pytest.mark.timeout(60)
def test_with_workers_the_main_process_sampler_never_moves():
    """Invariant: detectron2's loader runs the sampler inside its workers, each on its own copy:
    the sampler the main process holds has read nothing however many batches were delivered
    (position 0), so a checkpoint counts the batches its loop trained instead. Without workers
    the main process reads it: its position is exactly the indices delivered."""
    sampler = InfiniteSampler(range(IMAGES), WORLD, 1, seed=SEED)
    first_batches(build_batch_data_loader(dataset_of("InfiniteSampler"), sampler, 2, 2), 6)
    assert sampler.state_dict()["position"] == 0
    first_batches(build_batch_data_loader(dataset_of("InfiniteSampler"), sampler, 2, 0), 6)
    assert sampler.state_dict()["position"] == 12


@pytest.mark.timeout(60)
def test_mmengines_sampler_whose_iterators_share_one_generator_gives_other_batches_there():
    """Invariant: the independence of iter() is what detectron2's loader needs. mmengine's
    InfiniteSampler makes its generator once, at construction, and every iter() continues it:
    a worker's chunk slots then take turns on one stream and the loader delivers other batches
    than detectron2's sampler (and ours) deliver, though every iter() of it alone is the stream."""
    mm = pytest.importorskip("mmengine.dataset", reason="mmengine is not installed")
    theirs = mm.InfiniteSampler(range(IMAGES), shuffle=True, seed=SEED)
    # mmengine reads rank and world size from the process group: set them as it would
    theirs.rank, theirs.world_size = 1, WORLD
    theirs.indices = theirs._indices_of_rank()
    dataset = dataset_of("InfiniteSampler")
    with_mmengines = first_batches(build_batch_data_loader(dataset, theirs, 2, 2), 6)
    with_ours = first_batches(
        build_batch_data_loader(dataset, ours("InfiniteSampler", 1, True), 2, 2), 6
    )
    assert with_ours == first_batches(
        build_batch_data_loader(dataset, detectron2s("InfiniteSampler", 1, True), 2, 2), 6
    )
    assert with_mmengines != with_ours


def test_a_loader_asked_its_length_answers_the_images_over_the_batch_then_warns_past_them():
    """Invariant: through detectron2's ToIterableDataset, len(loader) is len(sampler) // batch
    (its drop_last=True), len(sampler) the number of images (as mmengine's InfiniteSampler
    answers), where
    detectron2's own samplers have no len() and the loader's raises TypeError. Once asked, torch
    warns at every batch past len(sampler) batches (it counts batches against the dataset's
    length), and the stream goes on."""
    sampler = RepeatFactorSampler(FACTORS, WORLD, 0, seed=SEED)
    assert len(sampler) == len(FACTORS) == 7
    loader = build_batch_data_loader(dataset_of("RepeatFactorSampler"), sampler, 2, 0)
    assert len(loader) == 3  # 7 images in batches of 2, the short one dropped: detectron2's 3
    batches = iter(loader)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        head = [next(batches) for _ in range(7)]
    with pytest.warns(UserWarning, match=r"Length of IterableDataset .* reported to be 7\(when"):
        head.append(next(batches))
    stream = list(islice(RepeatFactorSampler(FACTORS, WORLD, 0, seed=SEED), 16))
    assert head == [stream[i : i + 2] for i in range(0, 16, 2)]
    theirs = detectron2s("InfiniteSampler", 0, True)
    with pytest.raises(TypeError):
        len(build_batch_data_loader(dataset_of("InfiniteSampler"), theirs, 2, 0))


# --- mmengine ---------------------------------------------------------------------------------


def test_len_and_set_epoch_answer_as_mmengines_infinite_sampler():
    """Invariant: len() is the dataset's size, as mmengine's InfiniteSampler answers (images,
    for repeat factors: not a pass's length), so a DataLoader's len() is the same with either;
    set_epoch(epoch) is accepted and changes nothing, an epoch that is not an int is refused
    naming it. (The indices equal mmengine's: tests/test_infinite.py.)"""
    mm = pytest.importorskip("mmengine.dataset", reason="mmengine is not installed")
    for shuffle in (True, False):
        theirs = mm.InfiniteSampler(range(IMAGES), shuffle=shuffle, seed=SEED)
        mine = InfiniteSampler(range(IMAGES), 1, 0, shuffle, SEED)
        assert len(mine) == len(theirs) == IMAGES
        loaders = [DataLoader(range(IMAGES), batch_size=3, sampler=s) for s in (mine, theirs)]
        assert len(loaders[0]) == len(loaders[1]) == 3
        before = list(islice(mine, 20))
        assert mine.set_epoch(3) is None and theirs.set_epoch(3) is None
        assert list(islice(mine, 20)) == before
    repeat = RepeatFactorSampler(FACTORS, 1, 0, seed=SEED)
    assert len(repeat) == len(FACTORS)
    assert repeat.set_epoch(0) is None
    for bad in ("1", 1.0, True):
        with pytest.raises(TypeError, match=rf"^epoch should be an integer, but got epoch={bad!r}"):
            repeat.set_epoch(bad)


RUNNER_ITERS, RESUMED_ITERS, RUNNER_BATCH, RUNNER_SEED = 6, 9, 2, 3


def train_in_mmengine_runners(work_dir: str) -> dict:
    """Train a tiny model in a real mmengine ``Runner`` (``IterBasedTrainLoop``, default hooks,
    the logger every iteration) on a DataLoader through our ``InfiniteSampler``, then resume it
    in a second Runner to ``RESUMED_ITERS``; return the batches each trained on, and the calls
    the loop and hooks made to the sampler. Run in a fresh interpreter: a Runner sets global
    state (the multiprocessing start method, the RNGs' seeds, loggers)."""
    from mmengine.model import BaseModel
    from mmengine.runner import Runner

    calls: dict[str, list] = {"len": [], "set_epoch": []}

    class Recorded(InfiniteSampler):
        """Our sampler, recording what the Runner asks of it."""

        def __len__(self) -> int:
            calls["len"].append(super().__len__())
            return super().__len__()

        def set_epoch(self, epoch: int) -> None:
            calls["set_epoch"].append(epoch)
            super().set_epoch(epoch)

    class Recorder(BaseModel):
        """A one-weight model that records the indices of every batch it trains on."""

        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))
            self.seen: list[list[int]] = []

        def forward(self, indices: torch.Tensor, mode: str = "tensor"):
            self.seen.append(indices.tolist())
            return {"loss": (self.weight * indices.float()).pow(2).mean()}

    def as_inputs(batch: list[int]) -> dict:
        return {"indices": torch.tensor(batch)}

    seen = {}
    runs = [("first", RUNNER_ITERS, False), ("resumed", RESUMED_ITERS, True)]
    for name, max_iters, resume in runs:
        sampler = Recorded(range(IMAGES), num_replicas=1, rank=0, seed=RUNNER_SEED)
        loader = DataLoader(range(IMAGES), RUNNER_BATCH, sampler=sampler, collate_fn=as_inputs)
        model = Recorder()
        runner = Runner(
            model=model,
            work_dir=work_dir,
            experiment_name=name,
            train_dataloader=loader,
            train_cfg=dict(by_epoch=False, max_iters=max_iters),
            optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.1)),
            default_hooks=dict(logger=dict(type="LoggerHook", interval=1)),
            resume=resume,
            randomness=dict(seed=0),
            log_level="WARNING",
        )
        runner.train()
        seen[name] = model.seen
    return {"seen": seen, "calls": calls}


# --8<-- [start:mmengine]
@pytest.mark.timeout(120)
def test_an_mmengine_runner_trains_on_the_streams_first_batches_and_resumes_by_replaying(
    tmp_path, loop_cell
):
    """Invariant: a real mmengine Runner (IterBasedTrainLoop, default hooks, logging every
    iteration, which asks len(train_dataloader)) trains on exactly the stream's first
    max_iters * batch indices, which mmengine's own InfiniteSampler also gives; its
    DistSamplerSeedHook calls set_epoch once a run. Resumed from its checkpoint, mmengine replays the
    trained batches from a fresh iter() of the loader, which ours starts at the stream's start,
    so the resumed run trains on the next indices (loading the sampler's state as well would
    skip them twice)."""
    mm = pytest.importorskip("mmengine.dataset", reason="mmengine is not installed")
    out = tmp_path / "result.json"
    code = (
        "import json, sys; from test_detection_loaders import train_in_mmengine_runners as t; "
        "json.dump(t(sys.argv[1]), open(sys.argv[2], 'w'))"
    )
    tests = str(Path(__file__).parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    # mmengine 0.10's resume calls torch.load without weights_only, which torch >= 2.6 defaults
    # to True: its own checkpoint (a HistoryBuffer in the message hub) is then refused
    env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "work"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    stream = list(islice(InfiniteSampler(range(IMAGES), 1, 0, seed=RUNNER_SEED), 18))
    theirs = list(islice(mm.InfiniteSampler(range(IMAGES), seed=RUNNER_SEED), 12))
    first, resumed = result["seen"]["first"], result["seen"]["resumed"]
    assert first == [stream[i : i + 2] for i in range(0, 12, 2)]
    assert [i for b in first for i in b] == theirs
    assert resumed == [stream[i : i + 2] for i in range(12, 18, 2)]
    calls = result["calls"]
    assert calls["len"] and set(calls["len"]) == {IMAGES}  # the logger asked len(train_dataloader)
    # once per run, before its one (iteration-based) epoch: the resumed run's epoch is the
    # checkpoint's, 1 (the first run's epoch was done); a no-op for an endless stream either way
    assert calls["set_epoch"] == [0, 1]
    loop_cell("InfiniteSampler", "mmengine Runner", "passed", "its resume replays: load no state")


# --8<-- [end:mmengine]
