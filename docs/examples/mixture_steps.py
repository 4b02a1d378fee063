from distsampling import MixtureSampler

sampler = MixtureSampler([60000, 6000, 600], [0.5, 0.3, 0.2], 8, num_replicas=8, rank=3)
batches = sampler.batch_at(100_000)  # step 100,000: no replay, no index
print("rank 3 at step 100,000:", batches[3])

read = sampler.when_read(2, 17, pass_=3)  # source 2's sample 17 in its 4th pass
print(read)
print(sampler.batch_at(read.step)[read.rank][read.slot])  # index 66000 + 17
