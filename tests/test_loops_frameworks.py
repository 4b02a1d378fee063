"""The loop matrix's framework columns: every entry of ``tests/loops.py`` under a real
Lightning ``Trainer``, accelerate's ``prepare`` and a plain DDP loop, each on 2 processes.

One launch per framework runs every entry (``tests/loops_frameworks.py`` is what the ranks
run): first with the framework's defaults, then, where the ranks did not read exactly their
plans, with the settings the framework offers until one does. Each test below reads one
entry's records and judges them against the entry's plan (``loops.judge``: whole and once).
A cell is ✓ where the defaults hold; otherwise its note is written from what the runs did:
the setting that held, and what the default did instead (the first line of its error, how
much of its plan it trained on, or the hang of an uneven split without ``join()``), and
whether the package warned while the default ran (``FrameworkWarning``, recorded by the ranks:
the note quotes its first words). A default that trains on another plan without an error or a
warning is silent, and fails its test (``never_silent``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import distsampling as ds
from loops import (
    ACCELERATE,
    BY_NAME,
    ENTRIES,
    JOIN_DDP,
    LIGHTNING,
    LIGHTNING_RESUME,
    RANK_CHECK,
    TORCHRUN,
    Entry,
    judge,
)
from loops_frameworks import BATCH, DEFAULT, EPOCHS, HANG_SECONDS, UNJOINED

TESTS = str(Path(__file__).resolve().parent)
EPOCHAL = [e.name for e in ENTRIES if e.kind != "endless"]  # a framework's epochs end
# a Trainer steps in step on every rank (a collective a step): an evaluation split, whose ranks
# read unequal counts, would hang it; it runs in the plain DDP loop and accelerate's, joined
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


def by_setting(world: list[dict], name: str, part: str | None = None) -> dict[str, list[dict]]:
    """One entry's runs, setting -> every rank's record of that run (rank order)."""
    records = [rank[name] if part is None else rank[name][part] for rank in world]
    return {key: [r[key] for r in records] for key in records[0]}


def heard(runs: list[dict]) -> list[str]:
    """The package's warnings (their first lines) that a run raised, every rank's, in order."""
    return [line for run in runs for line in run.get("warnings", [])]


def cell(entry: Entry, runs: dict[str, list[dict]], pad: int | None = None) -> tuple[str, str]:
    """The status and note of a cell from its runs: ✓ where the default held; else the first
    setting that held, and what the default did instead, in the words its runs give. The
    default is loud where it raised (``setting``: the note says whether before its first
    step) or where the package warned while it ran (``warned``: the note quotes the warning's
    first words, from the run), silent where it trained on another plan without a word
    (``silent``). A run that reads its plan raised no warning (no false alarm)."""
    default = judge(entry, runs[DEFAULT], EPOCHS, pad)
    if default is None:
        assert not heard(runs[DEFAULT]), f"{entry.name}: warned, yet read its plan"
        return "passed", ""
    held = [k for k in runs if k != DEFAULT and judge(entry, runs[k], EPOCHS, pad) is None]
    tried = {k: judge(entry, runs[k], EPOCHS, pad) for k in runs}
    assert held, f"{entry.name}: no setting reads the plan: {tried}"
    assert not heard(runs[held[0]]), f"{entry.name}: warned under {held[0]}, yet read its plan"
    errors = [r for r in runs[DEFAULT] if "error" in r]
    if errors:  # the note quotes the error the real run raised, no other, and when
        assert default == f"raises {errors[0]['error']}"
        steps = max(r["steps_before"] for r in errors)
        plural = "s" * (steps != 1)
        when = "before its first step" if steps == 0 else f"after {steps} step{plural}"
        return "setting", f"{held[0]}; the default {default}, {when}"
    if warned := heard(runs[DEFAULT]):  # quoted from the run: its words up to the first colon
        return "warned", f'{held[0]}; the default {default}, warning "{warned[0].split(": ")[0]}"'
    return "silent", f"{held[0]}; the default {default}, without a word"


#: the framework columns, where a default must never be silent
FRAMEWORKS = (LIGHTNING, LIGHTNING_RESUME, ACCELERATE, TORCHRUN)


def never_silent(name: str, loop: str, status: str, note: str) -> None:
    """Invariant: a framework's default reads the plan, or is loud (an error, or the package's
    warning while it runs): none trains on another plan without a word."""
    assert loop in FRAMEWORKS
    assert status != "silent", f"{name} under {loop}: the default is silent: {note}"


# --- Lightning ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lightning_world() -> list[dict]:
    """Every rank's record of every entry, from one torchrun world of 2 ranks."""
    return ds.run_nodes("loops_frameworks:lightning_rank", 1, 2, TRAINED, timeout=600,
                        pythonpath=[TESTS])  # fmt: skip


@pytest.mark.parametrize("name", TRAINED)
def test_under_lightning_each_rank_trains_on_exactly_its_plan_by_default_or_with_a_setting(
    name, lightning_world, loop_cell
):
    """Invariant: a real 2-process ``Trainer`` (gloo, CPU) with its defaults trains each rank
    on exactly the entry's plan for that rank, epoch 0 then epoch 1, whole and once, and
    ``len(loader)`` is the steps it trained; or it does not (the cell's note says what it did
    instead, from that run), and a setting Lightning offers does, in the same launch."""
    entry = BY_NAME[name]
    runs = by_setting(lightning_world, name, "fit")
    status, note = cell(entry, runs)
    held = DEFAULT if status == "passed" else note.split(";")[0]
    for run in runs[held]:
        assert run["len"] == len(run["epochs"][0])
    loop_cell(name, LIGHTNING, status, note)
    never_silent(name, LIGHTNING, status, note)


@pytest.mark.parametrize("name", ["MixtureSampler", "OrderAhead"])
def test_a_real_trainer_with_its_defaults_trains_a_share_that_is_not_plain_on_its_plan(
    name, lightning_world
):
    """Invariant: ``MixtureSampler`` and ``OrderAhead`` over a rank's share are left alone by
    a real ``Trainer`` with its defaults (``use_distributed_sampler=True``), which calls their
    ``set_epoch``: each rank trains on exactly its plan, both epochs (not half of it, in
    Lightning's order, as when they were not torch ``DistributedSampler``s)."""
    runs = by_setting(lightning_world, name, "fit")[DEFAULT]
    assert judge(BY_NAME[name], runs, EPOCHS) is None, runs


@pytest.mark.parametrize("name", RESUMABLE)
def test_a_lightning_run_resumed_from_its_own_checkpoint_trains_on_the_rest_of_the_plan(
    name, lightning_world, loop_cell
):
    """Invariant: a run preempted after its first step saves Lightning's checkpoint (with
    ``StatefulDataLoader``'s state); a new ``Trainer`` fitted from it trains on the rest of
    epoch 0 (the first step not again) and then on epoch 1: together exactly the plan, and
    exactly what the uninterrupted run with the same setting trained on, rank by rank. By
    default, or (the note says what the default did) with the setting the fit needed."""
    entry = BY_NAME[name]
    resumes = by_setting(lightning_world, name, "resume")
    fits = by_setting(lightning_world, name, "fit")
    status, note = cell(entry, resumes)
    held = DEFAULT if status == "passed" else note.split(";")[0]
    for resumed, whole in zip(resumes[held], fits[held]):
        assert len(resumed["before"]) == 1  # preempted after one step
        assert resumed["epochs"] == whole["epochs"]
    loop_cell(name, LIGHTNING_RESUME, status, note)
    never_silent(name, LIGHTNING_RESUME, status, note)


# --- accelerate ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def accelerate_world() -> list[dict]:
    return ds.run_world("loops_frameworks:accelerate_rank", 2, EPOCHAL, timeout=300,
                        pythonpath=[TESTS])  # fmt: skip


def hang_note(runs: list[dict], what: str) -> str:
    """The hang an uneven split's run without ``join()`` showed: one rank through its epoch,
    another waiting in the all-reduce of a step more until the group's timeout ended it."""
    through = [r for r, run in enumerate(runs) if run["error"] is None]
    stuck = [r for r, run in enumerate(runs) if run["error"] is not None]
    assert through and stuck, runs
    assert runs[stuck[0]]["steps"] > runs[through[0]]["steps"], runs
    assert "Timed out" in runs[stuck[0]]["error"], runs
    return (f"; without {what}, rank {stuck[0]} waits for ever in its step "
            f"{runs[stuck[0]]['steps']}'s all-reduce (rank {through[0]} took "
            f"{runs[through[0]]['steps']}): here a {HANG_SECONDS} s timeout ended it")  # fmt: skip


@pytest.mark.parametrize("name", EPOCHAL)
def test_under_accelerate_each_rank_trains_on_exactly_its_plan_by_default_or_with_a_setting(
    name, accelerate_world, loop_cell
):
    """Invariant: on 2 real processes, a model trained through ``accelerator.prepare(model,
    optimizer, loader)`` reads exactly the plan (a sampler that yields the same epoch
    everywhere: split by accelerate, the ranks together read it whole, each index once but
    one round of padding); or it does not, and the model and optimizer prepared with the
    loader left as built train each rank on exactly its plan (an uneven split under
    torch's ``Join``, without which a rank hangs: shown in the same launch)."""
    entry, runs = BY_NAME[name], by_setting(accelerate_world, name)
    hang = runs.pop(UNJOINED, None)
    status, note = cell(entry, runs, pad=2 * BATCH)
    if not entry.even:
        note += hang_note(hang, "Join([model])")
    loop_cell(name, ACCELERATE, status, note or "accelerator.prepare(model, optimizer, loader)")
    never_silent(name, ACCELERATE, status, note)


# --- a plain DDP loop under torchrun -------------------------------------------------------------


@pytest.fixture(scope="module")
def ddp_world() -> list[dict]:
    return ds.run_nodes("loops_frameworks:ddp_rank", 1, 2, DDP, timeout=300,
                        pythonpath=[TESTS])  # fmt: skip


@pytest.mark.parametrize("name", DDP)
def test_under_torchrun_ddp_every_rank_takes_as_many_steps_and_reads_its_plan(
    name, ddp_world, loop_cell
):
    """Invariant: two torchrun ranks train a ``DistributedDataParallel`` model through the
    entry's loader for two epochs: each reads exactly its plan, whole and once, and every rank
    takes as many steps; an uneven split's ranks take unequal steps, which DDP's ``join()``
    holds, and without which one rank hangs in an all-reduce (shown in the same launch)."""
    entry = BY_NAME[name]
    runs = by_setting(ddp_world, name)
    assert not heard([r for rs in runs.values() for r in rs if "warnings" in r])  # no false alarm
    if entry.even:
        assert judge(entry, runs[DEFAULT], EPOCHS) is None, runs
        assert len({tuple(run["steps"]) for run in runs[DEFAULT]}) == 1
        loop_cell(name, TORCHRUN, "passed")
        return
    assert judge(entry, runs[JOIN_DDP], EPOCHS) is None, runs
    assert len({tuple(run["steps"]) for run in runs[JOIN_DDP]}) == 2  # unequal: join() needed
    note = JOIN_DDP + hang_note(runs[UNJOINED], "join()")
    loop_cell(name, TORCHRUN, "setting", note)


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
