r"""BatchBuffers: a few batch-sized buffers per process, lent for one batch and reused once free.

Without it, every batch is a fresh block: a DataLoader worker faults in (and zero-fills) its
pages, the training process maps and faults them again, and both unmap them after the step.
With it, each process keeps up to ``capacity`` buffers ("slots") mapped for its whole life; a
steady epoch allocates no new page, and a batch crosses from a worker as a few dozen bytes
(which pool, which slot, shape, dtype) instead of a file descriptor.

Ownership rule: **a slot is reused only when no tensor views its batch any more, in any
process.** Concretely, slot ``i`` is free when both hold:

- the filling process has let go of its batch tensor and every view of it (a finalizer on the
  numpy array that owns the tensor's memory flips ``held[i]``), and
- every copy of the batch that was sent (``sent[i]``, counted when it is pickled) has been
  released by the process that received it (``released[i]``, counted by the same kind of
  finalizer there). Both counters live in a small shared block; each has one writer.

So a training loop may keep a batch, a slice of it or its ``.numpy()`` as long as it likes: the
slot stays lent meanwhile. When no slot is free (a loop that keeps every batch, e.g.
``list(loader)``), the batch gets a fresh block, as without a pool: keeping batches costs
speed, never data. What the rule cannot see: a raw pointer (``data_ptr()``) kept after the
tensor is gone; and a batch that was sent but never received (a loader shut down mid-epoch)
keeps its slot lent for good (the pool shrinks, safely).

Crossing processes works with torch's default ``file_descriptor`` sharing strategy (Linux):
the first time a slot is sent, its shared storage travels as torch sends any storage (its fd);
the receiving process maps it once, keeps the map in a per-process registry and says so
(``mapped[i]``), so later batches in that slot carry no fd at all. The registry drops a pool's
maps at the first batch that arrives after the process that filled it has exited.

References:
    torch/multiprocessing/reductions.py (a storage crosses as its fd; ``shared_cache``),
    torch/utils/data/_utils/worker.py (a worker puts each batch on its result queue, pickled
    there), torch/utils/data/_utils/collate.py (default_collate's shared-memory batches).
"""

from __future__ import annotations

import errno
import math
import os
import secrets
import threading
import weakref

import numpy as np
import torch

from .._checks import check_bool, check_int

__all__ = ["BatchBuffers"]

MAPPED, SENT, RELEASED = 0, 1, 2  # the rows of the shared control block, (3, capacity) int64


def _as_bytes(storage: torch.UntypedStorage) -> np.ndarray:
    """The storage as a writable ``(nbytes,)`` uint8 array over the same memory (no copy)."""
    return torch.empty(0, dtype=torch.uint8).set_(storage).numpy()


class BatchBuffers:
    r"""Up to ``capacity`` reusable batch buffers of one process; see the module docstring.

    Args:
        capacity: the most slots this process keeps (each as large as the largest batch it
            held); ``0`` lends none (every batch is a fresh block).
        shared: slots in shared memory, for batches that a DataLoader worker sends to the
            training process; else plain memory, for batches used where they are made.

    Examples:
        >>> pool = BatchBuffers(capacity=2, shared=False)
        >>> a = pool.batch((2, 3), np.float32)  # slot 0, lent while ``a`` lives
        >>> b = pool.batch((2, 3), np.float32)  # slot 1
        >>> c = pool.batch((2, 3), np.float32)  # no slot free: a fresh block
        >>> pool.slots_lent(), pool.fresh
        (2, 1)
        >>> del a  # slot 0 comes back once nothing views it
        >>> d = pool.batch((2, 3), np.float32)
        >>> pool.slots_lent(), pool.fresh
        (2, 1)
    """

    def __init__(self, capacity: int, shared: bool) -> None:
        self.capacity = check_int("capacity", capacity, low=0)
        self.shared = check_bool("shared", shared)
        self.pid, self.token = os.getpid(), secrets.token_hex(8)  # which process, which pool
        self.fresh = 0  # batches that found no free slot
        self._arrays: list[np.ndarray] = []  # slot -> its memory, (slot bytes,) uint8
        self._storages: list[torch.UntypedStorage] = []  # slot -> its shared storage
        self._held: list[bool] = []  # slot -> a tensor of this process views its batch
        if shared:  # [MAPPED | SENT | RELEASED] x slot, shared with the receiving process
            self._ctrl_storage = torch.UntypedStorage._new_shared(max(capacity, 1) * 3 * 8)
            self._ctrl = _as_bytes(self._ctrl_storage).view(np.int64).reshape(3, -1)
            self._ctrl[:] = 0

    def slots_lent(self) -> int:
        """How many slots are lent now (held here, or sent and not yet released)."""
        return sum(not self._free(i) for i in range(len(self._arrays)))

    def _free(self, i: int) -> bool:
        sent_back = not self.shared or self._ctrl[SENT, i] == self._ctrl[RELEASED, i]
        return not self._held[i] and bool(sent_back)

    def _slot_for(self, nbytes: int) -> int | None:
        """A free slot of >= nbytes; else a new one (or a free one grown), if capacity allows."""
        free = [i for i in range(len(self._arrays)) if self._free(i)]
        for i in free:
            if len(self._arrays[i]) >= nbytes:
                return i
        if len(self._arrays) < self.capacity:  # room for one more slot
            self._arrays.append(np.empty(0, np.uint8))
            self._storages.append(torch.UntypedStorage())
            self._held.append(False)
            free.append(len(self._arrays) - 1)
        if not free:
            return None
        i = free[-1]  # a new slot, or a free one too small: (re)allocate it at this size
        if self.shared:
            self._storages[i] = _new_shared_block(nbytes)
            self._arrays[i] = _as_bytes(self._storages[i])
            self._ctrl[MAPPED, i] = 0  # the receiver must map the new storage
        else:
            self._arrays[i] = np.empty(nbytes, np.uint8)
        return i

    def batch(self, shape: tuple[int, ...], dtype: np.dtype) -> torch.Tensor:
        r"""Lend a batch tensor of ``shape`` and ``dtype``, to be filled in place.

        Args:
            shape: the batch's shape, ``(B, *sample_shape)``.
            dtype: its numpy dtype.
        """
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if not nbytes:  # nothing to hold
            return torch.from_numpy(np.empty(shape, dtype))
        i = self._slot_for(nbytes)
        if i is None:  # no slot: a fresh block, freed as usual
            self.fresh += 1
            if not self.shared:
                return torch.from_numpy(np.empty(shape, dtype))
            out = torch.empty(0, dtype=torch.from_numpy(np.empty(0, dtype)).dtype)
            return out.set_(_new_shared_block(nbytes)).view(shape)
        array = self._arrays[i][:nbytes].view(dtype).reshape(shape)  # a new array object
        self._held[i] = True
        weakref.finalize(array, self._held.__setitem__, i, False)  # when no tensor views it
        tensor = torch.from_numpy(array)  # its storage owns `array`: the finalizer waits for it
        if not self.shared:
            return tensor
        tensor = tensor.as_subclass(_LentBatch)
        tensor._lent = (self, i, shape, dtype.str)
        return tensor

    def _send(self, i: int, shape: tuple[int, ...], dtype: str) -> tuple:
        """Pickle slot ``i``'s batch: count it as sent; attach storages until it is mapped."""
        self._ctrl[SENT, i] += 1
        storages = None if self._ctrl[MAPPED, i] else (self._ctrl_storage, self._storages[i])
        return _receive, (self.token, self.pid, i, shape, dtype, storages)


def _new_shared_block(nbytes: int) -> torch.UntypedStorage:
    """A shared-memory storage of ``nbytes``; ENOSPC, saying what to do, where /dev/shm is full.

    torch reserves every page of a shared block when it makes it (``posix_fallocate`` in its
    MapAllocator), so a full ``/dev/shm`` fails here, not as a SIGBUS when a page is written.
    """
    try:
        return torch.UntypedStorage._new_shared(nbytes)  # private torch API, as default_collate's
    except RuntimeError as err:
        if "No space left on device" not in str(err):
            raise
        raise OSError(  # /dev/shm is full (a container's default is 64 MB)
            errno.ENOSPC,
            f"no space left in shared memory (/dev/shm) for a batch of {nbytes} bytes: "
            "enlarge it (docker run --shm-size=...) or lower batch_size or prefetch_factor",
        ) from err


class _LentBatch(torch.Tensor):
    """A worker's batch in a slot: pickles as (pool, slot, shape, dtype), not as its bytes."""

    __torch_function__ = torch._C._disabled_torch_function_impl  # views and results: plain

    def __reduce_ex__(self, protocol: int) -> tuple:
        pool, i, shape, dtype = self._lent
        if tuple(self.shape) != shape or self.data_ptr() != pool._arrays[i].ctypes.data:
            # changed in place (resize_, set_...): send a copy, as torch sends any tensor
            return torch.Tensor.clone, (self.as_subclass(torch.Tensor).clone(),)
        return pool._send(i, shape, dtype)


class _Received:
    """The receiving side of one pool: its control block and its slots, each mapped once."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ctrl = np.zeros((3, 0), np.int64)
        self.slots: dict[int, np.ndarray] = {}
        self.lock = threading.Lock()  # finalizers may run in the pin_memory thread

    def release(self, i: int) -> None:
        with self.lock:
            self.ctrl[RELEASED, i] += 1


_RECEIVED: dict[str, _Received] = {}  # pool token -> its maps, in this process
_LOCK = threading.Lock()
os.register_at_fork(after_in_child=_RECEIVED.clear)  # a forked child keeps no parent's maps


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _receive(token: str, pid: int, i: int, shape: tuple, dtype: str, storages) -> torch.Tensor:
    """Unpickle a lent batch in the receiving process: a tensor over slot ``i``, mapped once."""
    with _LOCK:
        # forget the pools of processes that have exited (a loader's workers end with its epoch)
        for old in [t for t, p in _RECEIVED.items() if t != token and not _alive(p.pid)]:
            del _RECEIVED[old]  # its batches still in use keep their own maps
        if token not in _RECEIVED:
            _RECEIVED[token] = _Received(pid)
        pool = _RECEIVED[token]
        if storages is not None:  # first batch in this slot (or the slot grew): map it
            ctrl, storage = storages
            pool.ctrl = _as_bytes(ctrl).view(np.int64).reshape(3, -1)
            pool.slots[i] = _as_bytes(storage)
            pool.ctrl[MAPPED, i] = 1
        if i not in pool.slots:
            raise RuntimeError(
                f"a batch of buffer slot {i} arrived in process {os.getpid()}, which never "
                "received that slot: the batches of one DataLoader worker must all go to one "
                "process"
            )
    dtype_ = np.dtype(dtype)
    array = pool.slots[i][: math.prod(shape) * dtype_.itemsize].view(dtype_).reshape(shape)
    weakref.finalize(array, pool.release, i)  # released when no tensor views this batch
    return torch.from_numpy(array)
