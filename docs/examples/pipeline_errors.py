from distsampling import GroupedBatchSampler, make_batch_data_sampler, make_data_sampler

ratios = [0.75, 1.33]
sampler = make_data_sampler(ratios, shuffle=False, distributed=False)
bad_arguments = [
    {"aspect_grouping": []},  # no bin edge
    {"aspect_grouping": [1.5, 1.0]},  # edges out of order
    {"batch_size": 0},
    {"num_iters": 4, "start_iter": -1},
    {"num_iters": 4, "start_iter": 5},  # resuming past the end of the run
    {"start_iter": 2},  # a resume point without a run length
]
for kwargs in bad_arguments:
    try:
        make_batch_data_sampler(
            ratios, sampler, **{"aspect_grouping": [1.0], "batch_size": 2, **kwargs}
        )
    except (TypeError, ValueError) as err:
        print(f"{type(err).__name__}: {err}")
try:
    GroupedBatchSampler(sampler, group_ids=[0, 1, 0], batch_size=2)  # one id too many
except ValueError as err:
    print(f"{type(err).__name__}: {err}")
