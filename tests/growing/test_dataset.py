"""Properties of distsampling.SnapshotDataset, each checked against a model: the shards concatenated.

The model of a snapshot is ``np.concatenate`` of its shards in order: sample ``i`` of the dataset
must be row ``i`` of that array, whichever path reads it (``__getitem__``, ``__getitems__``, a
DataLoader with or without workers).
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from hypothesis import given
from hypothesis import strategies as st

from distsampling import DistributedSampler, SnapshotDataset, collate_batch
from distsampling.growing import buffers, dataset
from distsampling.growing.cache import ShardCache
from distsampling.growing.snapshot import CorruptShardError, Snapshot
from strategies import (
    epochs,
    sample_shapes,
    sampler_args,
    seeds,
    snapshot_layouts,
)


def write_snapshot(root: str, layout: list[int], shape: tuple, seed: int = 0):
    """Write one shard per entry of ``layout``; return ``(snapshot, model)``, model = all rows."""
    rng = np.random.default_rng(abs(seed))
    shards, arrays = [], []
    for k, n in enumerate(layout):
        array = rng.standard_normal((n, *shape)).astype(np.float32)
        path = os.path.join(root, f"shard-{k}.npy")
        np.save(path, array)
        shards.append((path, n))
        arrays.append(array)
    model = np.concatenate(arrays) if arrays else np.zeros((0, *shape), np.float32)
    return Snapshot(0, tuple(shards)), model


@given(layout=snapshot_layouts, shape=sample_shapes, seed=seeds)
def test_every_index_reads_the_row_of_the_concatenated_shards(layout, shape, seed):
    """Invariant: ds[i] == concatenate(shards)[i] for every i in [-N, N), and len(ds) == N."""
    with tempfile.TemporaryDirectory() as root:
        snapshot, model = write_snapshot(root, layout, shape, seed)
        ds = SnapshotDataset(snapshot)
        assert len(ds) == len(snapshot) == len(model)
        for i in range(-len(model), len(model)):
            idx_ours, idx_model = ds[i], torch.from_numpy(np.asarray(model[i]))
            assert idx_ours.shape == idx_model.shape and torch.equal(idx_ours, idx_model)


@given(layout=snapshot_layouts.filter(any), shape=sample_shapes, data=st.data())
def test_getitems_is_the_stack_of_the_rows_in_index_order(layout, shape, data):
    """Invariant: __getitems__(idx) == stack([ds[i] for i in idx]), repeats and any order included."""
    with tempfile.TemporaryDirectory() as root:
        snapshot, model = write_snapshot(root, layout, shape)
        n = len(model)
        indices = data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=12), "indices")
        idx_ours = SnapshotDataset(snapshot).__getitems__(indices)
        assert idx_ours.shape == (len(indices), *shape)
        assert torch.equal(idx_ours, torch.from_numpy(model[indices]))


@given(layout=snapshot_layouts, args=sampler_args(), epoch=epochs, batch_size=st.integers(1, 7))
def test_dataloader_over_a_distributed_sampler_matches_torch_over_the_model(
    layout, args, epoch, batch_size
):
    """Invariant: our dataset + sampler + collate_batch == torch's sampler over a TensorDataset."""
    with tempfile.TemporaryDirectory() as root:
        snapshot, model = write_snapshot(root, layout, (2,))
        ds = SnapshotDataset(snapshot)
        ours, theirs = DistributedSampler(ds, **args), tud.DistributedSampler(model, **args)
        ours.set_epoch(epoch)
        theirs.set_epoch(epoch)
        loader = tud.DataLoader(ds, batch_size, sampler=ours, collate_fn=collate_batch)
        reference = tud.DataLoader(
            tud.TensorDataset(torch.from_numpy(model)), batch_size, sampler=theirs
        )
        idx_ours = [b.tolist() for b in loader]
        idx_torch = [b.tolist() for (b,) in reference]
        assert idx_ours == idx_torch


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("num_workers", "persistent", "pin"), [(1, False, False), (2, True, False), (2, False, True)]
)
def test_workers_persistent_and_pinned_loaders_give_the_same_batches(
    tmp_path, num_workers, persistent, pin
):
    """Invariant: with workers (persistent or not, pin_memory or not) every epoch equals num_workers=0."""
    snapshot, model = write_snapshot(str(tmp_path), [5, 3, 4], (4,))
    ds = SnapshotDataset(snapshot)
    expected = torch.from_numpy(model)
    loader = tud.DataLoader(
        ds,
        batch_size=5,
        num_workers=num_workers,
        persistent_workers=persistent,
        pin_memory=pin,
        collate_fn=collate_batch,
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pin_memory.*")  # CPU-only torch: no pinning
        for _ in range(2):  # two epochs: persistent workers serve the second one
            batches = list(loader)
            assert torch.equal(torch.cat(batches), expected)
            # a worker's batch arrives in one of its buffers, mapped here once (only which
            # buffer it is crossed the process boundary), or pinned
            assert all(in_a_received_buffer(b) or b.is_pinned() for b in batches)


def in_a_received_buffer(batch: torch.Tensor) -> bool:
    """Does the batch lie in a buffer slot that this process received from a worker's pool?"""
    ptr = batch.data_ptr()
    slots = [a for pool in buffers._RECEIVED.values() for a in pool.slots.values()]
    return any(a.ctypes.data <= ptr < a.ctypes.data + len(a) for a in slots)


def in_shared_memory(batch: torch.Tensor, ds: SnapshotDataset) -> bool:
    """Is the batch a shared storage, or does it lie in a shared slot of the dataset's pool?"""
    ptr, pool = batch.data_ptr(), ds._pool
    slots = [] if pool is None or not pool.shared else pool._storages
    in_slot = any(s.data_ptr() <= ptr < s.data_ptr() + s.nbytes() for s in slots)
    return batch.is_shared() or (in_slot and all(s.is_shared() for s in slots))


def _made_in_shared_memory(batch: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """A collate_fn, so it runs in the worker: was the batch shared before torch sent it?"""
    return batch, in_shared_memory(batch, tud.get_worker_info().dataset)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("strategy", ["file_descriptor", "file_system"])
def test_a_workers_batch_is_made_in_shared_memory_before_it_is_sent(tmp_path, strategy):
    """Invariant: in a worker __getitems__ returns a shared tensor (torch sends it, not a copy)."""
    snapshot, model = write_snapshot(str(tmp_path), [5, 3, 4], (4,))
    previous = torch.multiprocessing.get_sharing_strategy()
    torch.multiprocessing.set_sharing_strategy(strategy)
    try:
        loader = tud.DataLoader(
            SnapshotDataset(snapshot),
            batch_size=5,
            sampler=[11, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],  # runs across shards, out of order
            num_workers=1,
            collate_fn=_made_in_shared_memory,
        )
        batches, shared = zip(*loader, strict=True)
    finally:
        torch.multiprocessing.set_sharing_strategy(previous)
    assert all(shared)
    order = [11, *range(11)]
    assert torch.equal(torch.cat(batches), torch.from_numpy(model[order]))


@pytest.fixture
def in_a_worker(monkeypatch):
    """Run __getitems__ in this process as if it were a DataLoader worker."""
    monkeypatch.setattr(dataset, "get_worker_info", lambda: object())


@given(layout=snapshot_layouts.filter(any), data=st.data())
def test_in_a_worker_getitems_reads_the_same_rows(layout, data):
    """Invariant: the shared-memory path (preadv per run of rows) equals the model, any indices."""
    with tempfile.TemporaryDirectory() as root, pytest.MonkeyPatch.context() as mp:
        mp.setattr(dataset, "get_worker_info", lambda: object())
        snapshot, model = write_snapshot(root, layout, (2, 3))
        n = len(model)
        indices = data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=12), "indices")
        ds = SnapshotDataset(snapshot)
        batch = ds.__getitems__(indices)
        assert in_shared_memory(batch, ds) and torch.equal(batch, torch.from_numpy(model[indices]))


@given(pairs=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6)), min_size=1, max_size=20))
def test_runs_cover_the_batch_with_maximal_runs_of_consecutive_rows(pairs):
    """Invariant: the runs, expanded, give back every (shard, row) in order; none could be merged."""
    shard, rows = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    runs = list(dataset._runs(shard, rows))
    expanded = [(k, row + i) for _, k, row, n in runs for i in range(n)]
    assert expanded == [tuple(p) for p in pairs]
    assert [j for j, *_ in runs] == list(np.cumsum([0] + [n for *_, n in runs])[:-1])
    for (_, k0, r0, n0), (_, k1, r1, _) in itertools.pairwise(runs):
        assert (k0, r0 + n0) != (k1, r1)  # the next run does not continue this one


#: run in a private mount namespace: /dev/shm a real 4 MiB tmpfs, an 8 MiB batch in one worker
FILL_A_SMALL_DEV_SHM = r"""
import os, subprocess, sys
import numpy as np
import torch.utils.data as tud
from distsampling import SnapshotDataset, collate_batch
from distsampling.growing.snapshot import Snapshot

subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", "/dev/shm"], check=True)
path = os.path.join(sys.argv[1], "s.npy")
np.save(path, np.zeros((8, 1 << 18), np.float32))  # 8 samples of 1 MiB
loader = tud.DataLoader(SnapshotDataset(Snapshot(0, ((path, 8),))), batch_size=8,
                        num_workers=1, collate_fn=collate_batch)
try:
    next(iter(loader))
except OSError as err:  # re-raised by the DataLoader with the worker's traceback as its text
    print(type(err).__name__, err)
"""


def test_a_full_dev_shm_in_a_worker_raises_enospc_naming_the_batch(tmp_path):
    """Invariant: on a real full /dev/shm, a worker's batch is an OSError(ENOSPC) saying what to
    do, raised in the training process (never a SIGBUS when a page of the batch is written)."""
    from test_writer import SRC, _namespace  # the private mount namespace of the full-disk test

    run = subprocess.run(
        [*_namespace(), sys.executable, "-c", FILL_A_SMALL_DEV_SHM, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.path.abspath(SRC)},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("OSError "), run.stdout + run.stderr
    assert (
        f"OSError: [Errno {errno.ENOSPC}] no space left in shared memory (/dev/shm) for a batch "
        "of 8388608 bytes: enlarge it (docker run --shm-size=...)" in run.stdout
    ), run.stdout


def test_a_shard_truncated_after_its_check_is_a_corrupt_shard_in_a_worker(tmp_path, in_a_worker):
    """Invariant: a worker reading past the end of a shard that shrank raises CorruptShardError
    naming the file, never returns a batch with stale or missing bytes."""
    snapshot, _ = write_snapshot(str(tmp_path), [4], (8,))
    ds = SnapshotDataset(snapshot)
    ds.__getitems__([0])  # checked and opened
    path = snapshot.shards[0][0]
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 40)  # cut into the last sample
    with pytest.raises(CorruptShardError, match=re.escape(path) + r" is truncated or corrupt"):
        ds.__getitems__([3])


def test_a_worker_reads_an_evicted_shard_it_has_opened(tmp_path, in_a_worker):
    """Invariant: once a worker has opened a shard, removing its file (the cache evicting it)
    changes nothing this snapshot reads."""
    snapshot, model = write_snapshot(str(tmp_path), [3, 2], (4,))
    ds = SnapshotDataset(snapshot)
    ds.__getitems__([0, 3])  # both shards opened
    for path, _ in snapshot.shards:
        os.remove(path)
    assert torch.equal(ds.__getitems__([4, 1, 2]), torch.from_numpy(model[[4, 1, 2]]))


def test_pickling_carries_the_snapshot_not_the_memory_maps(tmp_path):
    """Invariant: a dataset that has read data pickles to a few hundred bytes and reads the same after."""
    snapshot, model = write_snapshot(str(tmp_path), [50, 50], (64, 64))  # 1.6 MB of samples
    ds = SnapshotDataset(snapshot)
    _ = ds[0], ds[99]  # both shards memory-mapped in this process
    blob = pickle.dumps(ds)
    assert len(blob) < 1000
    clone = pickle.loads(blob)
    assert torch.equal(clone.__getitems__(list(range(100))), torch.from_numpy(model))


def test_reads_a_snapshot_of_a_shard_cache(tmp_path):
    """Invariant: over ShardCache.snapshot, sample i is row i of the shards added, in FIFO order."""
    cache = ShardCache(tmp_path, capacity_bytes=10**6)
    added = [np.full((k + 1, 3), k, np.int32) for k in range(4)]
    for array in added:
        cache.add(array)
    ds = SnapshotDataset(cache.snapshot(epoch=0))
    assert torch.equal(
        ds.__getitems__(list(range(len(ds)))), torch.from_numpy(np.concatenate(added))
    )


def test_collate_batch_passes_a_tensor_through_and_stacks_a_list():
    """Invariant: a ready batch is returned as is (no copy); a list of samples is default-collated."""
    batch = torch.arange(6).view(2, 3)
    assert collate_batch(batch) is batch
    assert torch.equal(collate_batch([batch[0], batch[1]]), batch)


# --- bad input: each error names the argument (or the file) and the value ------------------------


def test_not_a_snapshot_raises_type_error_naming_it():
    """Invariant: a list of paths instead of a Snapshot is rejected with the value and its type."""
    with pytest.raises(
        TypeError,
        match=r"snapshot should be a distsampling.Snapshot .* but got snapshot=\['a.npy'\] of type list",
    ):
        SnapshotDataset(["a.npy"])


@pytest.mark.parametrize("index", [6, -7, 100])
def test_index_out_of_range_raises_index_error_naming_it(tmp_path, index):
    """Invariant: indices outside [-N, N) raise IndexError naming the index, single or batched."""
    ds = SnapshotDataset(write_snapshot(str(tmp_path), [3, 3], ())[0])
    message = rf"index should be in \[0, 6\), but got index={index}"
    with pytest.raises(IndexError, match=message):
        ds[index]
    with pytest.raises(IndexError, match=message):
        ds.__getitems__([0, index])


@pytest.mark.parametrize(
    "index", [1.0, "1", None, True, torch.tensor(1.0), torch.tensor([1]), torch.tensor(True)]
)
def test_non_integer_index_raises_type_error_naming_it(tmp_path, index):
    """Invariant: an index must be an integer; the message names it and its type."""
    ds = SnapshotDataset(write_snapshot(str(tmp_path), [3], ())[0])
    with pytest.raises(
        TypeError, match=re.escape(f"index should be an integer, but got index={index!r}")
    ):
        ds[index]


def test_truncated_shard_raises_corrupt_shard_error_naming_the_file(tmp_path):
    """Invariant: a shard cut short is reported with its path when it is first read."""
    snapshot, _ = write_snapshot(str(tmp_path), [4, 4], (8,))
    bad = snapshot.shards[1][0]
    with open(bad, "r+b") as f:
        f.truncate(os.path.getsize(bad) - 10)
    ds = SnapshotDataset(snapshot)
    assert ds[0].shape == (8,)  # the intact shard still reads
    with pytest.raises(CorruptShardError, match=rf"shard {bad} is truncated or corrupt"):
        ds[5]


def test_shard_with_another_sample_count_raises_naming_the_file(tmp_path):
    """Invariant: a shard holding 3 samples where the snapshot lists 4 is reported, not misread."""
    snapshot, _ = write_snapshot(str(tmp_path), [3], ())
    path = snapshot.shards[0][0]
    ds = SnapshotDataset(Snapshot(0, ((path, 4),)))
    with pytest.raises(
        CorruptShardError, match=rf"shard {path} should hold 4 samples, but it holds 3"
    ):
        ds[0]


def test_shards_of_different_sample_shapes_raise_naming_the_file(tmp_path):
    """Invariant: all shards of a snapshot must share sample_shape and dtype; the odd one is named."""
    a, b = str(tmp_path / "a.npy"), str(tmp_path / "b.npy")
    np.save(a, np.zeros((2, 3), np.float32))
    np.save(b, np.zeros((2, 4), np.float32))
    ds = SnapshotDataset(Snapshot(0, ((a, 2), (b, 2))))
    with pytest.raises(ValueError, match=rf"but shard {b} has \(4,\), torch.float32"):
        ds.__getitems__([0, 3])


def test_missing_shard_raises_file_not_found(tmp_path):
    """Invariant: a shard deleted under a snapshot (evicted too early) is a FileNotFoundError."""
    ds = SnapshotDataset(Snapshot(0, ((str(tmp_path / "gone.npy"), 2),)))
    with pytest.raises(FileNotFoundError, match=r"gone\.npy"):
        ds[0]


@pytest.mark.parametrize("batched", [False, True])
def test_empty_snapshot_is_an_empty_dataset(batched):
    """Invariant: a snapshot with no shards has length 0 and every index is out of range."""
    ds = SnapshotDataset(Snapshot(0, ()))
    assert len(ds) == 0
    with pytest.raises(IndexError, match=r"index should be in \[0, 0\), but got index=0"):
        ds.__getitems__([0]) if batched else ds[0]


#: the integer types a sampler may yield: Python ints, numpy ints, 0-d integer tensors
integer_kinds = st.sampled_from(
    [int, np.int64, np.int32, torch.tensor, lambda i: torch.tensor(i, dtype=torch.int32)]
)


@given(layout=snapshot_layouts.filter(any), data=st.data())
def test_numpy_integers_and_integer_tensors_are_indices_like_ints(layout, data):
    """Invariant: ds[k(i)] and __getitems__([k(i), ...]) read row i for every integer kind k."""
    with tempfile.TemporaryDirectory() as root:
        snapshot, model = write_snapshot(root, layout, (3,))
        ds, n = SnapshotDataset(snapshot), len(model)
        indices = data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=8), "indices")
        kinds = data.draw(st.lists(integer_kinds, min_size=len(indices), max_size=len(indices)))
        typed = [kind(i) for kind, i in zip(kinds, indices, strict=True)]
        assert torch.equal(ds[typed[0]], torch.from_numpy(model[indices[0]]))
        assert torch.equal(ds.__getitems__(typed), torch.from_numpy(model[indices]))


@pytest.mark.parametrize("batch_size", [None, 1, 4])
def test_a_dataloader_over_a_randperm_sampler_reads_the_permuted_rows(tmp_path, batch_size):
    """Invariant: sampler=torch.randperm(n) (which yields 0-d tensors) reads model[perm]."""
    snapshot, model = write_snapshot(str(tmp_path), [5, 3, 4], (2,))
    perm = torch.randperm(len(model), generator=torch.Generator().manual_seed(0))
    loader = tud.DataLoader(
        SnapshotDataset(snapshot), batch_size=batch_size, sampler=perm, collate_fn=collate_batch
    )
    idx_ours = torch.cat([b.reshape(-1, 2) for b in loader])
    assert torch.equal(idx_ours, torch.from_numpy(model[perm.numpy()]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.uint8])
@pytest.mark.parametrize("in_worker", [False, True])
def test_an_empty_batch_has_the_sample_shape_and_the_shards_dtype(tmp_path, dtype, in_worker):
    """Invariant: __getitems__([]) is (0, *sample_shape) in the shards' dtype, as torch.stack of
    no rows of this dataset would be if it could know them."""
    path = str(tmp_path / "s.npy")
    np.save(path, np.zeros((3, 2, 5), dtype))
    ds = SnapshotDataset(Snapshot(0, ((path, 3),)))
    with pytest.MonkeyPatch.context() as mp:
        if in_worker:
            mp.setattr(dataset, "get_worker_info", lambda: object())
        empty = ds.__getitems__([])
    assert empty.shape == (0, 2, 5)
    assert empty.dtype == torch.from_numpy(np.zeros(0, dtype)).dtype


@given(layout=snapshot_layouts.filter(any), data=st.data())
def test_resumed_reads_equal_the_uninterrupted_reads(layout, data):
    """Invariant: reading the first k batches, saving (through JSON), loading into a fresh
    dataset over the same snapshot and reading the rest gives the uninterrupted batches, and
    the same state at the end (position included)."""
    with tempfile.TemporaryDirectory() as root:
        snapshot, _ = write_snapshot(root, layout, (2,))
        n = len(snapshot)
        batches = data.draw(
            st.lists(st.lists(st.integers(0, n - 1), max_size=6), max_size=6), "batches"
        )
        k = data.draw(st.integers(0, len(batches)), "stop after")
        whole = SnapshotDataset(snapshot)
        idx_whole = [whole.__getitems__(b) for b in batches]
        first = SnapshotDataset(snapshot)
        idx_resumed = [first.__getitems__(b) for b in batches[:k]]
        rest = SnapshotDataset(snapshot)
        rest.load_state_dict(json.loads(json.dumps(first.state_dict())))
        idx_resumed += [rest.__getitems__(b) for b in batches[k:]]
        assert all(torch.equal(a, b) for a, b in zip(idx_resumed, idx_whole, strict=True))
        assert rest.state_dict() == whole.state_dict()
        assert whole.state_dict()["position"] == sum(map(len, batches))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_stateful_dataloader_resumes_the_uninterrupted_batches(tmp_path, num_workers):
    """Invariant: torchdata's StatefulDataLoader, stopped after k batches and resumed in a new
    loader, yields exactly the rest of the uninterrupted epoch; it saves the dataset's state."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    snapshot, model = write_snapshot(str(tmp_path), [5, 3, 4], (2,))

    def make():
        return StatefulDataLoader(
            SnapshotDataset(snapshot),
            batch_size=2,
            num_workers=num_workers,
            collate_fn=collate_batch,
        )

    idx_whole = list(make())
    for k in (0, 3, len(idx_whole)):
        first = make()
        it = iter(first)
        idx_resumed = [next(it) for _ in range(k)]
        state = first.state_dict()
        del it
        resumed = make()
        resumed.load_state_dict(state)
        idx_resumed += list(resumed)
        assert all(torch.equal(a, b) for a, b in zip(idx_resumed, idx_whole, strict=True))
        assert len(idx_resumed) == len(idx_whole)
        if num_workers == 0:  # the dataset's own count was saved and resumed too
            assert resumed.dataset.position == len(model)
    assert torch.equal(torch.cat(idx_whole), torch.from_numpy(model))


def test_a_saved_state_of_another_snapshot_or_position_is_refused(tmp_path):
    """Invariant: a state from another class, version, snapshot (epoch, samples, shards), with a
    missing or negative position is refused, naming the field and both values."""
    snapshot, _ = write_snapshot(str(tmp_path), [3, 2], (2,))
    ds = SnapshotDataset(snapshot)
    good = ds.state_dict()
    cases = [
        ({**good, "kind": "DistributedSampler"}, ValueError, "state comes from another sampler"),
        ({**good, "version": 2}, ValueError, "format version=2"),
        ({**good, "epoch": 1}, ValueError, "epoch was 1 when saved, but is 0 now"),
        ({**good, "samples": 6}, ValueError, "samples was 6 when saved, but is 5 now"),
        ({**good, "shards": 3}, ValueError, "shards was 3 when saved, but is 2 now"),
        ({k: v for k, v in good.items() if k != "position"}, KeyError, "no 'position'"),
        ({**good, "position": -1}, ValueError, "position should be >= 0, but got position=-1"),
        ({**good, "position": "3"}, TypeError, "position should be an integer"),
    ]
    for state, error, message in cases:
        with pytest.raises(error, match=re.escape(message)):
            ds.load_state_dict(state)
    assert ds.state_dict() == good  # nothing changed by a refused state
