"""Train a tiny model with DistributedDataParallel, reading data through distsampling.

Run: torchrun --standalone --nproc_per_node=2 docs/examples/ddp_train.py
(The test suite also calls train() on real gloo ranks, and on nccl where CUDA is present.)
"""

import gc

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

from distsampling import DistributedSampler, assert_rank_consistent

N, FEATURES = 60, 4  # 60 samples split evenly over 2 or 3 ranks


class Regression(Dataset):
    """y = X @ w_true; each item also returns its index, so we can check who read what."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)  # the same data on every rank
        self.x = torch.randn(N, FEATURES, generator=g)
        self.y = self.x @ torch.tensor([1.0, -2.0, 3.0, 0.5])

    def __len__(self) -> int:
        return N

    def __getitem__(self, i):
        return i, self.x[i], self.y[i]


def train(backend: str = "gloo", epochs: int = 2) -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    torch.manual_seed(0)  # same initial weights (DDP also broadcasts rank 0's at wrap time)
    model = DDP(
        torch.nn.Linear(FEATURES, 1).to(device), device_ids=[rank] if backend == "nccl" else None
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    dataset = Regression()
    sampler = DistributedSampler(dataset, seed=0)  # num_replicas and rank from the group
    loader = DataLoader(dataset, batch_size=5, sampler=sampler)
    seen, losses, in_sync = [], [], True
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        assert_rank_consistent(sampler)  # every rank agrees on this epoch, or it raises
        seen.append([])
        for index, x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x.to(device)).squeeze(1), y.to(device))
            optimizer.zero_grad()
            loss.backward()  # DDP averages the gradients of all ranks here
            optimizer.step()
            seen[-1] += index.tolist()
            losses.append(loss.item())
            # after each step every rank must hold exactly the same parameters
            flat = torch.cat([p.detach().flatten() for p in model.parameters()])
            copies = [torch.empty_like(flat) for _ in range(world)]
            dist.all_gather(copies, flat)
            in_sync &= all(torch.equal(c, flat) for c in copies)
    half = len(losses) // epochs
    return {
        "seen": seen,
        "in_sync": in_sync,
        "first_epoch_loss": sum(losses[:half]) / half,
        "last_epoch_loss": sum(losses[-half:]) / half,
    }


def report(results: list[dict]) -> None:
    world = len(results)
    for epoch in range(len(results[0]["seen"])):
        shards = [set(r["seen"][epoch]) for r in results]
        disjoint = sum(map(len, shards)) == len(set().union(*shards)) == N
        print(
            f"epoch {epoch}: {world} ranks read disjoint shards covering all {N} samples: {disjoint}"
        )
    print(
        "parameters identical on every rank after every step:", all(r["in_sync"] for r in results)
    )
    print("loss fell:", all(r["last_epoch_loss"] < r["first_epoch_loss"] for r in results))


if __name__ == "__main__":
    dist.init_process_group("gloo")
    result = train()
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, result)
    if dist.get_rank() == 0:
        report(gathered)
    dist.barrier()  # rank 0 has reported: no rank tears down while another is still working
    gc.collect()  # free DDP's reference cycles while the group lives (else gloo may abort at exit)
    dist.destroy_process_group()
