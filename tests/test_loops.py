"""The loop matrix: every sampler and dataset of ``tests/loops.py`` inside every loop users run.

Each cell builds the entry small (2 ranks, rank 1: the one that reads padding), runs it in a
real loop, and compares what the loop read with the entry's plan, what the object yields alone
(``Entry.plan``), whole: every item once, nothing beyond. A cell passes as the user writes the
loop (no hint passed to the entry), or is a refusal the entry declares (the loop raises an
error that says what to do), or a limit it declares (the test shows the loop as written reads
something else; the page names what to do instead). Every cell records its outcome
(``loop_cell``); ``make test`` writes one run's cells, whole, to ``docs/generated/loops.json``,
from which ``docs/loops.md`` is rendered.
"""

from __future__ import annotations

import copy
import multiprocessing
import re
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
import torch
from torch.utils.data import BatchSampler as TorchBatchSampler
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

import distsampling as ds
from distsampling.guards import FrameworkWarning
from loops import (
    BATCH,
    BY_NAME,
    ENDLESS_STEPS,
    ENTRIES,
    NOT_ENTRIES,
    Entry,
    N,
    guard_for,
    is_sampler_or_dataset,
)
from loops_status import expect

WORLD, RANK = 2, 1  # the single-process loops run rank 1 of 2


# --- reading a loader ----------------------------------------------------------------------------


def as_list(batch: object) -> list[int]:
    """A batch as the loader gives it (a tensor, or one int with ``batch_size=None``)."""
    if isinstance(batch, torch.Tensor):
        return batch.reshape(-1).tolist()
    return [int(batch)]


def take(entry: Entry, it, limit: int = ENDLESS_STEPS) -> list[list[int]]:
    """The batches an iterator yields: the whole epoch, or an endless stream's head (its first
    ``limit`` samples: the rest of a head, after a resume)."""
    out, got = [], 0
    if entry.kind == "endless" and limit <= 0:
        return out
    for batch in it:
        out.append(as_list(batch))
        got += len(out[-1])
        if entry.kind == "endless" and got >= limit:
            break
    return out


def loader(entry: Entry, subject, cls=DataLoader, *, batch: int | None = BATCH, **kwargs):
    """``cls(dataset, ...)`` as a user hands the entry over: ``batch_sampler=``, ``sampler=``
    with a batch size (or ``batch_size=None``), or the iterable dataset itself."""
    how = {k: subject.obj if v is None else v for k, v in subject.how.items()}
    if "batch_sampler" not in how:
        how["batch_size"] = batch
    return cls(subject.dataset, **how, **kwargs)


def flat(batches: list[list[int]]) -> list[int]:
    return [i for b in batches for i in b]


def check(entry: Entry, got: list[list[int]], epoch: int, *, ordered: bool = True):
    """What a loop read in ``epoch`` is the entry's plan: the same batches for a batch sampler,
    the same indices in order otherwise (in any order across an iterable dataset's workers).
    Where it is not, the error says how much of the plan the loop read, in words."""
    plan = entry.plan(WORLD, RANK, epoch)  # an endless stream's: its head, the loop's length
    if entry.kind == "batch":
        read = got
    elif ordered:
        read = flat(got)
    else:
        read, plan = sorted(flat(got)), sorted(plan)
    unit = "batches" if entry.kind == "batch" else "samples"
    assert read == plan, differs(read, plan, epoch, unit)


def differs(read: list, plan: list, epoch: int, unit: str) -> str:
    """How a read differs from its plan: ``epoch 0 trained on 5 of the 7 samples of its plan,
    and 2 others`` (or ``..., in another order``)."""
    key = lambda items: Counter(tuple(i) if isinstance(i, list) else i for i in items)  # noqa: E731
    kept = sum((key(read) & key(plan)).values())
    said = f"epoch {epoch} trained on {kept} of the {len(plan)} {unit} of its plan"
    if len(read) > kept:
        return f"{said}, and {len(read) - kept} other{'s' * (len(read) - kept > 1)}"
    return f"{said}, in another order" if kept == len(plan) else said


def test_a_read_that_is_not_its_plan_says_how_much_of_the_plan_it_trained_on():
    """Invariant: the words a ⚙ note quotes count what of the plan was read (as a multiset),
    what else, and an order that differs alone."""
    assert differs([1, 2, 9], [1, 2, 3], 0, "samples") == (
        "epoch 0 trained on 2 of the 3 samples of its plan, and 1 other"
    )
    assert differs([1, 1, 8, 9], [1, 2], 0, "samples").endswith(
        "1 of the 2 samples of its plan, and 3 others"
    )
    assert differs([2, 1, 3], [1, 2, 3], 1, "samples") == (
        "epoch 1 trained on 3 of the 3 samples of its plan, in another order"
    )
    assert differs([[1, 2]], [[1, 2], [3, 4]], 2, "batches") == (
        "epoch 2 trained on 1 of the 2 batches of its plan"
    )


def test_an_endless_stream_read_short_of_the_loops_length_is_not_its_plan():
    """Invariant: an endless row's plan is as long as the loop reads (``ENDLESS_STEPS``): a
    read of nothing, or of 2 of its 8 samples, fails the check, naming what it read."""
    for name in (e.name for e in ENTRIES if e.kind == "endless"):
        entry = BY_NAME[name]
        head = entry.plan(WORLD, RANK, 0)
        assert len(head) == ENDLESS_STEPS
        with pytest.raises(AssertionError, match=f"trained on 0 of the {ENDLESS_STEPS} samples"):
            check(entry, [], 0)
        with pytest.raises(AssertionError, match=f"trained on 2 of the {ENDLESS_STEPS} samples"):
            check(entry, [head[:2]], 0)
        check(entry, [head[:2], head[2:]], 0)  # the whole head: its plan


def check_len(entry: Entry, dl, got: list[list[int]]) -> None:
    """``len(loader)`` is the batches the loop got (an endless stream's len is its dataset's)."""
    if entry.kind != "endless":
        assert len(dl) == len(got)


@contextmanager
def framework_warnings() -> Iterator[list[str]]:
    """The first line of every ``FrameworkWarning`` raised inside, in this process or in the
    DataLoader workers it forks (they inherit the hook, and send each line back on a queue);
    every other warning is filtered as it was (the package's own: an error, outside)."""
    queue = multiprocessing.SimpleQueue()
    lines: list[str] = []
    with warnings.catch_warnings():  # restores the filters and showwarning after
        warnings.simplefilter("always", FrameworkWarning)
        shown = warnings.showwarning

        def show(message, category, *args, **kwargs):
            if issubclass(category, FrameworkWarning):
                queue.put(str(message).splitlines()[0])
            else:
                shown(message, category, *args, **kwargs)

        warnings.showwarning = show
        yield lines
    while not queue.empty():
        lines.append(queue.get())


# --- the loops -----------------------------------------------------------------------------------


# --8<-- [start:loop_batches]
def loop_batches(entry: Entry, workers: int, persistent: bool = False) -> None:
    """``DataLoader`` with a batch size (or the batch sampler), epochs 0 and 1, ``set_epoch``
    before each ``iter()``: each epoch is the plan, and ``len(loader)`` its batches."""
    subject = entry.build(WORLD, RANK)
    dl = loader(entry, subject, num_workers=workers, persistent_workers=persistent)
    for epoch in (0, 1):
        subject.set_epoch(epoch)
        got = take(entry, dl)
        check(entry, got, epoch, ordered=not (entry.kind == "iterable" and workers > 1))
        check_len(entry, dl, got)


# --8<-- [end:loop_batches]


# --8<-- [start:loop_unbatched]
def loop_unbatched(entry: Entry) -> None:
    """``DataLoader(batch_size=None)``, 2 workers: one sample at a time, the plan in order."""
    subject = entry.build(WORLD, RANK)
    dl = loader(entry, subject, batch=None, num_workers=2)
    for epoch in (0, 1):
        subject.set_epoch(epoch)
        check(entry, take(entry, dl), epoch, ordered=entry.kind != "iterable")


# --8<-- [end:loop_unbatched]


# --8<-- [start:loop_batch_sampler]
def loop_batch_sampler(entry: Entry) -> None:
    """torch's ``BatchSampler`` around the sampler, as ``batch_sampler=``: the plan, batched."""
    subject = entry.build(WORLD, RANK)
    sampler = subject.how["sampler"] or subject.obj
    rest = {k: v for k, v in subject.how.items() if k != "sampler"}  # e.g. its collate_fn
    dl = DataLoader(subject.dataset, batch_sampler=TorchBatchSampler(sampler, BATCH, False), **rest)
    for epoch in (0, 1):
        subject.set_epoch(epoch)
        got = take(entry, dl)
        check(entry, got, epoch)
        check_len(entry, dl, got)


# --8<-- [end:loop_batch_sampler]


# --8<-- [start:loop_peek]
def loop_peek(entry: Entry) -> None:
    """A peek at one batch (``next(iter(loader))``), then the epoch's loop: read whole."""
    subject = entry.build(WORLD, RANK)
    dl = loader(entry, subject, num_workers=2)
    subject.set_epoch(0)
    next(iter(dl))
    check(entry, take(entry, dl), 0, ordered=entry.kind != "iterable")


# --8<-- [end:loop_peek]


# --8<-- [start:loop_iter_twice]
def loop_iter_twice(entry: Entry) -> None:
    """Two ``iter()`` of one epoch, one after the other: each reads the whole epoch."""
    subject = entry.build(WORLD, RANK)
    dl = loader(entry, subject, num_workers=2)
    subject.set_epoch(0)
    for _ in range(2):
        check(entry, take(entry, dl), 0, ordered=entry.kind != "iterable")


# --8<-- [end:loop_iter_twice]


# --8<-- [start:loop_break]
def loop_break(entry: Entry) -> None:
    """``break`` after 2 batches, then ``set_epoch(1)``: the next epoch is read whole."""
    subject = entry.build(WORLD, RANK)
    dl = loader(entry, subject, num_workers=2)
    subject.set_epoch(0)
    for k, _ in enumerate(dl):
        if k == 1:
            break
    subject.set_epoch(1)
    check(entry, take(entry, dl), 1, ordered=entry.kind != "iterable")


# --8<-- [end:loop_break]


# --8<-- [start:loop_late_set_epoch]
def loop_late_set_epoch(entry: Entry, workers: int) -> None:
    """``set_epoch(1)`` after the first batch of epoch 0 (a loop that calls it late): the
    iterator reads the epoch it started with, whole and once; the next ``iter()`` is epoch 1."""
    subject = entry.build(WORLD, RANK)
    dl = loader(entry, subject, num_workers=workers)
    subject.set_epoch(0)
    it = iter(dl)
    first = [as_list(next(it))]
    subject.set_epoch(1)
    ordered = not (entry.kind == "iterable" and workers > 1)
    check(entry, first + take(entry, it), 0, ordered=ordered)
    check(entry, take(entry, dl), 1, ordered=ordered)


# --8<-- [end:loop_late_set_epoch]


# --8<-- [start:loop_growing]
def loop_growing(entry: Entry) -> None:
    """A cache that grows while it trains (``ShardCache``): epoch ``e`` reads the snapshot
    ``cache.snapshot(e)`` through 2 workers while a shard lands after its first batch, and the
    loop calls ``set_epoch(e + 1)`` there too (late): the epoch reads its own snapshot's plan,
    whole and once; the next epoch's snapshot holds the new shard, and that epoch reads its plan."""
    with tempfile.TemporaryDirectory() as root:
        cache, rows = ds.ShardCache(root, capacity_bytes=1 << 20), 0

        def land(n: int) -> None:  # a shard of n rows; row i of the cache holds i
            nonlocal rows
            cache.add(np.arange(rows, rows + n, dtype=np.float32).reshape(n, 1))
            rows += n

        for n in (4, 6, 3):
            land(n)
        for epoch in (0, 1):
            snapshot = cache.snapshot(epoch)  # epoch 1's holds the shard epoch 0 saw land
            assert len(snapshot) == rows
            subject = entry.build(WORLD, RANK, snapshot=snapshot)
            dl = loader(entry, subject, num_workers=2)
            subject.set_epoch(epoch)
            it = iter(dl)
            first = [as_list(next(it))]
            land(7)  # mid-epoch
            subject.set_epoch(epoch + 1)  # late: the next epoch's
            got = first + take(entry, it)
            assert flat(got) == entry.plan(WORLD, RANK, epoch, snapshot=snapshot)
            assert len(dl) == len(got) and cache.snapshot(epoch) == snapshot  # frozen
            cache.end_epoch(epoch)


# --8<-- [end:loop_growing]


def stops(lo: int, hi: int) -> list[int]:
    """The steps in ``[lo, hi)`` where a resume loop stops: all of them in an epoch of up to 10
    steps; in a longer one the first six (2 workers keep up to 4 batches in flight: every place
    their prefetch can end), the middle one and the last three."""
    if hi - lo <= 10:
        return list(range(lo, hi))
    return sorted({*range(lo, lo + 6), (lo + hi) // 2, *range(hi - 3, hi)})


def _stateful(entry: Entry, workers: int, subject=None):
    subject = subject or entry.build(WORLD, RANK)
    return subject, loader(entry, subject, StatefulDataLoader, num_workers=workers)


# --8<-- [start:loop_stateful_resume]
def loop_stateful_resume(entry: Entry, workers: int) -> None:
    """torchdata's ``StatefulDataLoader``: a checkpoint, ``state_dict()`` saved after step ``k``
    of epoch 0 while the run goes on (at each of ``stops``), loaded into a new loader (and a new
    object) reads the rest of the epoch; ``len(loader)`` stays the whole epoch's; after a resume
    at the first step, the second and the end, the next epoch is epoch 1's plan."""
    ordered = not (entry.kind == "iterable" and workers > 1)
    subject, dl = _stateful(entry, workers)
    subject.set_epoch(0)
    whole, saved, it = [], [], iter(dl)
    while True:  # the uninterrupted epoch, a checkpoint saved after every step
        saved.append(copy.deepcopy(dl.state_dict()))  # as torch.save would keep it
        batch = next(it, None)
        if batch is None or (entry.kind == "endless" and len(flat(whole)) >= ENDLESS_STEPS):
            break
        whole.append(as_list(batch))
    del it
    for k in stops(0, len(whole) + 1):
        subject, dl = _stateful(entry, workers)
        dl.load_state_dict(saved[k])
        subject.set_epoch(0)  # at the top of the resumed epoch, as the loop does: kept
        rest = take(entry, dl, ENDLESS_STEPS - len(flat(whole[:k])))  # a stream: to its head's end
        check(entry, whole[:k] + rest, 0, ordered=ordered)
        if entry.kind != "endless":  # a stream has no epochs: every iter() starts where it loaded
            assert k + len(rest) == len(dl) == len(whole)
            if k in (0, 1, len(whole)):  # a loaded state ends with its epoch: proven at each end
                subject.set_epoch(1)
                check(entry, take(entry, dl), 1, ordered=ordered)


# --8<-- [end:loop_stateful_resume]


# --8<-- [start:loop_elastic]
def loop_elastic(entry: Entry, worlds: tuple[int, int]) -> None:
    """``StatefulDataLoader`` on ``W1`` ranks, each stopped after ``k`` steps; rank 0's state
    loaded on ``W2`` ranks, which read the rest: every sample of the epoch read, and only the
    padding twice; every new rank reads as many batches. A mixture of streams plans by steps
    (a pass in flight goes on into the next epoch): each rank reads, step by step, what the
    dataset says it reads there (``at_step``), and passes overlap only at their ends."""
    w1, w2 = worlds
    for k in (1, 2):
        read = []
        ranks = [entry.build(w1, r) for r in range(w1)]
        for r, subject in enumerate(ranks):
            subject.set_epoch(0)
            dl = loader(entry, subject, StatefulDataLoader)
            it = iter(dl)
            steps = [as_list(next(it)) for _ in range(k)]
            if entry.at_step is not None:
                assert steps == [entry.at_step(subject.obj, s, r) for s in range(k)]
            read += flat(steps)
            if r == 0:
                state = dl.state_dict()
        counts = []
        for r in range(w2):
            subject = entry.build(w2, r)
            if entry.kind == "iterable":  # every worker's state of the saved rank, at once
                subject.obj.set_epoch(0)
                subject.obj.load_state_dict(ds.loader_dataset_states(state))
                dl = loader(entry, subject, StatefulDataLoader)
            else:
                dl = loader(entry, subject, StatefulDataLoader)
                dl.load_state_dict(state)
                subject.set_epoch(0)
            got = take(entry, dl)
            if entry.at_step is not None:  # steps k, k + 1, ... as the new dataset plans them
                assert got == [entry.at_step(subject.obj, s, r) for s in range(k, k + len(got))]
            counts.append(len(got))
            read += flat(got)
            # len() is the whole epoch's: what the saved rank read, then what this one yields
            unit = 1 if entry.kind == "batch" else BATCH
            assert len(subject.obj) == k * unit + (len(got) if unit == 1 else len(flat(got)))
        assert max(counts) - min(counts) <= (0 if entry.even else 1)
        if entry.stream is not None:  # positions of one stream, each read once
            assert Counter(read) == Counter(entry.stream(read))
            continue
        if entry.at_step is not None:  # as planned; a sample twice only where passes meet: a few
            assert len(read) - len(set(read)) < (w1 + w2) * BATCH
            continue
        samples = set(entry.plan(1, 0, 0)) if entry.kind != "batch" else set(range(N))
        if entry.kind == "batch":
            samples = {i for b in entry.plan(1, 0, 0) for i in b}
        missed = len(samples - set(read))
        assert not missed, f"epoch 0 read {len(samples) - missed} of its {len(samples)} samples"
        repeats = sum(Counter(read).values()) - len(samples)
        assert repeats < (w1 + w2) * (BATCH if entry.kind != "batch" else N)


# --8<-- [end:loop_elastic]


# --8<-- [start:loop_plain_resume]
def loop_plain_resume(entry: Entry) -> None:
    """A plain ``DataLoader`` with 2 workers (they prefetch): a checkpoint saved after ``k``
    batches while the run goes on, ``state_dict(consumed=...)`` (the items of the latest
    ``iter()`` the loop used: indices for a sampler, batches for a batch sampler, or the samples
    of those batches where the entry counts samples), loaded into a new object reads the rest."""
    subject = entry.build(WORLD, RANK)
    dl = loader(entry, subject, num_workers=2)
    subject.set_epoch(0)
    whole, saved = [], {}
    for batch in dl:  # the uninterrupted epoch, a checkpoint saved after every batch
        whole.append(as_list(batch))
        by_items = entry.kind == "batch" and entry.consumed_unit == "items"
        consumed = len(whole) if by_items else len(flat(whole))
        saved[len(whole)] = subject.obj.state_dict(consumed=consumed)
        if entry.kind == "endless" and consumed >= ENDLESS_STEPS:  # a stream's head is enough
            break
    for k in stops(1, len(whole)):
        subject = entry.build(WORLD, RANK)
        subject.obj.load_state_dict(saved[k])
        subject.set_epoch(0)
        head = ENDLESS_STEPS - len(flat(whole[:k]))  # a stream: to its head's end
        rest = take(entry, loader(entry, subject, num_workers=2), head)
        check(entry, whole[:k] + rest, 0)


# --8<-- [end:loop_plain_resume]


# --- the matrix ----------------------------------------------------------------------------------

ANY = {"share", "global", "batch", "iterable", "endless"}
LOOPS = {  # loop name -> (which kinds it applies to, what else the entry must promise, the run)
    "DataLoader, batch_size": (ANY, None, lambda e: loop_batches(e, 0)),
    "DataLoader, 2 workers, batch_size": (ANY, None, lambda e: loop_batches(e, 2)),
    "persistent workers": (ANY, None, lambda e: loop_batches(e, 2, persistent=True)),
    "DataLoader, batch_size=None": (ANY - {"batch"}, None, loop_unbatched),
    "torch BatchSampler around it": ({"share", "global", "endless"}, None, loop_batch_sampler),
    "a peek, then the loop": (ANY, None, loop_peek),
    "iter() twice": (ANY, None, loop_iter_twice),
    "break, then the next epoch": (ANY - {"endless"}, None, loop_break),
    "set_epoch after the first batch": (ANY - {"endless"}, None, lambda e: loop_late_set_epoch(e, 0)),
    "set_epoch after the first batch, 2 workers": (ANY - {"endless"}, None, lambda e: loop_late_set_epoch(e, 2)),
    "StatefulDataLoader resume": (ANY, "resumable", lambda e: loop_stateful_resume(e, 0)),
    "StatefulDataLoader resume, 2 workers": (ANY, "resumable", lambda e: loop_stateful_resume(e, 2)),
    "elastic resume, 2 -> 3 ranks": (ANY, "elastic", lambda e: loop_elastic(e, (2, 3))),
    "elastic resume, 3 -> 2 ranks": (ANY, "elastic", lambda e: loop_elastic(e, (3, 2))),
    "plain DataLoader resume, 2 workers": (ANY, "resumable", loop_plain_resume),
    "growing cache: a shard lands mid-epoch, set_epoch late": (ANY, "grows", loop_growing),
}  # fmt: skip


def applies(entry: Entry, loop: str) -> bool:
    kinds, promise, _ = LOOPS[loop]
    return entry.kind in kinds and (promise is None or getattr(entry, promise))


CELLS = [(e.name, loop) for e in ENTRIES for loop in LOOPS if applies(e, loop)]


@pytest.mark.parametrize(("name", "loop"), CELLS)
def test_every_sampler_reads_its_plan_inside_every_loop(name, loop, loop_cell):
    """Invariant: inside the loop, the entry yields what it yields alone (its plan) for the
    epoch the loop asked for, whole and once, with no ``FrameworkWarning`` but the one it
    declares for that loop (an epoch read again with no set_epoch, said so); or it refuses
    the loop with the error it declares, which says what to do instead. Its status is the
    committed one."""
    entry = BY_NAME[name]
    run, status, note = LOOPS[loop][2], "passed", ""
    if loop in entry.refusals:
        error, message = entry.refusals[loop]
        with pytest.raises(error, match=message) as caught:
            run(entry)
        status, note = "refused", " ".join(str(caught.value).split())  # its words, whole
    elif loop in entry.warns:  # it reads its plan, and says it reads an epoch again
        with framework_warnings() as heard:
            run(entry)
        assert heard and all(re.search(entry.warns[loop], line) for line in heard), heard
        note = f'reads its plan, warning "{heard[0]}"'
    elif entry.reference is None:
        run(entry)
    else:  # a reference row: without the guards, it may read another plan (the file says)
        try:
            run(entry)
        except AssertionError as e:
            what = str(e).splitlines()[0]
            status = "silent"
            note = f"{what}, without a word; `{entry.reference}` has {guard_for(loop)}"
    expect(name, loop, status)
    loop_cell(name, loop, status, note)


def test_every_exported_sampler_and_dataset_has_its_row_in_the_matrix():
    """Invariant: each class of ``distsampling.__all__`` that is a sampler, a dataset or the
    resume layer has an entry in ``tests/loops.py`` or says in NOT_ENTRIES where it is proven."""
    exported = {n for n in ds.__all__ if is_sampler_or_dataset(getattr(ds, n))}
    rows = {e.name for e in ENTRIES if e.reference is None}
    assert exported - rows - set(NOT_ENTRIES) == set()
    assert rows | set(NOT_ENTRIES) <= exported  # no row for a class that is gone
    assert {e.reference for e in ENTRIES if e.reference} <= rows  # each reference beside its own


# --- the loops' misuse: errors that say what to change ---------------------------------------------

RESUMABLE = [e.name for e in ENTRIES if e.resumable]


@pytest.mark.parametrize("name", RESUMABLE)
def test_consumed_past_what_the_latest_iter_handed_out_is_refused_naming_it(name):
    """Invariant: ``state_dict(consumed=...)`` takes at most what the latest ``iter()`` handed
    out, and no negative count: a larger or negative one is an error naming ``consumed``."""
    entry = BY_NAME[name]
    subject = entry.build(WORLD, RANK)
    subject.set_epoch(0)
    it = iter(subject.obj)
    handed = [next(it), next(it)]  # two items handed out
    obj = subject.obj
    # the count of what was handed out, in the entry's unit (a batch sampler counting samples)
    out = len(flat(handed)) if entry.consumed_unit == "samples" else 2
    with pytest.raises(
        ValueError, match=rf"consumed should be <= {out} .*but got consumed={out + 1}"
    ):
        obj.state_dict(consumed=out + 1)
    with pytest.raises(ValueError, match=r"consumed=-1"):
        obj.state_dict(consumed=-1)
    assert obj.state_dict(consumed=out) == obj.state_dict()  # all of it: the plain state


def test_wrapping_a_share_that_is_already_split_is_refused_naming_the_world():
    """Invariant: ``DistributedSamplerWrapper`` over a sampler that is already one rank's share
    (its ``num_replicas`` > 1) would split it again, leaving most samples unread: an error
    that names the inner world and says to pass the sampler as it is."""
    share = ds.DistributedSampler(range(N), 2, 1)
    with pytest.raises(ValueError, match=r"share of one rank of num_replicas=2.*as it is"):
        ds.DistributedSamplerWrapper(share, 2, 1)
    assert len(ds.DistributedSamplerWrapper(ds.DistributedSampler(range(N), 1, 0), 2, 1)) == 7


def test_lightnings_epoch_call_reaches_a_batch_sampler_that_draws_its_own_epoch():
    """Invariant: Lightning's ``_set_sampler_epoch`` (what a ``Trainer`` calls every epoch) looks
    at ``loader.sampler`` and ``loader.batch_sampler.sampler`` only; a batch sampler that draws
    its own epoch gets the call through its ``sampler`` handle, so epoch 1 is epoch 1's plan."""
    from lightning_fabric.utilities.data import _set_sampler_epoch

    for name in ("TokenBudgetBatchSampler", "BatchBalanceClassSampler"):
        entry = BY_NAME[name]
        subject = entry.build(WORLD, RANK)
        dl = DataLoader(subject.dataset, batch_sampler=subject.obj)
        _set_sampler_epoch(dl, 1)
        assert subject.obj.epoch == 1
        assert [as_list(b) for b in dl] == entry.plan(WORLD, RANK, 1)


# --- the page is one run's results: a changed cell, or one not run, is refused ---------------------


def test_the_page_refuses_results_with_a_cell_changed_by_hand_or_one_the_run_did_not_run(
    tmp_path, monkeypatch
):
    """Invariant: ``docs/hooks/loops.py`` renders results written whole by one run; the same
    results with one cell edited by hand (a failed cell made a pass) are refused, naming the
    change; results where a cell did not run (marked so by the run) are refused, naming it."""
    import importlib.util
    import json
    from pathlib import Path

    from loops import expected_cells, results

    spec = importlib.util.spec_from_file_location(
        "loops_hook", Path(__file__).resolve().parent.parent / "docs" / "hooks" / "loops.py"
    )
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    monkeypatch.setattr(hook, "RESULTS", tmp_path / "loops.json")
    monkeypatch.delenv("DISTSAMPLING_LOOPS_PENDING", raising=False)
    expected = expected_cells()
    recorded = {(s, loop): {"sampler": s, "loop": loop, "status": "passed", "note": "",
                            "test": "tests/test_loops.py"} for s, loop in expected}  # fmt: skip
    first = min(recorded)
    recorded[first]["status"] = "failed"

    def build(payload: dict) -> str:
        (tmp_path / "loops.json").write_text(json.dumps(payload))
        return hook.on_page_markdown(hook.MARK, None, None, None)

    payload = results(recorded, expected)
    page = build(payload)
    assert "| sampler |" in page and "0 ✗, 1 ‼, 0 ∅" in page
    edited = json.loads(json.dumps(payload))
    next(c for c in edited["cells"] if (c["sampler"], c["loop"]) == first)["status"] = "passed"
    with pytest.raises(RuntimeError, match="changed after the run that wrote it"):
        build(edited)
    del recorded[first]
    with pytest.raises(RuntimeError, match=r"hold 1 cells that the run which wrote them did not"):
        build(results(recorded, expected))
