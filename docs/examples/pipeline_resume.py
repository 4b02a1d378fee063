from distsampling import make_batch_data_sampler, make_data_sampler

ratios = [0.75, 1.33, 0.75, 0.56, 1.5, 0.75, 1.33, 0.66, 0.75, 1.25, 0.75, 1.5]
sampler = make_data_sampler(ratios, True, distributed=True, num_replicas=2, rank=0)


def run(start_iter: int) -> list[list[int]]:
    """This rank's batches for a 9-iteration run resumed after `start_iter` iterations."""
    return list(make_batch_data_sampler(ratios, sampler, [1.0], 2, 9, start_iter=start_iter))


uninterrupted = run(0)
print("uninterrupted:", uninterrupted)
print("resumed at 5: ", run(5))
print("exact for every k:", all(run(k) == uninterrupted[k:] for k in range(10)))
