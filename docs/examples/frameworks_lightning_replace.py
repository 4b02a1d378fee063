from pytorch_lightning.trainer.connectors.data_connector import _get_distributed_sampler
from pytorch_lightning.utilities.data import _update_dataloader
from torch.utils.data import DataLoader
from torch.utils.data import DistributedSampler as TorchDistributedSampler

import distsampling as ds


def lightnings_default(loader: DataLoader, rank: int) -> DataLoader:
    """The training loader of Trainer(use_distributed_sampler=True), the default, on 2 ranks."""
    if isinstance(loader.sampler, TorchDistributedSampler):  # Lightning's test, nothing else
        return loader
    # a torch DistributedSampler for torch's Random/SequentialSampler, else Lightning's
    # DistributedSamplerWrapper around the sampler (training always asks for shuffle=True)
    sampler = _get_distributed_sampler(loader, True, 0, num_replicas=2, rank=rank)
    return _update_dataloader(loader, sampler)  # a batch_sampler is rebuilt around it, or refused


data, labels, rank = list(range(16)), [i % 4 for i in range(16)], 0
share = ds.DistributedSampler(data, num_replicas=2, rank=rank, seed=3)  # this rank's half
loaders = {
    "DistributedSampler": DataLoader(data, batch_size=4, sampler=share),
    "OrderAhead(DistributedSampler)": DataLoader(data, batch_size=4, sampler=ds.OrderAhead(share)),
    "WeightedBalanceClassSampler": DataLoader(
        data, batch_size=4, sampler=ds.WeightedBalanceClassSampler(labels, [1, 1, 1, 1], 16)
    ),
    "batch_sampler=BatchSampler(...)": DataLoader(
        data, batch_sampler=ds.BatchSampler(share, 4, False)
    ),
    "batch_sampler=GroupedBatchSampler(...)": DataLoader(
        data, batch_sampler=ds.GroupedBatchSampler(share, [i % 2 for i in data], 4)
    ),
}
for name, loader in loaders.items():
    ours = [i for batch in loader for i in batch.tolist()]
    try:
        trained = lightnings_default(loader, rank)
    except (TypeError, RuntimeError) as error:  # Lightning's refusal, or ours of its rebuild
        first = str(error).strip().split(",")[0]
        print(f"{name}: reads {ours}\n    Lightning: {type(error).__name__}: {first}")
        continue
    what = "left alone" if trained is loader else "replaced"
    read = [i for batch in trained for i in batch.tolist()]
    print(f"{name}: reads {ours}\n    Lightning: {what}, reads {read}")
