import torch
from torch.utils.data import ConcatDataset, DataLoader, TensorDataset

from distsampling import MixtureSampler

# three datasets (web text, code, books); here each item is (its dataset, its sample number)
datasets = [TensorDataset(torch.full((n,), k), torch.arange(n)) for k, n in enumerate([600, 60, 6])]
sampler = MixtureSampler(
    [len(d) for d in datasets], [0.5, 0.3, 0.2], batch_size=4, num_replicas=2, rank=1
)
# batch_size is the sampler's micro-batch: each batch of the loader is one training step
loader = DataLoader(ConcatDataset(datasets), batch_size=4, sampler=sampler)
for step, (source, sample) in zip(range(3), loader):
    print(f"step {step}:", " ".join(f"{k}:{i}" for k, i in zip(source.tolist(), sample.tolist())))
    concat = [sampler.offsets[k] + i for k, i in zip(source.tolist(), sample.tolist())]
    assert concat == sampler.batch_at(step)[1]  # rank 1's micro-batch of that step
