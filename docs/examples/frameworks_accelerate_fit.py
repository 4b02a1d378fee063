import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader

from distsampling import DistributedSampler


def train(epochs: int = 2) -> list[list[int]]:
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = accelerator.prepare(model, optimizer)  # not the DataLoader
    dataset = torch.arange(16.0)
    world, rank = accelerator.num_processes, accelerator.process_index
    sampler = DistributedSampler(dataset, world, rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=2, sampler=sampler)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)  # accelerate does not call it for an unprepared loader
        seen.append([])
        for x in loader:
            loss = model(x.to(accelerator.device).unsqueeze(1)).pow(2).mean()
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            seen[-1] += [int(i) for i in x]
    return seen
