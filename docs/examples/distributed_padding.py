from distsampling import DistributedSampler

for drop_last in (False, True):
    ranks = [
        DistributedSampler(range(10), 3, r, shuffle=False, drop_last=drop_last) for r in range(3)
    ]
    print(
        f"drop_last={drop_last}: num_samples={ranks[0].num_samples}, total_size={ranks[0].total_size}"
    )
    for rank, sampler in enumerate(ranks):
        print(f"  rank {rank}:", list(sampler))
