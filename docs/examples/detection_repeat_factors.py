import math
from collections import Counter
from itertools import islice

from distsampling import RepeatFactorSampler, repeat_factors_from_category_frequency

# 200 images; the cars share images with people, dogs, giraffes and okapis (the same toy set
# draws the picture below)
in_images = {
    "person": range(0, 150),
    "car": range(140, 200),
    "dog": range(150, 170),
    "giraffe": range(170, 175),
    "okapi": range(175, 177),
}
images = [{c for c, where in in_images.items() if i in where} for i in range(200)]

factors = repeat_factors_from_category_frequency(images, repeat_thresh=0.1)
print("category  f(c)   r(c)  factors of its images")
for category, where in in_images.items():
    f = len(where) / 200
    mine = sorted({round(factors[i].item(), 2) for i in where})
    print(f"  {category:8} {f:.3f}  {max(1, math.sqrt(0.1 / f)):.2f}  {mine}")

# one rank reads 100 passes' worth; count each category's images per pass
sampler = RepeatFactorSampler(factors, num_replicas=1, rank=0, seed=0)
passes = 100
per_category = Counter(c for i in islice(sampler, int(passes * factors.sum())) for c in images[i])
print("images per pass: plain stream -> with repeat factors (mean over 100 passes)")
for category, where in in_images.items():
    print(f"  {category:8} {len(where):4} -> {per_category[category] / passes:6.1f}")
