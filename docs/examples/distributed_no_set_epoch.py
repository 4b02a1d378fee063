from distsampling import DistributedSampler

sampler = DistributedSampler(range(8), num_replicas=2, rank=0)
for epoch in range(3):
    # set_epoch forgotten: the generator is seeded with seed + 0 every time
    print(f"epoch {epoch}:", list(sampler))
for epoch in range(3):
    sampler.set_epoch(epoch)  # seeded with seed + epoch: a new order, the same on all ranks
    print(f"epoch {epoch}:", list(sampler))
