from collections import Counter

from distsampling import SequentialWindowedDataset, window_indices

for drop_last in (False, True):
    dataset = SequentialWindowedDataset(10, window=4, seed=0, drop_last=drop_last)
    dataset.set_epoch(0)
    windows = window_indices(list(dataset), dataset.window, dataset.size)  # (len, window)
    reads = Counter(windows.flatten().tolist())
    print(
        f"drop_last={drop_last}: offset {dataset.offset}, {len(dataset)} windows", windows.tolist()
    )
    print("  read twice:", sorted(i for i, c in reads.items() if c == 2))
    print("  never read:", sorted(set(range(10)) - set(reads)))
