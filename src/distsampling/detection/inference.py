r"""InferenceSampler: every index exactly once, each rank one contiguous block, sizes within one.

Evaluation must see the exact dataset: no padding (it would count samples twice), nothing
dropped. detectron2's ``InferenceSampler`` gives rank ``r`` one contiguous block of
``0..N-1``; the first ``N % W`` ranks get one index more, so block sizes differ by at most one.
(Its older versions gave every rank ``ceil(N / W)`` indices and the last ranks what was left:
with ``N = 10`` on 4 ranks that is ``3, 3, 3, 1``.)

Contiguous blocks vs the strided split of :class:`~distsampling.UnpaddedDistributedSampler`:
a block reads neighbouring samples (one file region, one shard, good cache locality) and its
results are already in dataset order, so gathering the ranks' outputs is a concatenation in
rank order. The strided split spreads any ordering of the dataset (sorted by size or by
difficulty) evenly over the ranks, which balances their time; gathering it interleaves.

References:
    detectron2/data/samplers/distributed_sampler.py (InferenceSampler)
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sized

from torch.utils.data import DistributedSampler

from .._checks import check_int, check_len, resolve_world
from ..guards import refuse_split_again
from ..resume.state import check_consumed, check_state

__all__ = ["InferenceSampler", "inference_shard"]


def inference_shard(n: int, num_replicas: int, rank: int) -> range:
    r"""The contiguous block of ``range(n)`` that ``rank`` reads: the first ``n % W`` get one more.

    Args:
        n: length of the dataset.
        num_replicas: number of ranks ``W``.
        rank: this rank, in ``[0, W)``.

    Examples:
        >>> [inference_shard(10, 4, r) for r in range(4)]  # sizes 3, 3, 2, 2
        [range(0, 3), range(3, 6), range(6, 8), range(8, 10)]
    """
    n = check_int("n", n, low=0)
    num_replicas, rank = resolve_world(num_replicas, rank)  # both given: only checked
    size, extra = divmod(n, num_replicas)  # every rank gets `size`; ranks < extra one more
    begin = rank * size + min(rank, extra)  # the blocks of all ranks before this one
    return range(begin, begin + size + (rank < extra))


class InferenceSampler(DistributedSampler[int]):
    r"""Rank ``r`` reads one contiguous block of ``0..N-1``; together the ranks read each index once.

    Block sizes are ``N // W`` or one more (the first ``N % W`` ranks), so ranks may differ in
    length by one: don't call a collective per step in the evaluation loop (gather once at the
    end). Concatenating the ranks' outputs in rank order gives dataset order.

    A subclass of torch's ``DistributedSampler`` (one rank's share: frameworks leave it alone),
    whose ``__init__`` is not called. torch's attributes hold what a block reads: ``num_samples``
    is this block's length, ``total_size`` is ``N`` (the blocks' sum: nothing padded),
    ``shuffle`` and ``drop_last`` are ``False``, ``seed`` is ``0`` and never used; torch's
    ``set_epoch`` records ``epoch``, which moves no block.

    Args:
        dataset: anything with ``__len__``; only its length is used.
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.

    Examples:
        >>> [list(InferenceSampler(range(5), num_replicas=2, rank=r)) for r in (0, 1)]
        [[0, 1, 2], [3, 4]]
    """

    uneven_ranks = True  #: ranks read unequal counts by design (checks leave len out)

    shuffle, seed, drop_last, epoch = False, 0, False, 0  # in order: nothing drawn, padded, cut

    def __init__(
        self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None
    ) -> None:
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        self.dataset = dataset
        self.size = check_len("dataset", dataset)
        self.indices = inference_shard(self.size, self.num_replicas, self.rank)
        self.num_samples, self.total_size = len(self.indices), self.size  # this block; all blocks
        # where every iter() starts (a loaded position), and the latest iter()'s iterator
        self._start = 0
        self._it = iter(self.indices)
        self.epoch = 0  # a loaded position belongs to its epoch

    def __iter__(self) -> Iterator[int]:
        refuse_split_again(self)  # accelerate's prepare(loader) would split this share again
        if len(self.dataset) != self.size:
            raise RuntimeError(
                f"len(dataset) changed since this sampler was built from {self.size}, but got "
                f"len(dataset)={len(self.dataset)}: build a new sampler"
            )
        self._it = iter(self.indices[self._start :])
        return self._it  # a plain range iterator: nothing is counted per index

    @property
    def position(self) -> int:
        r"""Indices of this rank's block read: the loaded position plus the latest ``iter()``'s."""
        # a range iterator knows how many indices it has left
        return len(self.indices) - operator.length_hint(self._it)

    def __len__(self) -> int:
        return len(self.indices)

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch (blocks are the same every epoch); a position loaded for another epoch
        is dropped, so the next evaluation reads the whole block again."""
        epoch = check_int("epoch", epoch)
        if epoch != self.epoch:
            self._start, self._it = 0, iter(self.indices)
        self.epoch = epoch

    def state_dict(self, consumed: int | None = None) -> dict[str, object]:
        r"""How far this rank has read its block: small and JSON-serialisable; it names no rank.

        Args:
            consumed: indices of the latest ``iter()`` the loop used, when a plain ``DataLoader``
                with workers asked for more (``None``: all it handed out).
        """
        position, handed_out = self.position, self.position - self._start
        if consumed is not None:
            why = f"the latest iter() handed out {handed_out}"
            position = self._start + check_consumed(consumed, handed_out, why)
        return {
            "kind": "InferenceSampler",
            "version": 2,
            "size": self.size,
            "num_replicas": self.num_replicas,
            "epoch": self.epoch,
            "position": position,
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        r"""Every later ``iter()`` starts where the saved rank was, in this rank's block (no replay).

        Rank 0's state loads on every rank of the saved world: ranks read in step, so each
        read ``position`` indices, or its whole block when that is shorter (blocks differ by
        one). Until the shortest block ends, every rank saves that same state; after, a shorter
        block's end cannot tell whether the others read one more: save rank 0's. On another
        number of ranks the blocks are others: that is an error.
        """
        fields = ("num_replicas", "epoch", "position")
        state = check_state(state, "InferenceSampler", 2, {"size": self.size}, required=fields)
        if state["num_replicas"] != self.num_replicas:
            raise ValueError(
                f"state was saved on num_replicas={state['num_replicas']!r} ranks, but this "
                f"sampler has num_replicas={self.num_replicas}: an InferenceSampler resumes on "
                "the saved number of ranks only (its blocks depend on it); build it with that "
                "num_replicas, or evaluate from the start"
            )
        longest = len(inference_shard(self.size, self.num_replicas, 0))  # rank 0's block
        position = check_int("position", state["position"], low=0, high=longest)
        position = min(position, len(self.indices))  # a block shorter by one: read to its end
        self.epoch = check_int("epoch", state["epoch"])
        self._start, self._it = position, iter(self.indices[position:])
