"""The loop matrix's framework loops: what each rank of a real 2-process world runs.

One launch per framework runs every entry of ``tests/loops.py`` (``test_loops_frameworks.py``
starts them): a Lightning ``Trainer`` (gloo, CPU, under torchrun), accelerate's ``prepare``
(a live gloo group) and a plain DDP loop under torchrun. Each returns, per entry, what every
epoch read on this rank, or the error the loop raised, for the parent to compare with the plan.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from contextlib import nullcontext
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

import distsampling as ds
from loops import BATCH, BY_NAME, EPOCH_HOOK, LIGHTNING, NO_SPLIT, Entry

EPOCHS = 2


def hints(entry: Entry) -> dict[str, int]:
    """What the loops ask of an iterable dataset: batches of the loader's size per worker."""
    return {"batch_size": BATCH} if entry.kind == "iterable" else {}


def user_loader(subject: Any, cls: type = DataLoader) -> Any:
    """The loader a user writes for the entry: its sampler, batch sampler or dataset."""
    how = {k: subject.obj if v is None else v for k, v in subject.how.items()}
    if "batch_sampler" not in how:
        how["batch_size"] = BATCH
    return cls(subject.dataset, **how)


def _flat(batch: Any) -> list[int]:
    return batch.reshape(-1).tolist() if isinstance(batch, torch.Tensor) else [int(batch)]


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"


# --- Lightning ---------------------------------------------------------------------------------


def _recorder(subject: Any, epoch_hook: bool, stop_after: int | None = None, path: str = ""):
    import pytorch_lightning as pl

    class Recorder(pl.LightningModule):
        """Records what each epoch trained on; optionally saves a checkpoint after
        ``stop_after`` steps of epoch 0 and stops (a preempted run)."""

        def __init__(self) -> None:
            super().__init__()
            self.layer, self.epochs = torch.nn.Linear(1, 1), {}

        def on_train_epoch_start(self) -> None:
            if epoch_hook:
                subject.set_epoch(self.current_epoch)

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
def lightning_fit(entry: Entry, setting: str) -> dict[str, Any]:
    """One ``Trainer.fit`` over the entry, with the setting's parts (``""``: the default)."""
    rank = dist.get_rank()
    subject = entry.build(2, rank, **hints(entry))
    kwargs = {"use_distributed_sampler": False} if NO_SPLIT in setting else {}
    model = _recorder(subject, EPOCH_HOOK in setting)
    try:
        loader = user_loader(subject)
        trainer = _trainer(**kwargs)
        trainer.fit(model, loader)
    except Exception as e:  # the default may refuse: the page quotes it
        return {"error": _error(e)}
    epochs = [model.epochs.get(e, []) for e in range(EPOCHS)]
    return {"epochs": epochs, "len": trainer.num_training_batches}  # what Lightning counts


# --8<-- [end:lightning_fit]


# --8<-- [start:lightning_resume]
def lightning_resume(entry: Entry, setting: str, stop_after: int) -> dict[str, Any]:
    """A run preempted after ``stop_after`` steps (Lightning's own checkpoint, saved in
    ``on_train_batch_end``), then a new ``Trainer`` fitted from that checkpoint, through
    torchdata's ``StatefulDataLoader`` (Lightning saves and restores its state)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    rank = dist.get_rank()
    kwargs = {"use_distributed_sampler": False} if NO_SPLIT in setting else {}
    path = os.path.join(tempfile.gettempdir(), f"loops-{os.environ['MASTER_PORT']}.ckpt")
    runs = []
    for ckpt in (None, path):
        subject = entry.build(2, rank, **hints(entry))
        if entry.kind == "global":  # the same epoch everywhere: split by our resumable wrapper
            subject = resumable_split(subject, rank)
        model = _recorder(subject, EPOCH_HOOK in setting, None if ckpt else stop_after, path)
        _trainer(**kwargs).fit(model, user_loader(subject, StatefulDataLoader), ckpt_path=ckpt)
        runs.append([model.epochs.get(e, []) for e in range(EPOCHS)])
    dist.barrier()
    if rank == 0:
        os.remove(path)
    return {"before": runs[0], "after": runs[1]}


# --8<-- [end:lightning_resume]


def resumable_split(subject: Any, rank: int) -> Any:
    """A sampler that yields the same epoch on every rank, split by our resumable wrapper."""
    import distsampling as ds

    split = ds.ResumableDistributedSamplerWrapper(subject.obj, 2, rank, shuffle=False)
    return type(subject)(split, subject.dataset, {"sampler": None})


def lightning_rank(names: list[str]) -> dict[str, dict[str, Any]]:
    """On each rank of a torchrun world of 2: every entry under a real ``Trainer`` with the
    default settings or the setting the entry names, and resumed mid-epoch."""
    warnings.filterwarnings("ignore")  # Lightning's advice on workers and logging
    out = {}
    for name in names:
        entry = BY_NAME[name]
        setting = entry.settings.get(LIGHTNING, "")
        print(f"rank {dist.get_rank()}: {name}", flush=True)  # where a slow run is, in its log
        out[name] = {"setting" if setting else "default": lightning_fit(entry, setting)}
        if entry.resumable:
            out[name]["resume"] = lightning_resume(entry, setting, stop_after=1)
    return out


# --- accelerate --------------------------------------------------------------------------------


# --8<-- [start:accelerate_rank]
def accelerate_rank(names: list[str]) -> dict[str, dict[str, Any]]:
    """On each rank of a live group of 2: every entry's loader prepared by accelerate, and
    left unprepared (the model and optimizer prepared alone), two epochs each."""
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == 2
    out = {}
    for name in names:
        entry, out[name] = BY_NAME[name], {}
        for prepare in (True, False):
            subject = entry.build(2, dist.get_rank(), **hints(entry))
            try:
                loader = user_loader(subject)
                if prepare:
                    loader = accelerator.prepare(loader)
                epochs = []
                for epoch in range(EPOCHS):
                    subject.set_epoch(epoch)
                    epochs.append([_flat(b) for b in loader])
                out[name]["prepared" if prepare else "unprepared"] = {"epochs": epochs}
            except Exception as e:
                out[name]["prepared" if prepare else "unprepared"] = {"error": _error(e)}
    return out


# --8<-- [end:accelerate_rank]


# --- a plain DDP loop under torchrun ------------------------------------------------------------


# --8<-- [start:ddp_rank]
def ddp_rank(names: list[str]) -> dict[str, dict[str, Any]]:
    """On each rank of a torchrun world of 2: a ``DistributedDataParallel`` model trained
    through every entry's loader for two epochs, ``set_epoch`` first; each step all-reduces
    the gradients, so ranks with unequal steps would hang (the launch's timeout ends it)."""
    out = {}
    for name in names:
        entry = BY_NAME[name]
        subject = entry.build(2, dist.get_rank(), **hints(entry))
        loader = user_loader(subject)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        epochs = []
        for epoch in range(EPOCHS):
            subject.set_epoch(epoch)
            read = []
            # an unpadded split gives ranks unequal steps: DDP's join() shadows the missing ones
            with model.join() if not entry.even else nullcontext():
                for step, batch in enumerate(loader):
                    if entry.kind == "endless" and step == 4:
                        break
                    read.append(_flat(batch))
                    optimizer.zero_grad()
                    model(batch.float().reshape(-1, 1)).pow(2).mean().backward()
                    optimizer.step()
            epochs.append(read)
        steps = torch.tensor([len(e) for e in epochs])
        every = [torch.zeros_like(steps) for _ in range(dist.get_world_size())]
        dist.all_gather(every, steps)
        out[name] = {"epochs": epochs, "steps": [t.tolist() for t in every]}
    return out


# --8<-- [end:ddp_rank]


def lightning_default(entry: Entry, rank: int) -> dict[str, Any]:
    """What Lightning's default does to the entry's loader on ``rank`` of 2, in this process,
    with Lightning's own functions (a ``Trainer`` would call them so): ``_requires_distributed_
    sampler``, then ``_get_distributed_sampler`` and ``_update_dataloader`` (the loader it would
    train on, or its error), and ``_set_sampler_epoch`` before each epoch."""
    from types import SimpleNamespace

    from lightning_fabric.utilities.data import _set_sampler_epoch
    from pytorch_lightning.trainer.connectors.data_connector import (
        _DataConnector,
        _get_distributed_sampler,
    )
    from pytorch_lightning.utilities.data import _is_dataloader_shuffled, _update_dataloader

    subject = entry.build(2, rank, **hints(entry))
    loader = user_loader(subject)
    settings = SimpleNamespace(use_distributed_sampler=True, is_distributed=True)
    connector = _DataConnector(SimpleNamespace(_accelerator_connector=settings))
    try:
        if connector._requires_distributed_sampler(loader):
            shuffle = _is_dataloader_shuffled(loader)
            sampler = _get_distributed_sampler(loader, shuffle, num_replicas=2, rank=rank)
            loader = _update_dataloader(loader, sampler)
        epochs = []
        for epoch in range(EPOCHS):
            _set_sampler_epoch(loader, epoch)
            epochs.append([_flat(b) for b in loader])
    except Exception as e:
        return {"error": _error(e)}
    return {"epochs": epochs, "len": len(loader)}


# --- the rank check: set_epoch with another value on another rank ------------------------------


# --8<-- [start:rank_check_rank]
def rank_check_rank(names: list[str]) -> dict[str, dict[str, Any]]:
    """On each rank of a live group of 2: the entry's epoch set to the rank's number (the bug:
    one rank an epoch ahead), then ``assert_rank_consistent`` on every rank; then the same
    epoch everywhere, checked again. Each check's error, or None where the ranks agree."""
    out = {}
    for name in names:
        subject = BY_NAME[name].build(2, dist.get_rank(), **hints(BY_NAME[name]))
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
