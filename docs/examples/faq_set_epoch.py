from torch.utils.data import DistributedSampler

sampler = DistributedSampler(range(8), num_replicas=2, rank=0, seed=0)
for epoch in range(3):
    print(f"no set_epoch, epoch {epoch}:", list(sampler))  # seeded with seed + 0 every time
for epoch in range(3):
    sampler.set_epoch(epoch)  # seeded with seed + epoch: a new order, the same on every rank
    print(f"set_epoch({epoch}):          ", list(sampler))
