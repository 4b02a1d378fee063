"""Framework notes (docs/frameworks.md), checked on the frameworks' real code.

PyTorch Lightning: a real 2-process ``Trainer`` under torchrun (gloo, CPU, the default
``use_distributed_sampler=True``) trains each rank on exactly our sampler's share, and through
Lightning's own wrapper where the sampler is not a torch ``DistributedSampler``; Lightning's own
check and replacement functions, in this process, show which of our samplers it leaves alone
and what its wrapper does to an endless stream. accelerate: a real 2-process gloo group calls
``Accelerator.prepare``.
"""

from __future__ import annotations

from collections import Counter
from itertools import islice
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader, WeightedRandomSampler
from torch.utils.data import DistributedSampler as TorchDistributedSampler

import distsampling as ds
from distsampling import run_nodes, run_world

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = str(ROOT / "docs" / "examples")
TESTS = str(ROOT / "tests")

# --- Lightning: a real 2-process Trainer -------------------------------------------------------

N, BATCH, EPOCHS = 15, 4, 2  # 15 on 2 ranks: a padded split, 2 batches on every rank


def weighted_inner() -> WeightedRandomSampler:
    """A weighted draw with replacement, seeded alike on every rank (the wrapper's contract)."""
    weights = torch.arange(1.0, N + 1)
    return WeightedRandomSampler(weights, 12, generator=torch.Generator().manual_seed(7))


def order_ahead(rank: int) -> ds.OrderAhead:
    return ds.OrderAhead(ds.DistributedSampler(range(N), 2, rank, seed=3))


#: case -> (this rank's sampler of 2, the Trainer's keyword arguments)
LIGHTNING_CASES = {
    "DistributedSampler": (lambda rank: ds.DistributedSampler(range(N), 2, rank, seed=3), {}),
    "DistributedSamplerWrapper": (
        lambda rank: ds.DistributedSamplerWrapper(weighted_inner(), 2, rank, seed=5),
        {},
    ),
    "UnpaddedDistributedSampler": (
        lambda rank: ds.UnpaddedDistributedSampler(range(N), 2, rank, seed=4),
        {},
    ),
    "InferenceSampler": (lambda rank: ds.InferenceSampler(range(N), 2, rank), {}),
    "OrderAhead": (order_ahead, {}),
    "OrderAhead, use_distributed_sampler=False": (order_ahead, {"use_distributed_sampler": False}),
}
PER_RANK = ["DistributedSampler", "DistributedSamplerWrapper", "UnpaddedDistributedSampler"]
PER_RANK += ["InferenceSampler"]


def lightning_rank(names: list[str]) -> dict[str, dict]:
    """On each rank of a torchrun world, for each case: a real ``Trainer`` on 2 CPU devices fits
    a tiny model through the case's sampler; what it trained on, epoch by epoch."""
    import pytorch_lightning as pl
    from torch.utils.data import TensorDataset

    class Recorder(pl.LightningModule):
        def __init__(self, sampler) -> None:
            super().__init__()
            self.layer, self.sampler, self.epochs = torch.nn.Linear(1, 1), sampler, []

        def on_train_epoch_start(self) -> None:
            s = self.trainer.train_dataloader.sampler  # what Lightning trains through
            name = f"{type(s).__module__}.{type(s).__name__}"
            self.epochs.append({"sampler": name, "ours": s is self.sampler, "indices": []})

        def training_step(self, batch, batch_idx):
            (x,) = batch  # the dataset is range(N): each sample is its own index
            self.epochs[-1]["indices"] += x.tolist()
            return self.layer(x.float().unsqueeze(1)).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    out = {}
    for name in names:
        make, kwargs = LIGHTNING_CASES[name]
        sampler = make(torch.distributed.get_rank())
        trainer = pl.Trainer(
            accelerator="cpu", devices=2, strategy="ddp", max_epochs=EPOCHS, logger=False,
            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
            **kwargs,
        )  # fmt: skip
        model = Recorder(sampler)
        loader = DataLoader(TensorDataset(torch.arange(N)), batch_size=BATCH, sampler=sampler)
        trainer.fit(model, loader)
        environment = type(trainer.strategy.cluster_environment).__name__
        out[name] = {"world": [trainer.world_size, trainer.global_rank, environment]}
        out[name]["epochs"] = model.epochs
    return out


@pytest.fixture(scope="module")
def lightning_world() -> list[dict[str, dict]]:
    """Each rank's record of every case, from one torchrun world of 2 ranks."""
    return run_nodes("test_frameworks:lightning_rank", 1, 2, list(LIGHTNING_CASES),
                     timeout=240, pythonpath=[TESTS])  # fmt: skip


def our_epochs(name: str, rank: int) -> list[list[int]]:
    """This rank's indices in epochs 0, 1, ... of a fresh sampler of the case, set_epoch first."""
    sampler, out = LIGHTNING_CASES[name][0](rank), []
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        out.append(list(sampler))
    return out


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
@pytest.mark.parametrize("name", PER_RANK)
def test_lightnings_default_trains_each_rank_on_exactly_our_samplers_share(lightning_world, name):
    """Invariant: on 2 real ranks under torchrun, Trainer's default (use_distributed_sampler=True)
    trains through our sampler object itself, and each rank's batches of every epoch are
    exactly the indices our sampler yields for that rank after set_epoch(epoch)."""
    for rank, ranks in enumerate(lightning_world):
        record = ranks[name]
        assert record["world"] == [2, rank, "TorchElasticEnvironment"]
        assert [e["ours"] for e in record["epochs"]] == [True] * EPOCHS
        assert [e["indices"] for e in record["epochs"]] == our_epochs(name, rank)


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
def test_under_lightning_the_ranks_are_disjoint_and_cover_each_epoch_in_a_new_order(
    lightning_world,
):
    """Invariant: what the 2 ranks trained on covers each epoch: every index once, plus the
    padding (DistributedSampler: one index twice), the inner epoch's draws (the wrapper), or
    exactly once (UnpaddedDistributedSampler, InferenceSampler); shuffled samplers read a new
    order every epoch."""
    read = {name: [r[name]["epochs"] for r in lightning_world] for name in PER_RANK}
    for epoch in range(EPOCHS):
        both = {name: read[name][0][epoch]["indices"] + read[name][1][epoch]["indices"]
                for name in PER_RANK}  # fmt: skip
        padded = Counter(both["DistributedSampler"])
        assert set(padded) == set(range(N)) and sum(padded.values()) == N + 1
        inner = weighted_inner()
        draws = [list(inner) for _ in range(epoch + 1)][-1]  # the inner sampler's epoch
        assert Counter(both["DistributedSamplerWrapper"]) == Counter(draws)
        for name in ("UnpaddedDistributedSampler", "InferenceSampler"):
            assert sorted(both[name]) == list(range(N))
    for name in ("DistributedSampler", "DistributedSamplerWrapper", "UnpaddedDistributedSampler"):
        assert read[name][0][0]["indices"] != read[name][0][1]["indices"]


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
def test_lightnings_default_keeps_order_ahead_over_a_share_as_use_distributed_sampler_false_does(
    lightning_world,
):
    """Invariant: OrderAhead over this rank's share is a torch DistributedSampler: by default
    Lightning trains through OrderAhead itself, each rank its whole share, and calls its
    set_epoch (a new order each epoch), exactly as with use_distributed_sampler=False."""
    for epoch in range(EPOCHS):
        for rank, ranks in enumerate(lightning_world):
            default = ranks["OrderAhead"]["epochs"][epoch]
            kept = ranks["OrderAhead, use_distributed_sampler=False"]["epochs"][epoch]
            share = our_epochs("OrderAhead", rank)[epoch]
            for run in (default, kept):
                assert run["sampler"] == "distsampling.scale.ahead.OrderAhead"
                assert run["ours"] is True
                assert run["indices"] == share


# --- Lightning's own functions, in this process ----------------------------------------------


def lightning_replaces(loader: DataLoader) -> bool:
    """Lightning's own check (``_DataConnector._requires_distributed_sampler``) in a distributed
    Trainer with the default ``use_distributed_sampler=True``: the two settings it reads."""
    from pytorch_lightning.trainer.connectors.data_connector import _DataConnector

    settings = SimpleNamespace(use_distributed_sampler=True, is_distributed=True)
    trainer = SimpleNamespace(_accelerator_connector=settings)
    return _DataConnector(trainer)._requires_distributed_sampler(loader)


data, labels = list(range(12)), [i % 3 for i in range(12)]
#: this package's samplers that are one rank's share, plain and resumable: each on rank 1 of 2
SHARES = [ds.DistributedSampler, ds.UnpaddedDistributedSampler, ds.InferenceSampler]
SHARES += [ds.DistributedSamplerWrapper, ds.ResumableDistributedSampler]
SHARES += [ds.ResumableUnpaddedDistributedSampler, ds.ResumableDistributedSamplerWrapper]


def OrderAhead(data: list, world: int, rank: int) -> ds.OrderAhead:  # named for its test id
    """OrderAhead over one rank's share: a share too."""
    return ds.OrderAhead(ds.DistributedSampler(data, world, rank))


SHARES += [OrderAhead]
#: the others passed as sampler=: to be split (not distributed), endless, a share but no subclass
OTHERS = {
    "WeightedBalanceClassSampler": lambda: ds.WeightedBalanceClassSampler(labels, [1, 1, 1], 12),
    "ResumableWeightedBalanceClassSampler": lambda: ds.ResumableWeightedBalanceClassSampler(
        labels, [1, 1, 1], 12
    ),
    "InfiniteSampler": lambda: ds.InfiniteSampler(data, 2, 1, seed=0),
    "RepeatFactorSampler": lambda: ds.RepeatFactorSampler([1.0] * 12, 2, 1, seed=0),
}


@pytest.mark.parametrize("share", SHARES, ids=lambda cls: cls.__name__)
def test_lightning_leaves_alone_every_sampler_here_that_is_one_ranks_share(share):
    """Invariant: our per-rank samplers, plain and resumable, are torch DistributedSamplers, and
    Lightning's own check in a distributed Trainer with the default setting replaces none."""
    sampler = share(data, 2, 1)
    assert isinstance(sampler, TorchDistributedSampler)
    assert not lightning_replaces(DataLoader(data, sampler=sampler))


@pytest.mark.parametrize("name", list(OTHERS))
def test_lightning_replaces_every_other_sampler_here(name):
    """Invariant: our samplers that are not one rank's share (the same epoch on every rank, or
    endless) are replaced by Lightning's own check with the default."""
    sampler = OTHERS[name]()
    assert not isinstance(sampler, TorchDistributedSampler)
    assert lightning_replaces(DataLoader(data, sampler=sampler))


@pytest.mark.parametrize("epoch", [0, 3])
def test_lightnings_wrapper_splits_a_sampler_that_is_not_distributed_across_the_ranks(epoch):
    """Invariant: WeightedBalanceClassSampler (one epoch, the same on every rank) gets Lightning's
    DistributedSamplerWrapper, which forwards set_epoch to it: the 2 ranks read that epoch's
    draws, together exactly once."""
    from pytorch_lightning.trainer.connectors.data_connector import _get_distributed_sampler

    shares = []
    for rank in range(2):
        sampler = OTHERS["WeightedBalanceClassSampler"]()  # each rank builds its own
        loader = DataLoader(data, sampler=sampler)
        replaced = _get_distributed_sampler(loader, True, 0, num_replicas=2, rank=rank)
        replaced.set_epoch(epoch)  # as Lightning calls it at the start of every epoch
        assert sampler.epoch == epoch
        shares.append(list(replaced))
    inner = OTHERS["WeightedBalanceClassSampler"]()
    inner.set_epoch(epoch)
    assert [len(s) for s in shares] == [6, 6]
    assert Counter(shares[0] + shares[1]) == Counter(inner)


def stopped(cls: type) -> type:
    """``cls`` whose every stream ends after 1000 indices (so that reading it whole ends),
    counting the indices it handed out."""

    class Stopped(cls):
        handed_out = 0

        def __iter__(self):
            for i in islice(super().__iter__(), 1000):
                self.handed_out += 1
                yield i

    return Stopped


@pytest.mark.parametrize("endless", [ds.InfiniteSampler, ds.RepeatFactorSampler])
def test_lightnings_wrapper_reads_an_endless_stream_to_its_end_before_the_first_index(endless):
    """Invariant: our endless streams (len is the dataset's size, as mmengine's) get Lightning's
    DistributedSamplerWrapper by default, and its first index comes only after it has read
    every index the stream has: the 1000 of a stream stopped there, an endless one never."""
    from pytorch_lightning.trainer.connectors.data_connector import _get_distributed_sampler

    first = data if endless is ds.InfiniteSampler else [1.0] * len(data)
    sampler = stopped(endless)(first, 2, 0, seed=0)
    loader = DataLoader(data, sampler=sampler)
    assert lightning_replaces(loader)
    replaced = _get_distributed_sampler(loader, True, 0, num_replicas=2, rank=0)
    assert type(replaced).__name__ == "DistributedSamplerWrapper" and len(replaced) == 6
    next(iter(replaced))
    assert sampler.handed_out == 1000


# --- accelerate --------------------------------------------------------------------------------


def accelerate_rank() -> dict[str, list]:
    """On each rank of a live group: one epoch of torch's sampler and of ours with the loader
    prepared (ours refuses: the error's first words), ours not prepared, then the page's recipe
    (docs/examples/frameworks_accelerate_fit.py)."""
    from accelerate import Accelerator
    from frameworks_accelerate_fit import train

    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == 2  # accelerate found the live group
    dataset = list(range(16))
    read: dict[str, list] = {}
    samplers = {"torch's": TorchDistributedSampler(dataset, seed=0), "ours": None}
    for who, prepare in (("torch's", True), ("ours", True), ("ours", False)):
        sampler = samplers[who] or ds.DistributedSampler(dataset, seed=0)  # world from the group
        loader = DataLoader(dataset, batch_size=2, sampler=sampler)
        if prepare:
            loader = accelerator.prepare(loader)
        try:
            read[f"{who} prepared={prepare}"] = [i for batch in loader for i in batch.tolist()]
        except RuntimeError as e:
            read[f"{who} prepared={prepare}"] = [str(e).split(":")[0]]
    read["a torch DistributedSampler"] = [isinstance(sampler, TorchDistributedSampler)]
    read["recipe"] = train(epochs=2)
    return read


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
def test_accelerate_prepare_splits_a_split_sampler_again_and_ours_refuses_it():
    """Invariant: on 2 real ranks, ``accelerator.prepare(loader)`` shards the batches of torch's
    already split sampler again (each rank reads 4 of 16, together 8): accelerate never looks
    at the sampler's class. Ours, a torch DistributedSampler too, refuses that on every rank
    before a batch, naming the wrapper; left unprepared, it reads disjoint halves that cover
    all 16; the page's recipe (prepare the model and optimizer, not the loader) trains with
    disjoint, covering shares and a new order each epoch."""
    ranks = run_world("test_frameworks:accelerate_rank", 2, timeout=240,
                      pythonpath=[TESTS, EXAMPLES])  # fmt: skip
    prepared = [r["torch's prepared=True"] for r in ranks]
    assert [r["a torch DistributedSampler"] for r in ranks] == [[True], [True]]
    assert [len(r) for r in prepared] == [4, 4]
    assert len(set(prepared[0]) | set(prepared[1])) == 8
    refused = "DistributedSampler already holds one rank's share (of num_replicas=2), and accelerate's BatchSamplerShard would split it again over 2 processes"
    assert [r["ours prepared=True"] for r in ranks] == [[refused], [refused]]
    assert sorted(ranks[0]["ours prepared=False"] + ranks[1]["ours prepared=False"]) == list(
        range(16)
    )
    for epoch in range(2):
        assert sorted(ranks[0]["recipe"][epoch] + ranks[1]["recipe"][epoch]) == list(range(16))
    assert ranks[0]["recipe"][0] != ranks[0]["recipe"][1]
