"""Start here: torchrun --standalone --nproc_per_node=2 ddp_template.py (CPU: gloo, GPUs: nccl)."""

import gc
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

from distsampling import DistributedSampler  # or torch.utils.data.distributed.DistributedSampler


def main(epochs: int = 3) -> None:
    device = torch.device(f"cuda:{os.getenv('LOCAL_RANK')}" if torch.cuda.is_available() else "cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")  # torchrun set RANK, ...
    x = torch.randn(1000, 8, generator=torch.Generator().manual_seed(0))  # the same on every rank
    dataset = TensorDataset(x, x.sum(1, keepdim=True))  # a target to learn: y = x0 + ... + x7
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)  # rank and world from the group
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)  # no shuffle=True here
    model = DDP(torch.nn.Linear(8, 1).to(device))  # rank 0's initial weights, sent to every rank
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # a new order every epoch, the same on every rank
        total = torch.zeros(2, device=device)  # (sum of losses, samples) on this rank
        for xb, yb in loader:
            loss = torch.nn.functional.mse_loss(model(xb.to(device)), yb.to(device))
            optimizer.zero_grad()
            loss.backward()  # DDP averages the gradients over the ranks here
            optimizer.step()
            total += torch.tensor([loss.item() * len(xb), len(xb)], device=device)
        dist.all_reduce(total)  # summed over all ranks
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {total[0] / total[1]:.4f} over {int(total[1])} samples")
    gc.collect()  # free DDP's reference cycles while the group lives, or gloo may abort at exit
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
