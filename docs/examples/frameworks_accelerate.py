from accelerate.data_loader import prepare_data_loader
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler  # torch's: ours refuses this split

dataset = list(range(16))
for rank in range(2):  # as on 2 processes
    share = DistributedSampler(dataset, num_replicas=2, rank=rank, seed=0)  # this rank's half
    loader = DataLoader(dataset, batch_size=2, sampler=share)
    # what accelerator.prepare(loader) does on 2 processes (it calls this function):
    prepared = prepare_data_loader(loader, num_processes=2, process_index=rank, put_on_device=False)
    print(f"rank {rank}: the share reads {list(share)}")
    print(f"        prepared reads {[i for batch in prepared for i in batch.tolist()]}")
