"""Pictures for docs/tutorials/weighted.md: class counts per epoch, ours vs WeightedRandomSampler."""

from __future__ import annotations

import torch
from _svg import bars
from torch.utils.data import WeightedRandomSampler

from distsampling import WeightedBalanceClassSampler

SIZES, WEIGHT, LENGTH, EPOCHS = [900, 90, 10], [2.0, 2.0, 1.0], 1000, 100


def class_counts() -> dict[str, dict[str, float]]:
    """Per class: the quota, ours (the same every epoch), torch's lowest and highest over EPOCHS."""
    labels = torch.repeat_interleave(torch.arange(3), torch.tensor(SIZES))
    per_sample = (torch.tensor(WEIGHT) / torch.tensor(SIZES))[labels]
    theirs = WeightedRandomSampler(per_sample, LENGTH, generator=torch.Generator().manual_seed(0))
    ours = WeightedBalanceClassSampler(labels, WEIGHT, LENGTH)
    counts_ours, counts_torch = [], []
    for epoch in range(EPOCHS):
        ours.set_epoch(epoch)
        counts_ours.append(torch.bincount(labels[list(ours)], minlength=3))
        counts_torch.append(torch.bincount(labels[list(theirs)], minlength=3))
    o, t = torch.stack(counts_ours), torch.stack(counts_torch)
    assert torch.equal(o.min(0).values, o.max(0).values)  # ours: one count per class
    return {
        f"class {c} ({SIZES[c]} samples)": {
            "a. quota": LENGTH * WEIGHT[c] / sum(WEIGHT),
            "b. ours, every epoch": float(o[0, c]),
            "c. torch, lowest epoch": float(t[:, c].min()),
            "d. torch, highest epoch": float(t[:, c].max()),
        }
        for c in range(3)
    }


def render() -> dict[str, str]:
    return {
        "weighted-counts.svg": bars(
            class_counts(),
            f"Draws per class in each of {EPOCHS} epochs of {LENGTH} (weights 2:2:1)",
            "draws",
        )
    }
