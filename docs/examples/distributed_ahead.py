"""A large dataset: each epoch's order is drawn while the one before it trains."""

from torch.utils.data import DataLoader

from distsampling import DistributedSampler, OrderAhead

data = list(range(10))
sampler = OrderAhead(DistributedSampler(data, num_replicas=2, rank=0, seed=0))
loader = DataLoader(data, batch_size=5, sampler=sampler, num_workers=2)
plain = DistributedSampler(data, num_replicas=2, rank=0, seed=0)  # the same, without OrderAhead

for epoch in [0, 1, 2, 2, 5]:  # 1 and 2 follow the epoch before them: drawn during it
    sampler.set_epoch(epoch)  # the usual call; a repeat or a jump is drawn now, as without
    plain.set_epoch(epoch)
    batches = [batch.tolist() for batch in loader]  # the training epoch
    print(f"epoch {epoch}: {batches}, DistributedSampler alone: {list(plain)}")
