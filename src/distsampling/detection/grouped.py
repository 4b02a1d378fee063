r"""GroupedBatchSampler: batches that each hold one group only (aspect-ratio grouping).

Detection models pad every image of a batch to the largest one, so a batch that mixes portrait
and landscape images is mostly padding. Grouping puts only images of one group (one aspect-ratio
bin) in a batch. The rule is maskrcnn-benchmark's: walk the sampler's pass, split each group's
indices (in sampler order) into runs of ``batch_size``, and emit the batches in the order their
*first* element appeared in the sampler.

The original builds a position map ``order[index] = position``, which silently loses an index
that the sampler yields twice in one pass (sampling with replacement: ``RandomSampler(...,
replacement=True)``, ``WeightedRandomSampler``). Here everything is done on *positions* of
the pass, with one stable sort, so every position is yielded exactly once, duplicates included.

References:
    maskrcnn_benchmark/data/samplers/grouped_batch_sampler.py (GroupedBatchSampler)
    detectron2/data/samplers/grouped_batch_sampler.py (a streaming variant: emits a batch when
    it is full, so its order differs)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

from .._checks import check_bool, check_int, check_int64
from ..guards import refuse_split_again
from ..resume.state import check_state
from ..wrapper import index_tensor

__all__ = ["GroupedBatchSampler"]


def _pass_tensor(sampler: object) -> torch.Tensor:
    """One pass of the sampler's indices as an int64 tensor, shape ``(m,)``."""
    return index_tensor(sampler).long()  # this package's samplers: indices(), no Python ints


def _dataset_len(sampler: object) -> int | None:
    # torch's samplers keep their dataset as .dataset (Distributed) or .data_source (Random,
    # Sequential); anything else gives no length to check group_ids against
    for name in ("dataset", "data_source"):
        source = getattr(sampler, name, None)
        if hasattr(source, "__len__"):
            return len(source)
    return None


class GroupedBatchSampler(Sampler[list[int]]):
    r"""Batch a sampler's indices so that every batch holds indices of one group only.

    Each position of the sampler's pass is yielded exactly once; with ``drop_uneven=True`` the
    incomplete last batch of each group is dropped instead (at most one per group). Batches come
    out ordered by the sampler position of their first element.

    ``len()`` iterates the sampler once and counts each group (``O(len(sampler))``, no batch is
    built): per group ``ceil(count / batch_size)`` batches (``floor`` with ``drop_uneven``).
    This project's ``DistributedSampler`` is read as a tensor, without Python ints.
    It equals the number of batches the next ``iter`` yields when the sampler yields the same
    indices both times (this project's samplers do, until ``set_epoch``).

    Args:
        sampler: a sampler, or any iterable of indices into ``group_ids``.
        group_ids: one integer group per dataset item (a sequence, array or 1-D tensor).
        batch_size: size of a batch, a positive ``int``.
        drop_uneven: drop each group's last batch if it is shorter than ``batch_size``.

    Examples:
        >>> groups = [0, 1, 0, 1, 1, 0, 0]  # e.g. 0 = landscape, 1 = portrait
        >>> list(GroupedBatchSampler(range(7), groups, batch_size=2))
        [[0, 2], [1, 3], [4], [5, 6]]
        >>> list(GroupedBatchSampler(range(7), groups, batch_size=2, drop_uneven=True))
        [[0, 2], [1, 3], [5, 6]]
    """

    def __init__(
        self,
        sampler: Sampler[int] | Iterable[int],
        group_ids: Sequence[int] | np.ndarray | torch.Tensor,
        batch_size: int,
        drop_uneven: bool = False,
    ) -> None:
        ids = np.asarray(group_ids)
        # integers (signed, unsigned) or bools; an empty list is float64 to numpy, and fine
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iub"):
            raise ValueError(
                "group_ids should be a 1-D sequence of integers (one group per dataset item), "
                f"but got group_ids of shape {ids.shape} and dtype {ids.dtype}"
            )
        expected = _dataset_len(sampler)
        if expected is not None and expected != len(ids):
            raise ValueError(
                "group_ids should have one entry per dataset item, but got "
                f"len(group_ids)={len(ids)} for a sampler over len(dataset)={expected}"
            )
        self.sampler = sampler
        self.batch_size = check_int64("batch_size", batch_size, low=1)
        self.drop_uneven = check_bool("drop_uneven", drop_uneven)
        # compact the group ids to 0..G-1 once: bincount and sort work on small integers
        ids_t = torch.from_numpy(ids.astype(np.int64))  # (N,)
        self.groups, inverse = torch.unique(ids_t, return_inverse=True)  # (G,), (N,)
        self.group_ids = inverse  # (N,) compact group of every dataset item
        # a loaded position: batches every iter() of its pass skips, and that pass's epoch
        self._skip, self._skip_epoch = 0, None
        self._yielded = 0  # batches handed out by the last iter(), its skip included
        self._epoch: object = None  # the inner sampler's epoch during that iter()

    def _pass(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One pass of the sampler as ``(indices, compact group of each position)``."""
        indices = _pass_tensor(self.sampler)  # (m,)
        n = len(self.group_ids)
        if len(indices) and not (0 <= int(indices.min()) and int(indices.max()) < n):
            bad = indices[(indices < 0) | (indices >= n)][0].item()
            raise IndexError(
                f"the sampler yielded index={bad}, but group_ids has len(group_ids)={n}: "
                "pass one group id per dataset item"
            )
        return indices, self.group_ids[indices]  # (m,), (m,)

    def __iter__(self) -> Iterator[list[int]]:
        # accelerate's prepare(loader) would split the share of its sampler again
        refuse_split_again(self, num_replicas=getattr(self.sampler, "num_replicas", 1))
        indices, gid = self._pass()  # (m,), (m,)
        b, m = self.batch_size, len(indices)
        # a stable sort by group keeps sampler order inside each group: positions, grouped
        order = torch.sort(gid, stable=True).indices  # (m,)
        counts = torch.bincount(gid)  # (G',) positions per group, up to the largest one read
        group_end = torch.cumsum(counts, 0)  # (G,) where each group's run ends in `order`
        group_start = group_end - counts  # (G,)
        sorted_gid = gid[order]  # (m,) group of each element of `order`
        # every batch_size-th element of a group's run starts a batch
        rank_in_group = torch.arange(m) - group_start[sorted_gid]  # (m,)
        starts = torch.nonzero(rank_in_group % b == 0).squeeze(1)  # (B,) batch starts in `order`
        ends = torch.minimum(starts + b, group_end[sorted_gid[starts]])  # (B,)
        if self.drop_uneven:
            full = ends - starts == b  # only each group's last batch can be short
            starts, ends = starts[full], ends[full]
        # emit batches by the sampler position of their first element (distinct: any sort works)
        emit = torch.argsort(order[starts])  # (B,)
        # resume: skip the first batches by slicing their bounds, none of them is built
        epoch = getattr(self.sampler, "epoch", None)
        if epoch != self._skip_epoch:  # a loaded position belongs to its pass: drop it
            self._skip = 0
        skip = self._skip  # where every iter() of the loaded pass starts
        starts, ends = starts[emit][skip:], ends[emit][skip:]
        flat = indices[order].tolist()  # the grouped pass as Python ints, once
        self._yielded, self._epoch = skip, epoch
        for s, e in zip(starts.tolist(), ends.tolist()):
            self._yielded += 1
            yield flat[s:e]

    def state_dict(self) -> dict[str, Any]:
        r"""``position``: batches handed out this pass; ``sampler``: the inner sampler's state.

        The inner sampler is read whole through ``indices()``, so its state names the
        pass (its epoch) and is never advanced by this sampler.
        """
        inner = getattr(self.sampler, "state_dict", None)
        inner_epoch = getattr(self.sampler, "epoch", None)
        return {
            "kind": type(self).__name__,
            "version": 1,
            "batch_size": self.batch_size,
            "drop_uneven": self.drop_uneven,
            "num_group_ids": len(self.group_ids),
            "sampler": inner() if callable(inner) else None,
            # batches of the last iter(), unless the inner sampler moved on to another epoch
            "position": self._yielded if self._epoch == inner_epoch else 0,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume at ``state``'s pass and batch: the next ``iter()`` skips the batches done.

        Only on the number of ranks the state was saved on, unless at a pass boundary
        (``position`` 0): grouped batches of other ranks are no prefix of the epoch, so no
        split of "the rest" over another world reads each sample once. That raises ValueError.

        Args:
            state: a :meth:`state_dict` of a sampler with the same batch size and group ids.
        """
        must_match = {
            "batch_size": self.batch_size,
            "drop_uneven": self.drop_uneven,
            "num_group_ids": len(self.group_ids),
        }
        state = check_state(
            state, type(self).__name__, 1, must_match, required=("sampler", "position")
        )
        position = check_int("position", state["position"], low=0)
        inner = state["sampler"]
        saved_world = inner.get("num_replicas") if isinstance(inner, dict) else None
        world = getattr(self.sampler, "num_replicas", None)
        if position and saved_world is not None and saved_world != world:
            raise ValueError(
                "GroupedBatchSampler resumes mid-pass only on the number of ranks it was saved "
                f"on: num_replicas was {saved_world} when saved, but is {world} "
                f"now (position={position} batches). Resume on {saved_world} ranks, or from the "
                "start of a pass (a state saved at position 0 loads on any number of ranks)."
            )
        if inner is not None:
            self.sampler.load_state_dict(inner)  # type: ignore[union-attr]
        most = len(self)
        self._skip = self._yielded = check_int("position", position, low=0, high=most)
        self._skip_epoch = self._epoch = getattr(self.sampler, "epoch", None)

    def __len__(self) -> int:
        _, gid = self._pass()
        counts = torch.bincount(gid)  # (G',) positions per group; a group never read counts 0
        if self.drop_uneven:
            return int((counts // self.batch_size).sum())
        return int(((counts + self.batch_size - 1) // self.batch_size).sum())
