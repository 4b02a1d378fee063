import torch
from torch.utils.data import WeightedRandomSampler

from distsampling import WeightedBalanceClassSampler

sizes, weight, length = [900, 90, 10], [2.0, 2.0, 1.0], 1000
labels = torch.repeat_interleave(torch.arange(3), torch.tensor(sizes))  # classes 0, 1, 2
# torch weighs samples: give each sample w_c / n_c, so class c is drawn with share w_c / sum(w)
per_sample = (torch.tensor(weight) / torch.tensor(sizes))[labels]
theirs = WeightedRandomSampler(per_sample, length, generator=torch.Generator().manual_seed(1))
ours = WeightedBalanceClassSampler(labels, weight, length)

print("expected per epoch:", [length * w / sum(weight) for w in weight])
for epoch in range(5):
    ours.set_epoch(epoch)
    counts_ours = torch.bincount(labels[list(ours)], minlength=3).tolist()
    counts_torch = torch.bincount(labels[list(theirs)], minlength=3).tolist()
    print(f"epoch {epoch}: distsampling {counts_ours}   torch {counts_torch}")
