from pytorch_lightning.trainer.connectors.data_connector import _get_distributed_sampler
from torch.utils.data import DataLoader

from distsampling import DistributedSampler

dataset = list(range(16))
for rank in range(2):  # as on 2 devices, each rank its own process
    ours = DistributedSampler(dataset, num_replicas=2, rank=rank, seed=0)  # this rank's half
    loader = DataLoader(dataset, sampler=ours)
    # what Trainer(use_distributed_sampler=True), the default, puts in its place:
    replaced = _get_distributed_sampler(loader, True, 0, num_replicas=2, rank=rank)
    print(f"rank {rank}: ours reads {list(ours)}")
    print(f"        Lightning's {type(replaced).__name__} reads {list(replaced)}")
