from distsampling import make_batch_data_sampler, make_data_sampler

ratios = [0.75, 1.33, 0.75, 0.56, 1.5, 0.75, 1.33, 0.66, 0.75, 1.25, 0.75, 1.5]

for rank in range(2):
    sampler = make_data_sampler(ratios, True, distributed=True, num_replicas=2, rank=rank)
    per_epoch = [len(make_batch_data_sampler(ratios, sampler, [1.0], 2))]  # epoch 0
    for epoch in (1, 2):
        sampler.set_epoch(epoch)
        per_epoch.append(len(make_batch_data_sampler(ratios, sampler, [1.0], 2)))
    fixed = make_batch_data_sampler(ratios, sampler, [1.0], 2, num_iters=10)
    print(f"rank {rank}: batches in epochs 0-2 {per_epoch}, with num_iters=10: {len(list(fixed))}")
