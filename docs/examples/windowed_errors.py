from distsampling import SequentialWindowedDataset

bad_arguments = [
    {"size": 0, "window": 1},  # no data
    {"size": 10, "window": 0},  # an empty window
    {"size": 10, "window": 11},  # a window longer than the data
    {"size": 10, "window": True},  # a bool is not taken for 1
    {"size": 10, "window": 3, "seed": -1},  # seeds feed numpy's SeedSequence: >= 0
]
for kwargs in bad_arguments:
    try:
        SequentialWindowedDataset(**kwargs)
    except (TypeError, ValueError) as err:
        print(f"{type(err).__name__}: {err}")
try:
    SequentialWindowedDataset(10, 3).set_epoch(-1)
except ValueError as err:
    print(f"{type(err).__name__}: {err}")
