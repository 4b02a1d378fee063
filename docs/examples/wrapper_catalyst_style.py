# A catalyst-style pipeline, written for this page (not catalyst's code): the inner sampler
# draws from the *global* numpy RNG, and the wrapper neither seeds nor forwards set_epoch.
import numpy as np
from torch.utils.data import Dataset, DistributedSampler, Sampler


class GlobalRNGClassSampler(Sampler[int]):
    """Fixed per-class counts, members drawn with np.random: the process's global RNG."""

    def __init__(self, labels, samples_per_class):
        self.by_class = {c: np.flatnonzero(np.asarray(labels) == c) for c in sorted(set(labels))}
        self.counts = samples_per_class

    def __iter__(self):
        drawn = []
        for members, k in zip(self.by_class.values(), self.counts):
            drawn += np.random.choice(members, k, replace=k > len(members)).tolist()
        np.random.shuffle(drawn)  # global state: each process draws its own epoch
        return iter(drawn)

    def __len__(self):
        return sum(self.counts)


class ListFromSampler(Dataset):
    """The inner epoch as a Python list, built on first access."""

    def __init__(self, sampler):
        self.sampler, self.items = sampler, None

    def __getitem__(self, i):
        if self.items is None:
            self.items = list(self.sampler)
        return self.items[i]

    def __len__(self):
        return len(self.sampler)


class CatalystStyleWrapper(DistributedSampler):
    """torch's DistributedSampler over the list; no seed/drop_last passed, set_epoch not forwarded."""

    def __init__(self, sampler, num_replicas, rank, shuffle=True):
        super().__init__(ListFromSampler(sampler), num_replicas, rank, shuffle=shuffle)
        self.sampler = sampler

    def __iter__(self):
        self.dataset = ListFromSampler(self.sampler)  # a new inner epoch every iter
        return iter([self.dataset[p] for p in super().__iter__()])
