from torch.utils.data import DataLoader

# the copied files, as a reader's project holds them: windowed.py and wrapper.py
from distsampling.windowed import SequentialWindowedDataset
from distsampling.wrapper import DistributedSamplerWrapper

windows = SequentialWindowedDataset(100, window=10, seed=0)
sampler = DistributedSamplerWrapper(windows, num_replicas=2, rank=0, seed=0)  # yields starts
starts_of = range(100)  # item `start` is the start itself: a real series reads its rows there
loader = DataLoader(
    starts_of, batch_size=5, sampler=sampler, num_workers=2, persistent_workers=True
)
for epoch in range(3):
    sampler.set_epoch(epoch)  # sets the windows' epoch too; the starts are drawn at iter()
    starts = [s for batch in loader for s in batch.tolist()]
    print(f"epoch {epoch}, offset {windows.offset:2}: starts {sorted(starts)}")
del loader  # stops the persistent workers
