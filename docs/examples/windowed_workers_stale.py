import numpy as np
from torch.utils.data import DataLoader, Dataset


class PlainAttributeStarts(Dataset):
    """Starts rebuilt once per epoch into a plain attribute (the array design)."""

    def __init__(self, size: int, window: int) -> None:
        self.size, self.grid = size, np.arange(0, size, window)
        self.starts = self.grid

    def set_epoch(self, epoch: int) -> None:
        offset = np.random.default_rng(epoch).integers(self.size)
        self.starts = (self.grid + offset) % self.size  # changes the main process's copy only

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> int:
        return int(self.starts[index])


stale = PlainAttributeStarts(100, window=10)
loader = DataLoader(stale, batch_size=5, num_workers=2, persistent_workers=True)
for epoch in range(3):
    stale.set_epoch(epoch)
    starts = [s for batch in loader for s in batch.tolist()]
    print(f"epoch {epoch}: main process {stale.starts[0]:2}, workers served {starts[0]:2}")
