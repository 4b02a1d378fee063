"""Properties of distsampling.growing.buffers: a lent buffer is never overwritten while viewed.

The model of a pool is "every batch tensor keeps the values written into it for as long as any
tensor views it": each property writes a distinct value into every batch, plays a sequence of
takes, sends (a pickling round trip, as a DataLoader worker's queue does), drops and views, and
checks every live tensor after every step.
"""

from __future__ import annotations

import os
import tempfile
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest
import torch
import torch.multiprocessing  # registers torch's reductions for ForkingPickler
import torch.utils.data as tud
from hypothesis import given
from hypothesis import strategies as st

from distsampling import SnapshotDataset, collate_batch
from distsampling.growing import buffers
from distsampling.growing.buffers import BatchBuffers
from distsampling.growing.snapshot import Snapshot

#: what a training loop does to the batches it holds: (action, which batch, its size)
pool_actions = st.lists(
    st.tuples(
        st.sampled_from(["take", "send", "drop", "view", "numpy"]),
        st.integers(0, 7),
        st.integers(1, 6),
    ),
    max_size=40,
)


def fill(tensor: torch.Tensor, value: float) -> None:
    """Write ``value`` everywhere in a lent batch, in place, as SnapshotDataset does."""
    tensor.numpy()[...] = value


@given(capacity=st.integers(0, 3), shared=st.booleans(), actions=pool_actions)
def test_a_lent_buffer_is_never_overwritten_while_a_tensor_views_it(capacity, shared, actions):
    """Invariant: whatever a loop keeps (a batch, a slice, its .numpy(), a received copy sent
    across), it keeps the values written into it; the pool never lends more than capacity."""
    pool = BatchBuffers(capacity, shared=shared)
    live: list[tuple[object, float]] = []  # (a tensor or array viewing a batch, its value)
    for step, (action, which, size) in enumerate(actions):
        if action == "take":
            tensor = pool.batch((size, 3), np.float32)
            fill(tensor, float(step))
            live.append((tensor, float(step)))
        elif live:
            held, value = live.pop(which % len(live))
            if action == "send" and shared and isinstance(held, torch.Tensor):
                held = ForkingPickler.loads(ForkingPickler.dumps(held))  # what a queue does
            elif action == "view":
                held = held[1:]  # keep a view only; the batch itself is dropped
            elif action == "numpy":
                held = np.asarray(held)
            if action != "drop":
                live.append((held, value))
        for held, value in live:
            assert (np.asarray(held) == value).all()
        assert pool.slots_lent() <= capacity


def test_a_slot_comes_back_only_when_the_last_view_is_gone():
    """Invariant: a slot is lent while the batch or any view of it lives, and free after."""
    pool = BatchBuffers(1, shared=False)
    batch = pool.batch((4,), np.float32)
    view, array = batch[2:], batch.numpy()
    del batch
    assert pool.slots_lent() == 1
    del view
    assert pool.slots_lent() == 1
    del array
    assert pool.slots_lent() == 0
    _again = pool.batch((4,), np.float32)
    assert pool.fresh == 0 and pool.slots_lent() == 1


def test_a_sent_batch_crosses_as_a_few_dozen_bytes_once_its_slot_is_mapped():
    """Invariant: after the first send of a slot (which carries its storage), a batch pickles
    to a small constant size, whatever its size in bytes."""
    pool = BatchBuffers(1, shared=True)
    first = pool.batch((1024, 256), np.float32)  # 1 MiB
    received = ForkingPickler.loads(ForkingPickler.dumps(first))
    del first, received
    second = pool.batch((1024, 256), np.float32)
    assert len(ForkingPickler.dumps(second)) < 200


def test_a_batch_of_a_slot_never_received_here_is_a_clear_error():
    """Invariant: batches of one pool sent to two processes fail loudly, never read stale maps."""
    with pytest.raises(RuntimeError, match=r"never received that slot"):
        buffers._receive("not-a-pool", os.getpid(), 0, (2,), "<f4", None)


def write_snapshot(
    root: str, shards: int, per_shard: int, shape: tuple
) -> tuple[Snapshot, np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((per_shard, *shape)).astype(np.float32) for _ in range(shards)]
    paths = []
    for k, array in enumerate(arrays):
        paths.append((os.path.join(root, f"{k}.npy"), per_shard))
        np.save(paths[-1][0], array)
    return Snapshot(0, tuple(paths)), np.concatenate(arrays)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("keep_every", [1, 3])
def test_batches_kept_past_their_reuse_keep_their_rows_with_workers(keep_every):
    """Invariant: with 2 workers, a loop that keeps every k-th batch (every batch: more than all
    the buffers) still holds the right rows in each at the end; nothing was overwritten."""
    with tempfile.TemporaryDirectory() as root:
        snapshot, model = write_snapshot(root, 6, 8, (16,))
        order = torch.randperm(len(model), generator=torch.Generator().manual_seed(1))
        loader = tud.DataLoader(
            SnapshotDataset(snapshot, buffers=2),
            batch_size=4,
            sampler=order,
            num_workers=2,
            collate_fn=collate_batch,
        )
        kept = [(b, batch) for b, batch in enumerate(loader) if b % keep_every == 0]
        for b, batch in kept:
            rows = order[b * 4 : (b + 1) * 4].numpy()
            assert torch.equal(batch, torch.from_numpy(model[rows]))


@pytest.mark.timeout(180)
def test_steady_epochs_reuse_a_bounded_set_of_mapped_buffers():
    """Invariant: with persistent workers, over 3 epochs every batch lies in a buffer that the
    training process mapped once (none is a fresh block), and it maps at most ``buffers``
    per worker: a steady epoch allocates no new pages."""
    with tempfile.TemporaryDirectory() as root:
        snapshot, model = write_snapshot(root, 4, 8, (16,))
        loader = tud.DataLoader(
            SnapshotDataset(snapshot, buffers=4),
            batch_size=4,
            num_workers=2,
            persistent_workers=True,
            collate_fn=collate_batch,
        )
        tokens = set()
        for _ in range(3):
            seen = []
            for batch in loader:
                pools = {t: buffers._RECEIVED[t] for t in buffers._RECEIVED}
                ptr = batch.data_ptr()
                home = [
                    t
                    for t, pool in pools.items()
                    for a in pool.slots.values()
                    if a.ctypes.data <= ptr < a.ctypes.data + len(a)
                ]
                assert len(home) == 1  # in exactly one mapped buffer
                tokens.add(home[0])
                seen.append(batch.clone())
            assert torch.equal(torch.cat(seen), torch.from_numpy(model))
        assert len(tokens) == 2  # one pool per (persistent) worker
        assert all(len(buffers._RECEIVED[t].slots) <= 4 for t in tokens)


def test_negative_buffers_raise_value_error_naming_it(tmp_path):
    """Invariant: the number of buffers is an integer >= 0; the message names it."""
    with pytest.raises(ValueError, match=r"buffers should be >= 0, but got buffers=-1"):
        SnapshotDataset(Snapshot(0, ()), buffers=-1)


def test_bad_capacity_or_shared_raise_naming_them():
    """Invariant: capacity is an integer >= 0 and shared a bool; each message names the argument."""
    with pytest.raises(ValueError, match=r"capacity should be >= 0, but got capacity=-1"):
        BatchBuffers(-1, shared=False)
    with pytest.raises(TypeError, match=r"capacity should be an integer, but got capacity=2.0"):
        BatchBuffers(2.0, shared=False)
    with pytest.raises(TypeError, match=r"shared should be a boolean value, but got shared=1"):
        BatchBuffers(2, shared=1)
