"""Framework notes (docs/frameworks.md), checked on the frameworks' real code.

PyTorch Lightning: a real 1-process CPU ``Trainer`` (``strategy="ddp"``, so Lightning treats the
run as distributed) shows which sampler it trains with; Lightning's own replacement function on
two simulated ranks shows what the replacement does to an already split sampler. accelerate: a
real 2-process gloo group calls ``Accelerator.prepare``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distsampling import run_world

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = str(ROOT / "docs" / "examples")
TESTS = str(ROOT / "tests")

LIGHTNING_FIT = """
import json, sys
import pytorch_lightning as pl, torch
from torch.utils.data import DataLoader, TensorDataset
from distsampling import DistributedSampler

class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer, self.seen = torch.nn.Linear(1, 1), []
    def training_step(self, batch, i):
        return self.layer(batch[0]).sum()
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
    def on_train_epoch_start(self):
        s = self.trainer.train_dataloader.sampler
        inner = getattr(getattr(s, "dataset", None), "_sampler", s)  # Lightning's wrapper keeps it here
        self.seen.append([f"{type(s).__module__}.{type(s).__name__}", inner is SAMPLER, inner.epoch])

result = {}
for use in (True, False):
    dataset = TensorDataset(torch.arange(8.0).unsqueeze(1))
    SAMPLER = DistributedSampler(dataset, num_replicas=1, rank=0)
    trainer = pl.Trainer(accelerator="cpu", devices=1, strategy="ddp", use_distributed_sampler=use,
        max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False)
    model = Tiny()
    trainer.fit(model, DataLoader(dataset, batch_size=4, sampler=SAMPLER))
    result[str(use)] = model.seen
print("RESULT", json.dumps(result))
"""


def test_lightning_replaces_a_custom_sampler_unless_use_distributed_sampler_is_false():
    """Invariant: in a distributed Trainer, Lightning trains through its own
    DistributedSamplerWrapper around our sampler by default, and through our sampler itself with
    ``use_distributed_sampler=False``; either way it calls our ``set_epoch`` every epoch."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), TESTS]))
    env["CUDA_VISIBLE_DEVICES"] = ""
    proc = subprocess.run(
        [sys.executable, "-c", LIGHTNING_FIT],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT ", 1)[1])
    wrapper = "lightning_fabric.utilities.distributed.DistributedSamplerWrapper"
    assert result["True"] == [[wrapper, True, 0], [wrapper, True, 1]]
    ours = "distsampling.distributed.DistributedSampler"
    assert result["False"] == [[ours, True, 0], [ours, True, 1]]


def test_lightnings_replacement_splits_an_already_split_sampler_again():
    """Invariant: Lightning's replacement of our 2-rank sampler (its real function) leaves each
    rank a quarter of the epoch: the two ranks together read only half the samples."""
    from pytorch_lightning.trainer.connectors.data_connector import _get_distributed_sampler
    from torch.utils.data import DataLoader

    from distsampling import DistributedSampler

    dataset = list(range(16))
    shares = []
    for rank in range(2):
        ours = DistributedSampler(dataset, num_replicas=2, rank=rank, seed=0)
        replaced = _get_distributed_sampler(
            DataLoader(dataset, sampler=ours), True, 0, num_replicas=2, rank=rank
        )
        shares.append(list(replaced))
        assert set(shares[-1]) < set(ours)
    assert [len(s) for s in shares] == [4, 4]
    assert len(set(shares[0]) | set(shares[1])) == 8


def accelerate_rank() -> dict[str, list]:
    """On each rank of a live group: one epoch of our sampler with the loader prepared and not
    prepared, then the page's recipe (docs/examples/frameworks_accelerate_fit.py)."""
    from accelerate import Accelerator
    from frameworks_accelerate_fit import train
    from torch.utils.data import DataLoader

    from distsampling import DistributedSampler

    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == 2  # accelerate found the live group
    dataset = list(range(16))
    read = {}
    for prepare in (True, False):
        sampler = DistributedSampler(dataset, seed=0)  # rank and world from the group
        loader = DataLoader(dataset, batch_size=2, sampler=sampler)
        if prepare:
            loader = accelerator.prepare(loader)
        read[f"prepared={prepare}"] = [i for batch in loader for i in batch.tolist()]
    read["recipe"] = train(epochs=2)
    return read


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
def test_accelerate_prepare_splits_an_already_split_sampler_again():
    """Invariant: on 2 real ranks, ``accelerator.prepare(loader)`` shards the batches of our
    already split sampler again (each rank reads 4 of 16, together 8); left unprepared, the
    loader reads disjoint halves that cover all 16; the page's recipe (prepare the model and
    optimizer, not the loader) trains with disjoint, covering shares and a new order each epoch."""
    ranks = run_world("test_frameworks:accelerate_rank", 2, timeout=240,
                      pythonpath=[TESTS, EXAMPLES])  # fmt: skip
    prepared = [r["prepared=True"] for r in ranks]
    assert [len(r) for r in prepared] == [4, 4]
    assert len(set(prepared[0]) | set(prepared[1])) == 8
    assert sorted(ranks[0]["prepared=False"] + ranks[1]["prepared=False"]) == list(range(16))
    for epoch in range(2):
        assert sorted(ranks[0]["recipe"][epoch] + ranks[1]["recipe"][epoch]) == list(range(16))
    assert ranks[0]["recipe"][0] != ranks[0]["recipe"][1]
