from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class Stream(IterableDataset):
    def __init__(self, n: int, split: bool) -> None:
        self.n, self.split = n, split

    def __iter__(self):
        info = get_worker_info()  # None in the main process
        if not self.split or info is None:
            return iter(range(self.n))  # every worker runs this same loop: duplicates
        return iter(range(info.id, self.n, info.num_workers))  # worker w: w, w + W, ...


for split in (False, True):
    loader = DataLoader(Stream(6, split), batch_size=None, num_workers=2)
    print(f"split by worker={split}:", sorted(int(i) for i in loader))
