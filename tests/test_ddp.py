"""The DDP smoke test: a tiny model trained through distsampling.DistributedSampler + DataLoader.

The same training code (docs/examples/ddp_train.py, which the docs run under torchrun) runs on
gloo with CPU ranks in every ``make test``, and on nccl with one process per GPU where CUDA is
present.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from distsampling import run_world

EXAMPLES = str(Path(__file__).resolve().parent.parent / "docs" / "examples")
pytestmark = [pytest.mark.multiprocess, pytest.mark.xdist_group("worlds")]


def check(results: list[dict], n: int = 60) -> None:
    for epoch in range(len(results[0]["seen"])):
        shards = [r["seen"][epoch] for r in results]
        # each rank saw its own shard: disjoint, together every sample once
        assert sorted(i for s in shards for i in s) == list(range(n))
    assert all(r["in_sync"] for r in results), "parameters differ across ranks after some step"
    assert all(r["last_epoch_loss"] < r["first_epoch_loss"] for r in results), (
        "the loss did not fall"
    )


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_on_gloo_trains_disjoint_shards_with_synchronised_parameters(world):
    """Invariant: each rank reads its own disjoint shard, parameters stay identical, and the loss falls."""
    check(run_world("ddp_train:train", world, "gloo", timeout=240, pythonpath=[EXAMPLES]))


@pytest.mark.cuda
@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="CUDA is not available: the nccl DDP smoke test needs GPUs (the gloo variant ran instead)",
)
def test_ddp_on_nccl_with_one_process_per_gpu():
    """Invariant: the same training on nccl, one rank per GPU: disjoint shards, synchronised parameters, falling loss."""
    world = torch.cuda.device_count()
    check(run_world("ddp_train:train", world, "nccl", timeout=300, pythonpath=[EXAMPLES]))
