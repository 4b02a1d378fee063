"""The loop matrix's framework loops: what each rank of a real 2-process world runs.

One launch per framework runs every entry of ``tests/loops.py`` (``test_loops_frameworks.py``
starts them): a Lightning ``Trainer`` (gloo, CPU, under torchrun), accelerate's ``prepare``
(a live gloo group) and a plain DDP loop under torchrun. Each runs the entry with the
framework's defaults first; where the ranks together did not read exactly their plans, it runs
the settings the framework offers, one after the other, until one does. It returns, per entry
and per run, what every epoch read on this rank, or the first line of the error it raised,
for the parent to compare with the plan and to write the page's notes from.

Every run also records the warnings the package raised while it ran (``FrameworkWarning``: a
framework about to train a rank on another plan), each as its first line, for the parent to
tell a loud default from a silent one. The framework loops read in the main process (no
DataLoader workers), so every warning of the run is raised where ``heard()`` records it; only
``ShardedIterableDataset`` also runs under the ``Trainer`` with 2 workers, persistent and not
(``WORKERS``), and with 2 persistent workers and the user's ``set_epoch`` in
``on_train_epoch_start`` (``WORKERS_HOOKED``). An error is recorded whole (its type and first line): the parent fails the cell
unless it is a refusal that loop's default may meet (``loops.FRAMEWORK_REFUSALS``). A
``Trainer`` run records, epoch by epoch, the batches Lightning counted for it; an entry whose
epochs differ in length also runs with ``reload_dataloaders_every_n_epochs=1``.

A split whose ranks read unequal counts (``Entry.even`` false) hangs a step's all-reduce
without DDP's ``join()``: ``unjoined_train()`` runs it so, its gradients on a group with a
short timeout, and shows the hang within seconds.
"""

from __future__ import annotations

import os
import re
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms import Join
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.utils.data import DataLoader

import distsampling as ds
from distsampling.guards import FrameworkWarning
from loops import (
    BATCH,
    EPOCH_HOOK,
    JOIN_ACCELERATE,
    JOIN_DDP,
    NO_SPLIT,
    RECOUNT,
    UNDER_DEFAULT,
    UNPREPARED,
    Entry,
    entry_of,
    judge,
)

EPOCHS = 2
DEFAULT = "default"  # the key of the run with the framework's defaults
UNJOINED = "without join"  # the key of an uneven split's run without join()
#: the settings Lightning offers, tried in turn where its defaults read another plan
LIGHTNING_SETTINGS = [(NO_SPLIT,), (EPOCH_HOOK,), (NO_SPLIT, EPOCH_HOOK)]
HANG_SECONDS = 5  # how long the rank with a step more waits in its all-reduce, shown


def setting_name(parts: tuple[str, ...]) -> str:
    return ", and ".join(parts) if parts else DEFAULT


def user_loader(subject: Any, cls: type = DataLoader) -> Any:
    """The loader a user writes for the entry: its sampler, batch sampler or dataset."""
    how = {k: subject.obj if v is None else v for k, v in subject.how.items()}
    if "batch_sampler" not in how:
        how["batch_size"] = BATCH
    return cls(subject.dataset, **how)


def _flat(batch: Any) -> list[int]:
    return batch.reshape(-1).tolist() if isinstance(batch, torch.Tensor) else [int(batch)]


@contextmanager
def default_run(default: bool = True) -> Iterator[None]:
    """Marks a framework's default run (``loops.UNDER_DEFAULT``), where a probe may crash."""
    UNDER_DEFAULT[0] = default
    try:
        yield
    finally:
        UNDER_DEFAULT[0] = False


def _error(e: BaseException) -> str:
    """``TypeName: first line`` of an error; of a DataLoader worker's, the worker's own (the
    last such line of the traceback it carries: torch re-raises it as ``Caught ... in
    DataLoader worker process k``)."""
    lines = str(e).strip().splitlines()
    if lines and lines[0].startswith("Caught ") and "DataLoader worker process" in lines[0]:
        own = [m for line in lines if (m := re.match(r"(\w+(?:\.\w+)*): (.*)", line))]
        if own:  # its type without its module, and its words
            return f"{own[-1][1].rsplit('.', 1)[-1]}: {own[-1][2]}"
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


@contextmanager
def heard() -> Iterator[list[str]]:
    """The first line of every ``FrameworkWarning`` raised inside, each time it is raised (the
    rest of the run's warnings stay filtered as they were)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FrameworkWarning)
        lines: list[str] = []
        yield lines
    lines += [str(w.message).splitlines()[0] for w in caught if w.category is FrameworkWarning]


def everyone(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rank's record of one run, on every rank (so that all ranks judge it alike)."""
    runs: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(runs, run)
    return runs


# --- Lightning ---------------------------------------------------------------------------------


def _recorder(subject: Any, epoch_hook: bool, stop_after: int | None = None, path: str = ""):
    import pytorch_lightning as pl

    class Recorder(pl.LightningModule):
        """Records what each epoch trained on; optionally saves a checkpoint after
        ``stop_after`` steps of epoch 0 and stops (a preempted run)."""

        def __init__(self) -> None:
            super().__init__()
            self.layer, self.epochs, self.lens = torch.nn.Linear(1, 1), {}, {}

        def on_train_epoch_start(self) -> None:
            if epoch_hook:
                subject.set_epoch(self.current_epoch)
            # the batches Lightning counts for this epoch (it ends the epoch there)
            self.lens[self.current_epoch] = self.trainer.num_training_batches

        def training_step(self, batch, batch_idx):
            self.epochs.setdefault(self.current_epoch, []).append(_flat(batch))
            return self.layer(batch.float().reshape(-1, 1)).pow(2).mean()

        def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
            if stop_after is not None and self.global_step == stop_after:
                self.trainer.save_checkpoint(path)
                self.trainer.should_stop = True

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Recorder()


def _trainer(**kwargs: Any):
    import pytorch_lightning as pl

    return pl.Trainer(
        accelerator="cpu", devices=2, strategy="ddp", max_epochs=EPOCHS, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, **kwargs,
    )  # fmt: skip


# --8<-- [start:lightning_fit]
def lightning_fit(entry: Entry, setting: tuple[str, ...] = (), **loader: Any) -> dict[str, Any]:
    """One ``Trainer.fit`` over the entry: ``Trainer``'s defaults (``setting=()``), or with the
    setting's parts; ``loader``: the DataLoader's own arguments (workers). What each epoch
    trained on and the batches Lightning counted for it, or the error and the steps before it
    (the parent tells the refusals it may meet from any other error)."""
    subject = entry.build(2, dist.get_rank())
    kwargs = {"use_distributed_sampler": False} if NO_SPLIT in setting else {}
    kwargs |= {"reload_dataloaders_every_n_epochs": 1} if RECOUNT in setting else {}
    model, trainer, error = _recorder(subject, EPOCH_HOOK in setting), None, None
    with heard() as warned, default_run(not setting):  # what the package said while it ran
        try:
            trainer = _trainer(**kwargs)
            trainer.fit(model, user_loader(subject) if not loader else _with(subject, loader))
        except Exception as e:  # recorded whole: the parent judges it
            error = _error(e)
    if error is not None:
        steps = sum(map(len, model.epochs.values()))
        return {"error": error, "steps_before": steps, "warnings": warned}
    epochs = [model.epochs.get(e, []) for e in range(EPOCHS)]
    lens = [model.lens.get(e) for e in range(EPOCHS)]
    return {"epochs": epochs, "lens": lens, "warnings": warned}


# --8<-- [end:lightning_fit]


def _with(subject: Any, loader: dict[str, Any]) -> DataLoader:
    """The user's loader with DataLoader arguments of its own (``num_workers``, ...)."""
    how = {k: subject.obj if v is None else v for k, v in subject.how.items()}
    return DataLoader(subject.dataset, **how, batch_size=BATCH, **loader)


#: the DataLoader workers a Trainer's column runs an iterable dataset with, beside none: the
#: Trainer's defaults (nothing sets the dataset's epoch), and persistent workers with the
#: user's ``set_epoch(self.current_epoch)`` in ``on_train_epoch_start`` (the setting's key)
WORKERS = {"2 workers": {"num_workers": 2}, "2 persistent workers": {"num_workers": 2, "persistent_workers": True}}  # fmt: skip
WORKERS_HOOKED = f"2 persistent workers, and {EPOCH_HOOK}"


# --8<-- [start:lightning_resume]
def lightning_resume(entry: Entry, setting: tuple[str, ...], stop_after: int) -> dict[str, Any]:
    """A run preempted after ``stop_after`` steps (Lightning's own checkpoint, saved in
    ``on_train_batch_end``), then a new ``Trainer`` fitted from that checkpoint, through
    torchdata's ``StatefulDataLoader`` (Lightning saves and restores its state)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    rank = dist.get_rank()
    kwargs = {"use_distributed_sampler": False} if NO_SPLIT in setting else {}
    path = os.path.join(tempfile.gettempdir(), f"loops-{os.environ['MASTER_PORT']}.ckpt")
    runs: list[list[list[list[int]]]] = []
    model = None
    with heard() as warned, default_run(not setting):  # what the package said while both ran
        try:
            for ckpt in (None, path):
                subject = entry.build(2, rank)
                stop = None if ckpt else stop_after
                model = _recorder(subject, EPOCH_HOOK in setting, stop, path)
                loader = user_loader(subject, StatefulDataLoader)
                _trainer(**kwargs).fit(model, loader, ckpt_path=ckpt)
                runs.append([model.epochs.get(e, []) for e in range(EPOCHS)])
        except Exception as e:  # recorded whole, with the steps both runs trained before it
            steps = sum(len(epoch) for run in runs for epoch in run)
            steps += sum(map(len, model.epochs.values())) if model is not None else 0
            return {"error": _error(e), "steps_before": steps, "warnings": warned}
        finally:
            dist.barrier()
            if rank == 0 and os.path.exists(path):
                os.remove(path)
    before, after = runs
    return {"epochs": [before[0] + after[0], after[1]], "before": before[0], "warnings": warned}


# --8<-- [end:lightning_resume]


def lightning_rank(names: list[str]) -> dict[str, dict[str, Any]]:
    """On each rank of a torchrun world of 2: every entry under a real ``Trainer`` with its
    default settings; where the ranks did not read exactly their plans, the settings Lightning
    offers in turn, until one does. A resumable entry is also preempted and resumed, by
    default and (where the default did not hold) with the setting that held."""
    warnings.filterwarnings("ignore")  # Lightning's advice on workers and logging
    out = {}
    for name in names:
        entry = entry_of(name)
        print(f"rank {dist.get_rank()}: {name}", flush=True)  # where a slow run is, in its log
        runs = {DEFAULT: lightning_fit(entry)}
        chosen: tuple[str, ...] = ()
        if judge(entry, everyone(runs[DEFAULT]), EPOCHS) is not None:
            for setting in LIGHTNING_SETTINGS:
                runs[setting_name(setting)] = lightning_fit(entry, setting)
                if judge(entry, everyone(runs[setting_name(setting)]), EPOCHS) is None:
                    chosen = setting
                    break
        out[name] = {"fit": runs}
        if entry.varies:  # epochs of changing length: counted again at each epoch's start
            out[name]["recount"] = lightning_fit(entry, (*chosen, RECOUNT))
        if (
            entry.kind == "iterable"
            and entry.reference is None
            and name == "ShardedIterableDataset"
        ):
            out[name]["workers"] = {k: lightning_fit(entry, (), **v) for k, v in WORKERS.items()}
            hooked = lightning_fit(entry, (EPOCH_HOOK,), **WORKERS["2 persistent workers"])
            out[name]["workers"][WORKERS_HOOKED] = hooked
        if entry.resumable:
            resumes = {DEFAULT: lightning_resume(entry, (), stop_after=1)}
            if chosen and judge(entry, everyone(resumes[DEFAULT]), EPOCHS) is not None:
                resumes[setting_name(chosen)] = lightning_resume(entry, chosen, stop_after=1)
            out[name]["resume"] = resumes
    return out


# --- accelerate --------------------------------------------------------------------------------


# --8<-- [start:accelerate_train]
def accelerate_train(accelerator: Any, entry: Entry, prepare_loader: bool) -> dict[str, Any]:
    """Train a model through the entry's loader for two epochs, ``set_epoch`` first: the model
    and optimizer prepared by ``accelerator.prepare``, and the loader too (accelerate's way) or
    not (the loader left as built); an uneven split's steps under ``join_uneven_inputs``."""
    subject = entry.build(2, dist.get_rank())
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with heard() as warned, default_run(prepare_loader):  # what the package said while it ran
        run = _accelerate_epochs(accelerator, entry, subject, model, optimizer, prepare_loader)
    return {**run, "warnings": warned}


def _accelerate_epochs(accelerator, entry, subject, model, optimizer, prepare_loader):
    """The two epochs of ``accelerate_train()``: what each read, or the error and the steps
    trained before it."""
    epochs: list[list[list[int]]] = []
    try:
        loader = user_loader(subject)
        if prepare_loader:
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        else:
            model, optimizer = accelerator.prepare(model, optimizer)
        for epoch in range(EPOCHS):
            subject.set_epoch(epoch)
            epochs.append([])
            uneven = not prepare_loader and not entry.even
            with Join([model]) if uneven else nullcontext():  # join_uneven_inputs, on a CPU
                for batch in loader:
                    epochs[-1].append(_flat(batch))
                    optimizer.zero_grad()
                    accelerator.backward(model(batch.float().reshape(-1, 1)).pow(2).mean())
                    optimizer.step()
    except Exception as e:  # recorded whole, and when: the parent judges it
        return {"error": _error(e), "steps_before": sum(map(len, epochs))}
    finally:
        accelerator.free_memory()
    return {"epochs": epochs}


# --8<-- [end:accelerate_train]


def accelerate_rank(names: list[str]) -> dict[str, dict[str, Any]]:
    """On each rank of a live group of 2: every entry trained with accelerate's way (model,
    optimizer and loader prepared); where the ranks did not read exactly their plans, the
    loader left unprepared. The padding accelerate's ``even_batches`` adds to the last round
    of batches is part of its split of an epoch that is the same on every rank."""
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == 2
    out = {}
    for name in names:
        entry = entry_of(name)
        runs = {DEFAULT: accelerate_train(accelerator, entry, prepare_loader=True)}
        if judge(entry, everyone(runs[DEFAULT]), EPOCHS, pad=2 * BATCH) is not None:
            setting = UNPREPARED if entry.even else f"{UNPREPARED}, {JOIN_ACCELERATE}"
            if not entry.even:  # the route without the join first: it hangs
                runs[UNJOINED] = unjoined_train(entry, accelerator)
            runs[setting] = accelerate_train(accelerator, entry, prepare_loader=False)
        out[name] = runs
    return out


# --- a plain DDP loop under torchrun ------------------------------------------------------------


# --8<-- [start:ddp_rank]
def ddp_train(entry: Entry, join: bool) -> dict[str, Any]:
    """A ``DistributedDataParallel`` model trained through the entry's loader for two epochs,
    ``set_epoch`` first; each step all-reduces the gradients, so ranks with unequal steps need
    DDP's ``join()`` (which shadows the missing steps) or hang. An error is recorded, with the
    steps before it (the parent fails the cell: this loop meets no refusal)."""
    subject = entry.build(2, dist.get_rank())
    loader = user_loader(subject)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    epochs: list[list[list[int]]] = []
    with heard() as warned, default_run():  # what the package said while it ran
        try:
            _ddp_epochs(entry, subject, loader, model, optimizer, join, epochs)
        except Exception as e:  # a rank's error: both ranks raise alike, at the same step
            return {"error": _error(e), "steps_before": sum(map(len, epochs)), "warnings": warned}
    return {"epochs": epochs, "steps": [len(e) for e in epochs], "warnings": warned}


def _ddp_epochs(entry, subject, loader, model, optimizer, join, epochs):
    """The two epochs of ``ddp_train()``: the batches each read, into ``epochs``."""
    for epoch in range(EPOCHS):
        subject.set_epoch(epoch)
        read: list[list[int]] = []
        epochs.append(read)
        with model.join() if join else nullcontext():
            for step, batch in enumerate(loader):
                if entry.kind == "endless" and step == 4:
                    break
                read.append(_flat(batch))
                optimizer.zero_grad()
                model(batch.float().reshape(-1, 1)).pow(2).mean().backward()
                optimizer.step()


# --8<-- [end:ddp_rank]


def ddp_rank(names: list[str]) -> dict[str, dict[str, Any]]:
    """On each rank of a torchrun world of 2: every entry trained by ``ddp_train()``; an
    uneven split by ``unjoined_train()`` (its hang), then with ``join()``."""
    out = {}
    for name in names:
        entry = entry_of(name)
        if entry.even:
            out[name] = {DEFAULT: ddp_train(entry, join=False)}
        else:  # without join() first: it hangs
            out[name] = {UNJOINED: unjoined_train(entry), JOIN_DDP: ddp_train(entry, join=True)}
    return out


# --- an uneven split without join: the hang, shown within seconds -------------------------------


# --8<-- [start:unjoined_train]
def unjoined_train(entry: Entry, accelerator: Any = None) -> dict[str, Any]:
    """One epoch of an uneven split through a DDP model (``accelerator.prepare``'s, or
    torch's), without ``join()``. Its gradients are all-reduced on a group of their own whose
    timeout is ``HANG_SECONDS`` (torch's ``allreduce_hook`` on it): the rank with a step more
    waits there for a partner that never comes, and the wait ends with gloo's timeout error
    instead of never. The steps each rank took, and the error where it waited."""
    group = dist.new_group(backend="gloo", timeout=timedelta(seconds=HANG_SECONDS))
    subject = entry.build(2, dist.get_rank())
    subject.set_epoch(0)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    if accelerator is not None:
        model, optimizer = accelerator.prepare(model, optimizer)
    else:
        model = torch.nn.parallel.DistributedDataParallel(model)
    model.register_comm_hook(group, allreduce_hook)
    steps, error = 0, None
    try:
        for batch in user_loader(subject):
            steps += 1  # the step it is in: where it waits, if it does
            optimizer.zero_grad()
            model(batch.float().reshape(-1, 1)).pow(2).mean().backward()
            optimizer.step()
    except RuntimeError as e:  # the all-reduce that found no partner, after HANG_SECONDS
        error = _error(e)
    finally:
        if accelerator is not None:
            accelerator.free_memory()
    return {"steps": steps, "error": error}


# --8<-- [end:unjoined_train]


# --- the rank check: set_epoch with another value on another rank ------------------------------


# --8<-- [start:rank_check_rank]
def rank_check_rank(names: list[str]) -> dict[str, dict[str, Any]]:
    """On each rank of a live group of 2: the entry's epoch set to the rank's number (the bug:
    one rank an epoch ahead), then ``assert_rank_consistent`` on every rank; then the same
    epoch everywhere, checked again. Each check's error, or None where the ranks agree."""
    out = {}
    for name in names:
        subject = entry_of(name).build(2, dist.get_rank())
        checked = subject.how.get("sampler") or subject.obj  # what the loader takes
        out[name] = {}
        for case, epoch in (("differs", dist.get_rank()), ("agrees", 1)):
            subject.set_epoch(epoch)
            try:
                ds.assert_rank_consistent(checked)
                out[name][case] = None
            except ds.RankMismatchError as e:
                out[name][case] = str(e)
    return out


# --8<-- [end:rank_check_rank]
