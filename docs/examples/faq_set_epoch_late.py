from torch.utils.data import DataLoader, DistributedSampler

sampler = DistributedSampler(range(8), num_replicas=2, rank=0, seed=0)
loader = DataLoader(range(8), batch_size=2, sampler=sampler, num_workers=2)

batches = iter(loader)  # what `for batch in loader` does first: workers get their indices now
sampler.set_epoch(1)  # too late: this iteration already holds epoch 0's order
print("set_epoch after iter(loader): ", [b.tolist() for b in batches])
sampler.set_epoch(2)
print("set_epoch before iter(loader):", [b.tolist() for b in loader])  # epoch 2's order
