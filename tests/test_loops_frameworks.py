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
the note quotes its first line). A default's error must be a refusal that framework's default
may meet (``loops.FRAMEWORK_REFUSALS``, by type and words): any other fails the cell, and a
crash injected under each framework's default (``loops.PROBES``) shows it. A default that
trains on another plan without an error or a warning is silent, and fails its test
(``never_silent``) but in a reference row, whose note names the guard its exported class has.
Every cell's status is compared with the committed one (``loops.expect``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

import distsampling as ds
from loops import (
    ACCELERATE,
    BY_NAME,
    CRASH,
    ENTRIES,
    JOIN_DDP,
    LIGHTNING,
    LIGHTNING_RESUME,
    PROBES,
    RANK_CHECK,
    TORCHRUN,
    Entry,
    guard_for,
    intended_refusal,
    judge,
)
from loops_frameworks import BATCH, DEFAULT, EPOCHS, HANG_SECONDS, UNJOINED, WORKERS, WORKERS_HOOKED
from loops_status import expect

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


def refusals_only(entry: Entry, loop: str, runs: list[dict]) -> None:
    """Invariant: the default run's errors, on every rank, are refusals the loop's default may
    meet (``loops.FRAMEWORK_REFUSALS``: their type and words); any other error (a crash, a
    regression) fails the cell, whatever another setting then read."""
    for rank, run in enumerate(runs):
        error = run.get("error")
        assert error is None or intended_refusal(loop, error), (
            f"{entry.name} under {loop}: rank {rank}'s default raised {error!r}, which is not "
            "a refusal the package intends (FRAMEWORK_REFUSALS in tests/loops.py)"
        )


def cell(
    entry: Entry,
    loop: str,
    runs: dict[str, list[dict]],
    pad: int | None = None,
    twin: Sequence[dict] = (),
) -> tuple[str, str]:
    """The status and note of a cell from its runs: ✓ where the default held; else the first
    setting that held, and what the default did instead, in the words its runs give. The
    default is loud where it raised one of the refusals ``loop`` may meet (``setting``: the
    note says whether before its first step; any other error fails the cell) or where the
    package warned while it ran (``warned``: the note quotes the warning's first words, from
    the run), silent where it trained on another plan without a word (``silent``; a reference
    row's note names the guard its exported class has, from what that class's default did in
    the same launch: ``twin``, its records). A run that reads its plan raised no warning (no
    false alarm)."""
    refusals_only(entry, loop, runs[DEFAULT])
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
    if warned := heard(runs[DEFAULT]):  # quoted from the run: its first line, whole
        return "warned", f'{held[0]}; the default {default}, warning "{warned[0]}"'
    silent = f"{held[0]}; the default {default}, without a word"
    if entry.reference is not None:  # the guard that makes the exported class's cell loud
        guard = guard_for(loop, [r["error"] for r in twin if "error" in r])
        silent += f"; `{entry.reference}` has {guard}"
    return "silent", silent


#: the framework columns, where a default must never be silent
FRAMEWORKS = (LIGHTNING, LIGHTNING_RESUME, ACCELERATE, TORCHRUN)


def never_silent(name: str, loop: str, status: str, note: str) -> None:
    """Invariant: a framework's default reads the plan, or is loud (an error, or the package's
    warning while it runs): none trains on another plan without a word. A reference row (a
    reference file's class, without the package's guards) may be silent: its note names the
    guard of its exported class, and the expected statuses hold which cells are."""
    assert loop in FRAMEWORKS
    if BY_NAME[name].reference is not None:
        assert status != "silent" or "` has " in note, note
        return
    assert status != "silent", f"{name} under {loop}: the default is silent: {note}"


# --- Lightning ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lightning_world() -> list[dict]:
    """Every rank's record of every entry, from one torchrun world of 2 ranks."""
    return ds.run_nodes("loops_frameworks:lightning_rank", 1, 2, [*TRAINED, CRASH], timeout=600,
                        pythonpath=[TESTS])  # fmt: skip


def lightning_cell(entry: Entry, world: list[dict]) -> tuple[str, str]:
    """A Lightning cell's status and note from its runs; the run that held counted every
    epoch as Lightning ends it: each epoch's count is its steps, or (an entry whose epochs
    differ in length) at least its steps, so that no step was cut."""
    runs = by_setting(world, entry.name, "fit")
    twin = by_setting(world, entry.reference, "fit")[DEFAULT] if entry.reference else []
    status, note = cell(entry, LIGHTNING, runs, twin=twin)
    held = DEFAULT if status == "passed" else note.split(";")[0]
    for run in runs[held]:
        steps = [len(epoch) for epoch in run["epochs"]]
        if entry.varies:
            assert all(n >= k for n, k in zip(run["lens"], steps)), (run["lens"], steps)
        else:
            assert run["lens"] == steps, (run["lens"], steps)
    return status, note


@pytest.mark.parametrize("name", TRAINED)
def test_under_lightning_each_rank_trains_on_exactly_its_plan_by_default_or_with_a_setting(
    name, lightning_world, loop_cell
):
    """Invariant: a real 2-process ``Trainer`` (gloo, CPU) with its defaults trains each rank
    on exactly the entry's plan for that rank, epoch 0 then epoch 1, whole and once, and
    counts each epoch's batches as it trains them (``num_training_batches``, epoch by epoch:
    at least them where epochs differ in length); or it does not (the cell's note says what
    it did instead, from that run: a refusal, never another error), and a setting Lightning
    offers does, in the same launch."""
    status, note = lightning_cell(BY_NAME[name], lightning_world)
    expect(name, LIGHTNING, status)
    loop_cell(name, LIGHTNING, status, note)
    never_silent(name, LIGHTNING, status, note)


VARIES = [name for name in TRAINED if BY_NAME[name].varies]


@pytest.mark.parametrize("name", VARIES)
def test_a_trainer_that_recounts_every_epoch_counts_each_epoch_of_another_length_as_it_stands(
    name, lightning_world
):
    """Invariant: with ``Trainer(reload_dataloaders_every_n_epochs=1)`` an entry whose epochs
    differ in length trains each rank on exactly its plan, and Lightning counts each epoch
    again, before it calls the samplers' ``set_epoch``, each as the epoch it trains (a dataset
    follows the Trainer's epoch; a mixture sampler counts the Trainer's). Without it (the
    matrix's cell) every epoch is counted as the longest, and trains its own steps."""
    entry = BY_NAME[name]
    recount = [rank[name]["recount"] for rank in lightning_world]
    assert judge(entry, recount, EPOCHS) is None, recount
    for run in recount:
        steps = [len(epoch) for epoch in run["epochs"]]
        assert steps[0] != steps[1]  # the epochs differ in length
        assert run["lens"] == steps, (run["lens"], steps)
    fits = by_setting(lightning_world, name, "fit")
    held = next(k for k, runs in fits.items() if judge(entry, runs, EPOCHS) is None)
    for run in fits[held]:
        assert len(set(run["lens"])) == 1  # counted once: every epoch as the longest


@pytest.mark.parametrize("workers", [*WORKERS, WORKERS_HOOKED])
def test_under_lightning_an_iterable_dataset_read_by_workers_reads_its_plan(
    workers, lightning_world
):
    """Invariant: ``ShardedIterableDataset`` under a real ``Trainer``, read by 2 DataLoader
    workers, started each epoch or persistent (they keep the ``Trainer`` as it was when they
    started; Lightning's ``set_epoch`` on the loader's sampler reaches them), with the
    ``Trainer``'s defaults or with the user's ``set_epoch(self.current_epoch)`` in
    ``on_train_epoch_start``, trains each rank on exactly its plan (the workers' order aside),
    epoch by epoch, with no error and no warning."""
    entry = BY_NAME["ShardedIterableDataset"]
    plans = [[sorted(entry.plan(2, rank, e)) for e in range(EPOCHS)] for rank in range(2)]
    assert any(p[0] != p[1] for p in plans)  # the epochs differ: reading one again is seen
    runs = [rank[entry.name]["workers"][workers] for rank in lightning_world]
    for rank, run in enumerate(runs):
        assert "error" not in run, (rank, run["error"], run["steps_before"])
        assert not heard([run]), (rank, run["warnings"])
        read = [sorted(i for batch in run["epochs"][e] for i in batch) for e in range(EPOCHS)]
        assert read == plans[rank], rank


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
    status, note = cell(entry, LIGHTNING_RESUME, resumes)
    held = DEFAULT if status == "passed" else note.split(";")[0]
    for resumed, whole in zip(resumes[held], fits[held]):
        assert len(resumed["before"]) == 1  # preempted after one step
        assert resumed["epochs"] == whole["epochs"]
    expect(name, LIGHTNING_RESUME, status)
    loop_cell(name, LIGHTNING_RESUME, status, note)
    never_silent(name, LIGHTNING_RESUME, status, note)


# --- accelerate ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def accelerate_world() -> list[dict]:
    return ds.run_world("loops_frameworks:accelerate_rank", 2, [*EPOCHAL, CRASH], timeout=300,
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
    status, note = accelerate_cell(BY_NAME[name], accelerate_world)
    expect(name, ACCELERATE, status)
    loop_cell(name, ACCELERATE, status, note or "accelerator.prepare(model, optimizer, loader)")
    never_silent(name, ACCELERATE, status, note)


def accelerate_cell(entry: Entry, world: list[dict]) -> tuple[str, str]:
    """An accelerate cell's status and note from its runs (an uneven split's hang shown)."""
    runs = by_setting(world, entry.name)
    hang = runs.pop(UNJOINED, None)
    twin = by_setting(world, entry.reference)[DEFAULT] if entry.reference else []
    status, note = cell(entry, ACCELERATE, runs, pad=2 * BATCH, twin=twin)
    if not entry.even:
        note += hang_note(hang, "Join([model])")
    return status, note


# --- a plain DDP loop under torchrun -------------------------------------------------------------


@pytest.fixture(scope="module")
def ddp_world() -> list[dict]:
    return ds.run_nodes("loops_frameworks:ddp_rank", 1, 2, [*DDP, CRASH], timeout=300,
                        pythonpath=[TESTS])  # fmt: skip


@pytest.mark.parametrize("name", DDP)
def test_under_torchrun_ddp_every_rank_takes_as_many_steps_and_reads_its_plan(
    name, ddp_world, loop_cell
):
    """Invariant: two torchrun ranks train a ``DistributedDataParallel`` model through the
    entry's loader for two epochs: each reads exactly its plan, whole and once, and every rank
    takes as many steps; an uneven split's ranks take unequal steps, which DDP's ``join()``
    holds, and without which one rank hangs in an all-reduce (shown in the same launch)."""
    status, note = ddp_cell(BY_NAME[name], ddp_world)
    expect(name, TORCHRUN, status)
    loop_cell(name, TORCHRUN, status, note)


def ddp_cell(entry: Entry, world: list[dict]) -> tuple[str, str]:
    """A torchrun cell's status and note: its loop meets no refusal, so any error fails it."""
    runs = by_setting(world, entry.name)
    for key in (DEFAULT, JOIN_DDP):
        refusals_only(entry, TORCHRUN, runs.get(key, []))
    assert not heard([r for rs in runs.values() for r in rs if "warnings" in r])  # no false alarm
    if entry.even:
        assert judge(entry, runs[DEFAULT], EPOCHS) is None, runs
        assert len({tuple(run["steps"]) for run in runs[DEFAULT]}) == 1
        return "passed", ""
    assert judge(entry, runs[JOIN_DDP], EPOCHS) is None, runs
    assert len({tuple(run["steps"]) for run in runs[JOIN_DDP]}) == 2  # unequal: join() needed
    return "setting", JOIN_DDP + hang_note(runs[UNJOINED], "join()")


# --- a crash under a framework's default fails its cell ------------------------------------------

CELL_OF = {LIGHTNING: ("lightning_world", lightning_cell),
           ACCELERATE: ("accelerate_world", accelerate_cell), TORCHRUN: ("ddp_world", ddp_cell)}  # fmt: skip


@pytest.mark.parametrize("loop", list(CELL_OF))
def test_a_crash_injected_under_a_frameworks_default_fails_its_cell(loop, request):
    """Invariant: a sampler that raises ``AttributeError`` under the framework's default (a
    regression, not a refusal of the package's), in the same launch as the matrix, fails its
    cell, though a setting then reads the plan (Lightning's, accelerate's); its error is in
    the run's record, named."""
    fixture, cell_of = CELL_OF[loop]
    world = request.getfixturevalue(fixture)
    errors = [r[CRASH]["fit"][DEFAULT] if loop == LIGHTNING else r[CRASH][DEFAULT] for r in world]
    assert all(e["error"].startswith("AttributeError: ") for e in errors), errors
    with pytest.raises(AssertionError, match=r"AttributeError.*not a refusal the package intends"):
        cell_of(PROBES[CRASH], world)


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
