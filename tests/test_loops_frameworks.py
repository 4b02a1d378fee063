"""The loop matrix's framework columns: every entry of ``tests/loops.py`` under a real
Lightning ``Trainer``, accelerate's ``prepare`` and a plain DDP loop, each on 2 processes.

One launch per framework runs every entry (``tests/loops_frameworks.py`` is what the ranks
run); each test below reads one entry's record and compares it with the entry's plan on that
rank. Where an entry needs a setting, the test checks that the setting gives the plan and that
the default does not (so the page's advice is needed, not folklore).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import distsampling as ds
from loops import (
    ACCELERATE,
    BATCH,
    BY_NAME,
    ENDLESS_STEPS,
    ENTRIES,
    LIGHTNING,
    LIGHTNING_RESUME,
    RANK_CHECK,
    TORCHRUN,
    Entry,
)
from loops_frameworks import EPOCHS, hints, lightning_default, resumable_split

TESTS = str(Path(__file__).resolve().parent)
EPOCHAL = [e.name for e in ENTRIES if e.kind != "endless"]  # a framework's epochs end
# a Trainer steps in step on every rank (a collective a step): an evaluation split, whose ranks
# read unequal counts, would hang it; it runs in the plain DDP loop, under DDP's join()
TRAINED = [name for name in EPOCHAL if BY_NAME[name].even]
RESUMABLE = [name for name in TRAINED if BY_NAME[name].resumable]
DDP = [e.name for e in ENTRIES if e.kind != "global"]  # the same epoch on every rank: no DDP
# what has an epoch to set (an endless stream has none; maskrcnn's iterations set their own)
CHECKED = [e.name for e in ENTRIES if e.kind != "endless" and e.build(1, 0).epoch_takers != []]

# one launch per framework, each a minute or two on a busy 2-core machine
pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.xdist_group("loops-frameworks"),
    pytest.mark.timeout(900),
]


def expected(entry: Entry, rank: int, epoch: int) -> list:
    """What ``rank`` of 2 reads in ``epoch``: the entry's plan, or for a sampler that yields
    the same epoch on every rank, its share as a torch split of that epoch gives it."""
    if entry.kind == "global":
        subject = entry.build(2, rank)
        subject.set_epoch(epoch)
        return list(ds.DistributedSamplerWrapper(subject.obj, 2, rank, shuffle=False))
    plan = entry.plan(2, rank, epoch, **hints(entry))
    return plan[:ENDLESS_STEPS] if entry.kind == "endless" else plan


def as_read(entry: Entry, batches: list[list[int]]) -> list:
    """A run's batches as the plan reads: batches for a batch sampler, indices otherwise."""
    return batches if entry.kind == "batch" else [i for b in batches for i in b]


def covers_the_epoch(entry: Entry, runs: list[dict], epoch: int) -> bool:
    """For a sampler that yields the same epoch on every rank, split by a framework: the two
    ranks' reads of ``epoch`` hold every index of that epoch, and repeat at most one round of
    batches (the padding that gives the ranks equal steps: Lightning's wrapper pads one index,
    accelerate's ``even_batches`` a last round of batches from the epoch's head)."""
    subject = entry.build(1, 0)
    subject.set_epoch(epoch)
    whole = Counter(subject.obj)
    read = Counter(i for run in runs for i in as_read(entry, run["epochs"][epoch]))
    return not whole - read and (read - whole).total() <= 2 * BATCH


def reads_plan(entry: Entry, run: dict, rank: int) -> bool:
    """Every epoch the run recorded (two; one ``validate`` for an evaluation split) read the
    rank's plan of that epoch."""
    return "error" not in run and all(
        as_read(entry, read)[: len(expected(entry, rank, e))] == expected(entry, rank, e)
        for e, read in enumerate(run["epochs"])
    )


def default_note(entry: Entry, runs: list[dict]) -> str:
    """What the default did instead: the error it raised, or that it read another plan."""
    errors = [r["error"] for r in runs if "error" in r]
    return f"; the default raises {errors[0]}" if errors else "; the default reads another plan"


# --- Lightning ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lightning_world() -> list[dict]:
    """Every rank's record of every entry, from one torchrun world of 2 ranks."""
    return ds.run_nodes("loops_frameworks:lightning_rank", 1, 2, TRAINED, timeout=600,
                        pythonpath=[TESTS])  # fmt: skip


@pytest.mark.parametrize("name", TRAINED)
def test_under_lightning_each_rank_trains_on_exactly_its_plan_every_epoch(
    name, lightning_world, loop_cell
):
    """Invariant: a real 2-process ``Trainer`` (gloo, CPU) trains each rank on exactly the
    entry's plan for that rank, epoch 0 then epoch 1 (``set_epoch`` reaches what needs it), and
    ``len(loader)`` is the steps it trained; by default, or with the setting the entry names,
    in which case the default does not (it raises, or reads another plan: shown with the
    functions a Trainer calls, in this process)."""
    entry = BY_NAME[name]
    setting = entry.settings.get(LIGHTNING, "")
    runs = [rank[name]["setting" if setting else "default"] for rank in lightning_world]
    for rank, run in enumerate(runs):
        if entry.kind == "global":  # Lightning's own wrapper splits it: a share each
            assert all(covers_the_epoch(entry, runs, e) for e in range(EPOCHS)), run
        else:
            assert reads_plan(entry, run, rank), run
        assert run["len"] == len(run["epochs"][0])
    if not setting:
        loop_cell(name, LIGHTNING, "passed")
        return
    defaults = [lightning_default(entry, rank) for rank in range(2)]  # Lightning's own code
    assert not all(reads_plan(entry, run, r) for r, run in enumerate(defaults))
    loop_cell(name, LIGHTNING, "setting", setting + default_note(entry, defaults))


@pytest.mark.parametrize("name", RESUMABLE)
def test_a_lightning_run_resumed_from_its_own_checkpoint_trains_on_the_rest_of_the_plan(
    name, lightning_world, loop_cell
):
    """Invariant: a run preempted after its first step saves Lightning's checkpoint (with
    ``StatefulDataLoader``'s state); a new ``Trainer`` fitted from it trains on the rest of
    epoch 0 (the first step not again) and then on epoch 1, each rank on its own plan."""
    entry = BY_NAME[name]
    for rank, record in enumerate(lightning_world):
        before, after = record[name]["resume"]["before"], record[name]["resume"]["after"]
        plans = [expected(entry, rank, e) for e in range(EPOCHS)]
        if entry.kind == "global":  # what our resumable wrapper gives this rank
            plans = []
            for epoch in range(EPOCHS):
                subject = resumable_split(entry.build(2, rank), rank)
                subject.set_epoch(epoch)
                plans.append(list(subject.obj))
        assert len(before[0]) == 1
        assert as_read(entry, before[0] + after[0]) == plans[0]
        assert as_read(entry, after[1]) == plans[1]
    setting = entry.settings.get(LIGHTNING_RESUME, entry.settings.get(LIGHTNING, ""))
    loop_cell(name, LIGHTNING_RESUME, "setting" if setting else "passed", setting)


# --- accelerate ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def accelerate_world() -> list[dict]:
    return ds.run_world("loops_frameworks:accelerate_rank", 2, EPOCHAL, timeout=300,
                        pythonpath=[TESTS])  # fmt: skip


@pytest.mark.parametrize("name", EPOCHAL)
def test_under_accelerate_each_rank_reads_exactly_its_share(name, accelerate_world, loop_cell):
    """Invariant: on 2 real processes, a sampler that yields the same epoch everywhere is split
    by ``accelerator.prepare(loader)`` into disjoint shares that cover it; every other entry,
    already one rank's share, reads its plan on each rank with the loader left unprepared (the
    model and optimizer prepared alone), while ``prepare(loader)`` splits it a second time."""
    entry = BY_NAME[name]
    prepared = [rank[name]["prepared"] for rank in accelerate_world]
    unprepared = [rank[name]["unprepared"] for rank in accelerate_world]
    if entry.kind == "global":
        assert all(covers_the_epoch(entry, prepared, e) for e in range(EPOCHS))
        assert len(prepared[0]["epochs"][0]) == len(prepared[1]["epochs"][0])  # even steps
        loop_cell(name, ACCELERATE, "passed", "accelerator.prepare(loader)")
        return
    for rank, run in enumerate(unprepared):
        assert reads_plan(entry, run, rank), run
    assert not all(reads_plan(entry, run, r) for r, run in enumerate(prepared))
    setting = entry.settings[ACCELERATE]
    loop_cell(name, ACCELERATE, "setting", setting + "; prepare(loader) splits the share again")


# --- a plain DDP loop under torchrun -------------------------------------------------------------


@pytest.fixture(scope="module")
def ddp_world() -> list[dict]:
    names = [e.name for e in ENTRIES]
    return ds.run_nodes("loops_frameworks:ddp_rank", 1, 2, names, timeout=300,
                        pythonpath=[TESTS])  # fmt: skip


@pytest.mark.parametrize("name", DDP)
def test_under_torchrun_ddp_every_rank_takes_as_many_steps_and_reads_its_plan(
    name, ddp_world, loop_cell
):
    """Invariant: two torchrun ranks train a ``DistributedDataParallel`` model through the
    entry's loader for two epochs: every rank takes as many steps in each epoch (or DDP's
    all-reduce would hang: the launch's timeout would end it) and reads its plan."""
    entry = BY_NAME[name]
    steps = ddp_world[0][name]["steps"]
    for rank, record in enumerate(ddp_world):
        assert reads_plan(entry, record[name], rank)
    if entry.even:
        assert len({tuple(s) for s in steps}) == 1
        loop_cell(name, TORCHRUN, "passed")
    else:  # evaluation's split: one step fewer on some ranks, so the training loop joins
        assert len({tuple(s) for s in steps}) == 2
        loop_cell(
            name,
            TORCHRUN,
            "setting",
            "with model.join(): an unpadded split's ranks take unequal steps",
        )


# --- the rank check -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rank_check_world() -> list[dict]:
    return ds.run_world("loops_frameworks:rank_check_rank", 2, CHECKED, timeout=300,
                        pythonpath=[TESTS])  # fmt: skip


@pytest.mark.parametrize("name", CHECKED)
def test_the_rank_check_names_an_epoch_set_otherwise_on_one_rank_and_passes_a_right_one(
    name, rank_check_world, loop_cell
):
    """Invariant: on 2 real processes, ``assert_rank_consistent`` on what the loader takes
    raises on every rank, naming each rank's epoch, when rank 1 set another epoch than rank 0;
    with one epoch everywhere it raises on none (no false alarm: an uneven split, a wrapper
    that hands out its inner share, a batch plan, a dataset that splits itself)."""
    for record in rank_check_world:
        differs, agrees = record[name]["differs"], record[name]["agrees"]
        assert differs is not None and "epoch: ranks [0] have 0; ranks [1] have 1" in differs
        assert "set_epoch(epoch) was not called on every rank" in differs
        assert agrees is None, agrees
    loop_cell(name, RANK_CHECK, "passed", "assert_rank_consistent(sampler) raises on every rank")
