from distsampling import DistributedSampler

samples = list(range(1, 11))  # the user's data: 1..10
for epoch in range(2):
    for rank in range(2):  # in real training each rank is its own process
        sampler = DistributedSampler(samples, num_replicas=2, rank=rank, seed=0)
        sampler.set_epoch(epoch)
        print(f"epoch {epoch} rank {rank}:", [samples[i] for i in sampler])
