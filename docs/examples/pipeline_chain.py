from distsampling import make_batch_data_sampler, make_data_sampler

# twelve images, height / width: below 1 is landscape (L), 1 or more is portrait (P)
ratios = [0.75, 1.33, 0.75, 0.56, 1.5, 0.75, 1.33, 0.66, 0.75, 1.25, 0.75, 1.5]


def show(indices) -> str:
    return " ".join(f"{i}{'L' if ratios[i] < 1 else 'P'}" for i in indices)


for rank in range(2):
    sampler = make_data_sampler(ratios, True, distributed=True, num_replicas=2, rank=rank)
    batches = make_batch_data_sampler(ratios, sampler, aspect_grouping=[1.0], batch_size=2)
    print(f"rank {rank} reads:   {show(sampler)}")
    print(f"rank {rank} batches: {' | '.join(show(b) for b in batches)}")
