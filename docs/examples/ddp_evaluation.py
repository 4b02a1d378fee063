from distsampling import DistributedSampler, UnpaddedDistributedSampler, merge_by_index

n, world = 10, 3
correct = [i < 3 for i in range(n)]  # the true accuracy is 3 / 10
for Sampler in (DistributedSampler, UnpaddedDistributedSampler):
    shares = [list(Sampler(range(n), world, rank, shuffle=False)) for rank in range(world)]
    naive = sum(correct[i] for s in shares for i in s) / sum(map(len, shares))
    merged = merge_by_index([(s, [correct[i] for i in s]) for s in shares], n)
    print(f"{Sampler.__name__}: shares {shares}")
    print(f"  naive mean over all ranks {naive:.3f}; merged by index {sum(merged) / n:.3f}")
