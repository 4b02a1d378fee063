from collections import Counter

from distsampling import WeightedBalanceClassSampler

# 1000 samples, badly imbalanced: 900 "ok", 90 "scratch", 10 "crack"
labels = ["ok"] * 900 + ["scratch"] * 90 + ["crack"] * 10
weight = {"ok": 2, "scratch": 2, "crack": 1}  # per class, any scale
sampler = WeightedBalanceClassSampler(labels, weight, length=1000, seed=0)

print("classes:          ", sampler.classes)  # the sorted distinct labels
print("class sizes:      ", sampler.class_sizes)
print("samples per class:", sampler.samples_per_class)  # the same every epoch
for epoch in range(2):
    sampler.set_epoch(epoch)  # a new draw per epoch, from (seed, epoch) alone
    indices = list(sampler)
    drawn = Counter(labels[i] for i in indices)
    print(
        f"epoch {epoch}: first indices {indices[:5]}, per class",
        [drawn[c] for c in sampler.classes],
    )
