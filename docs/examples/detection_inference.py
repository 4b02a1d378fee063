from distsampling import InferenceSampler, UnpaddedDistributedSampler, merge_by_index

n, world = 10, 3
splits = {
    "contiguous": lambda rank: InferenceSampler(range(n), world, rank),
    "strided": lambda rank: UnpaddedDistributedSampler(range(n), world, rank, shuffle=False),
}
for name, sampler_of in splits.items():
    per_rank = [list(sampler_of(rank)) for rank in range(world)]
    # each rank evaluates its share: one result per index
    results = [(indices, [f"p{i}" for i in indices]) for indices in per_rank]
    print(f"{name}: {per_rank}")
    print("  concatenated in rank order:", [r for _, rs in results for r in rs])
    print("  merged by index:           ", merge_by_index(results, n))
