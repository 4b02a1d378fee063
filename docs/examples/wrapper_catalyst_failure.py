# GlobalRNGClassSampler and CatalystStyleWrapper: the block above (wrapper_catalyst_style.py)
import numpy as np

from distsampling import DistributedSamplerWrapper, WeightedBalanceClassSampler

labels = [i % 4 for i in range(800)]  # 4 classes of 200 samples
counts = [40, 80, 120, 160]  # 400 draws per epoch, no class drawn beyond its size
world = 4
for name in ("catalyst-style", "distsampling"):
    reads = []
    for rank in range(world):
        np.random.seed(rank)  # each process has its own global numpy state (or none at all)
        if name == "catalyst-style":
            inner = GlobalRNGClassSampler(labels, counts)  # noqa: F821
            sampler = CatalystStyleWrapper(inner, num_replicas=world, rank=rank)  # noqa: F821
        else:
            inner = WeightedBalanceClassSampler(labels, counts, length=400)
            sampler = DistributedSamplerWrapper(inner, num_replicas=world, rank=rank)
        reads += list(sampler)
    print(f"{name}: {len(reads)} reads, {len(set(reads))} distinct samples")
