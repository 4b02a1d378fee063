"""Pictures for docs/tutorials/detection.md: images per category and pass, before and after
repeat factors, on a long-tailed toy dataset."""

from __future__ import annotations

from collections import Counter
from itertools import islice

from _svg import bars

from distsampling import RepeatFactorSampler, repeat_factors_from_category_frequency

#: 200 images; where each category occurs (the same toy set as the tutorial's example)
IN_IMAGES = {
    "person": range(0, 150),
    "car": range(140, 200),
    "dog": range(150, 170),
    "giraffe": range(170, 175),
    "okapi": range(175, 177),
}
PASSES, THRESH = 100, 0.1


def counts_per_pass() -> dict[str, dict[str, float]]:
    """Per category: its images in one pass of the plain stream, and per pass (mean over
    PASSES) of the repeat-factor stream."""
    images = [{c for c, where in IN_IMAGES.items() if i in where} for i in range(200)]
    factors = repeat_factors_from_category_frequency(images, THRESH)
    sampler = RepeatFactorSampler(factors, num_replicas=1, rank=0, seed=0)
    read = islice(sampler, int(PASSES * factors.sum()))
    seen = Counter(c for i in read for c in images[i])
    return {
        f"{category} (in {len(where)} images)": {
            "a. plain stream": float(len(where)),
            "b. repeat factors, mean": seen[category] / PASSES,
        }
        for category, where in IN_IMAGES.items()
    }


def render() -> dict[str, str]:
    return {
        "detection-repeat-factors.svg": bars(
            counts_per_pass(),
            f"Images per pass by category, before and after repeat factors (t = {THRESH})",
            "images",
        )
    }
