import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from distsampling import make_batch_data_sampler, make_data_sampler


class Images(Dataset):
    """Eight blank images of two shapes; get_img_info gives a size without loading the image."""

    sizes = ((480, 640), (640, 480)) * 4  # (height, width)

    def __len__(self) -> int:
        return len(self.sizes)

    def get_img_info(self, i: int) -> dict:
        return {"height": self.sizes[i][0], "width": self.sizes[i][1]}

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.zeros(3, *self.sizes[i])  # (3, H, W)


def pad_to_largest(images: list[torch.Tensor]) -> torch.Tensor:
    """Detection codebases pad a batch to its largest height and width: (B, 3, H, W)."""
    h, w = max(im.shape[1] for im in images), max(im.shape[2] for im in images)
    return torch.stack([F.pad(im, (0, w - im.shape[2], 0, h - im.shape[1])) for im in images])


dataset = Images()
start_iter = 3  # read from the checkpoint; 0 for a new run
sampler = make_data_sampler(dataset, True, distributed=True, num_replicas=2, rank=0)
batch_sampler = make_batch_data_sampler(
    dataset, sampler, [1.0], 2, num_iters=6, start_iter=start_iter
)
loader = DataLoader(dataset, batch_sampler=batch_sampler, collate_fn=pad_to_largest)
for iteration, images in enumerate(loader, start=start_iter):
    print(f"iteration {iteration}: images {tuple(images.shape)}")
