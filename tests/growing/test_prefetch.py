"""Properties of distsampling.prefetch_epochs, checked against a model of when each loader is built.

The model: epoch 0's loader is built (and ``iter()`` called on it) before anything is yielded;
the next epoch's loader right before batch ``n - lead`` of the current one is yielded, or once the
current epoch ends if it has fewer than ``lead`` batches; and the batches are each loader's own,
in order.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from hypothesis import given

from distsampling import SnapshotDataset, collate_batch, prefetch_epochs
from distsampling.growing.snapshot import Snapshot
from strategies import epoch_batch_counts, leads


class FakeLoader:
    """A sized loader of ``n`` batches named ``"e.b"`` that logs when it is built and iterated."""

    def __init__(self, epoch: int, n: int, log: list) -> None:
        self.epoch, self.n, self.log = epoch, n, log
        log.append(f"build {epoch}")

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        self.log.append(f"start {self.epoch}")
        return iter([f"{self.epoch}.{b}" for b in range(self.n)])


def model_log(counts: list[int], lead: int) -> list[str]:
    """What prefetch_epochs should do, step by step, written out independently."""
    log: list[str] = []
    if counts:
        log += ["build 0", "start 0"]
    for e, n in enumerate(counts):
        has_next = e + 1 < len(counts)
        for b in range(n):
            if has_next and n - b == lead:
                log += [f"build {e + 1}", f"start {e + 1}"]
            log.append(f"{e}.{b}")
        if has_next and n < lead:  # too short to start the next one early: start it now
            log += [f"build {e + 1}", f"start {e + 1}"]
    return log


@given(counts=epoch_batch_counts, lead=leads)
def test_loaders_are_built_lead_batches_early_and_batches_come_in_order(counts, lead):
    """Invariant: the event log (builds, iter() calls, batches) equals the model's, for any lengths."""
    log: list[str] = []
    for epoch, batches in prefetch_epochs(
        lambda e: FakeLoader(e, counts[e], log), range(len(counts)), lead=lead
    ):
        for batch in batches:
            assert batch.startswith(f"{epoch}.")
            log.append(batch)
    assert log == model_log(counts, lead)


def test_previous_iterator_is_released_after_the_next_epochs_first_batch():
    """Invariant: epoch e's iterator (its workers) lives on until epoch e+1's first batch has trained."""
    alive: list[weakref.ref] = []

    class Loader(FakeLoader):
        def __iter__(self):
            it = Tracked([f"{self.epoch}.{b}" for b in range(self.n)])
            alive.append(weakref.ref(it))
            return it

    class Tracked:
        def __init__(self, items):
            self.items = iter(items)

        def __next__(self):
            return next(self.items)

    for epoch, batches in prefetch_epochs(lambda e: Loader(e, 3, []), range(2), lead=1):
        for b, _ in enumerate(batches):
            gc.collect()
            if epoch == 1:
                # at batch 0 of epoch 1 the old iterator is still held; from batch 1 on it is gone
                assert (alive[0]() is not None) == (b == 0)


@pytest.mark.timeout(120)
def test_with_worker_processes_the_batches_equal_the_plain_loop(tmp_path):
    """Invariant: over a growing snapshot with 2 workers, prefetching changes no batch of any epoch."""
    shards = []
    for k in range(4):
        path = str(tmp_path / f"{k}.npy")
        np.save(path, np.arange(6 * 2, dtype=np.float32).reshape(6, 2) + 100 * k)
        shards.append((path, 6))

    def make_loader(epoch):
        dataset = SnapshotDataset(Snapshot(epoch, tuple(shards[: 2 + epoch])))
        return tud.DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=collate_batch)

    plain = [[b.tolist() for b in make_loader(e)] for e in range(3)]
    prefetched = [
        [b.tolist() for b in batches] for _, batches in prefetch_epochs(make_loader, range(3))
    ]
    assert prefetched == plain


def test_no_epochs_builds_no_loader():
    """Invariant: an empty range of epochs yields nothing and never calls make_loader."""
    calls = []
    assert list(prefetch_epochs(calls.append, [])) == []
    assert calls == []


@pytest.mark.parametrize(
    ("lead", "error"), [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)]
)
def test_bad_lead_raises_naming_it(lead, error):
    """Invariant: lead must be an integer >= 1; the message names the value."""
    with pytest.raises(error, match=rf"lead should be .*but got lead={lead}"):
        next(prefetch_epochs(lambda e: [], range(2), lead=lead))


def test_unsized_loader_raises_type_error_naming_the_epoch():
    """Invariant: a loader without len() (a generator) is rejected, naming the epoch and the type."""
    with pytest.raises(TypeError, match=r"but got make_loader\(0\)=.* of type generator"):
        next(prefetch_epochs(lambda e: (x for x in [torch.zeros(1)]), range(1)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"make_loader": [1, 2]},
            r"make_loader should be a function .* but got make_loader=\[1, 2\]",
        ),
        ({"epochs": 3}, r"epochs should be an iterable .* but got epochs=3 of type int"),
        ({"lead": 0}, r"lead should be >= 1, but got lead=0"),
    ],
)
def test_bad_arguments_raise_at_the_call_naming_them(kwargs, message):
    """Invariant: a bad argument is reported when prefetch_epochs is called, before any loader."""
    calls = []
    args = {"make_loader": calls.append, "epochs": range(2)} | kwargs
    with pytest.raises((TypeError, ValueError), match=message):
        prefetch_epochs(**args)  # no next(): the checks are eager
    assert calls == []
