from distsampling import GroupedBatchSampler, make_data_sampler

ratios = [0.75, 1.33, 0.75, 0.56, 1.5, 0.75, 1.33, 0.66, 0.75, 1.25, 0.75, 1.5]
sampler = make_data_sampler(ratios, True, distributed=True, num_replicas=2, rank=0)
batches = GroupedBatchSampler(sampler, [int(r >= 1) for r in ratios], batch_size=2)


def counter_only(batch_sampler, num_iterations: int, start_iter: int):
    """The faulty resume: start the counter at start_iter, and seed each pass by the counter."""
    iteration = start_iter
    while iteration < num_iterations:
        batch_sampler.sampler.set_epoch(iteration)  # the epoch of a pass depends on start_iter
        for batch in batch_sampler:
            if iteration == num_iterations:
                return
            iteration += 1
            yield batch


print("uninterrupted:", list(counter_only(batches, 9, 0)))
print("resumed at 5: ", list(counter_only(batches, 9, 5)))
