r"""TokenBudgetBatchSampler: batches by a token budget, the same number on every rank.

Text and speech samples differ in length, so batches are built by a budget of tokens, not a
count: similar lengths go together and a batch holds as many as fit. Under DDP every rank must
yield the same number of batches (or the last all-reduce waits forever), and the ranks' batches
of one step should cost about the same (or every rank waits for the heaviest one). So the
whole epoch is planned once, identically on every rank, from ``(lengths, seed, epoch)``:

1. buckets: the distinct lengths, in order, are cut into ``num_buckets`` buckets holding about
   equal numbers of tokens; the samples are shuffled, then stably sorted by bucket, so each
   bucket is shuffled within itself and the buckets come in increasing length;
2. batches: with ``cost="padded"`` (longest length x batch size), a bucket whose longest sample
   has length ``h`` is cut into batches of ``max_tokens // h`` samples (a batch's leftover
   carries on into the next, longer bucket); with ``cost="sum"`` a batch is closed when the
   next sample would exceed the budget;
3. steps: the batches, sorted by cost, are cut into runs of ``num_replicas`` (the lightest
   ``n % num_replicas`` left over), the runs shuffled, the leftover last: rank ``r`` reads the
   ``r``-th batch of every step. The last step is filled up with the plan's first batches
   (as DistributedSampler pads) or dropped with ``drop_last``.

Since steps are runs of neighbours in cost order, the spreads (heaviest - lightest batch) of all
the steps of a plan (a padded last step aside) add up to at most the heaviest batch's cost minus
the lightest's, below ``max_tokens``: at most ``k`` steps spread more than ``max_tokens / k``.

Resume: the state is the steps done. On another number of ranks the batches left (the plan's
batches read in step order are consumed as a prefix) are planned again in steps of the new world.

References:
    lhotse/dataset/sampling/dynamic_bucketing.py (DynamicBucketingSampler: duration buckets)
    transformers/trainer_pt_utils.py (DistributedLengthGroupedSampler: megabatches by length)
    fairseq/data/data_utils.py (batch_by_size: max_tokens)
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

from .._checks import check_bool, check_int, check_int64, check_seed, resolve_world
from ..guards import refuse_split_again
from ..resume.state import EpochHandle, check_consumed, check_state

__all__ = ["TokenBudgetBatchSampler"]


def _check_lengths(lengths: object, max_tokens: int) -> np.ndarray:
    """``lengths`` as a 1-D integer array ``(N,)``; every length in ``[1, max_tokens]``."""
    if isinstance(lengths, torch.Tensor):
        lengths = lengths.detach().cpu().numpy()
    array, ints = np.asarray(lengths), False
    if array.ndim == 1 and array.dtype.kind in "fO" and isinstance(lengths, Sequence):
        try:  # ints past int64 (numpy: object), or numpy's uint64 among ints (numpy: float64)
            array, ints = np.array([operator.index(x) for x in lengths], dtype=object), True
        except TypeError:
            pass  # floats, None, ...: refused below
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu" and not ints):
        raise TypeError(
            "lengths should be a 1-D sequence of integers (one length per sample), but got "
            f"lengths of shape {array.shape} and dtype {array.dtype}"
        )
    if array.size:
        low, high = int(array.argmin()), int(array.argmax())
        if array[low] < 1:
            raise ValueError(
                f"lengths should be >= 1, but got lengths[{low}]={array[low]}: a sample of no "
                "tokens costs nothing, so a batch of them would have no bound"
            )
        if array[high] > max_tokens:
            raise ValueError(
                f"every sample should fit in max_tokens={max_tokens}, but got lengths[{high}]="
                f"{array[high]}: raise max_tokens, or cut or drop the samples longer than it"
            )
    return array.astype(np.int32 if max_tokens < 2**31 else np.int64)


def _buckets(lengths: np.ndarray, num_buckets: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(bucket of every sample (N,), longest length (K,), samples (K,))`` of non-empty buckets.

    The distinct lengths, ascending, are cut where the tokens so far cross ``k / num_buckets``
    of all tokens: one length never spans two buckets, and long samples get narrow buckets.
    """
    if int(lengths.max()) <= 1 << 24:  # a histogram over the lengths, O(N)
        counts = np.bincount(lengths)
        values = np.flatnonzero(counts)  # (V,) distinct lengths, ascending
        counts = counts[values]
    else:
        values, counts = np.unique(lengths, return_counts=True)
    tokens = values.astype(np.int64) * counts  # (V,)
    if int(values[-1]) * len(lengths) >= 2**63:  # all tokens may pass int64: Python ints
        tokens = values.astype(object) * counts
    before = np.cumsum(tokens) - tokens  # tokens of all shorter lengths
    total = int(tokens.sum())
    k = min(num_buckets, total)  # more buckets than tokens cut no finer
    exact = before if total * k < 2**63 else before.astype(object)  # past int64: Python ints
    of_value = (exact * k // total).astype(np.int64)  # (V,) bucket, nondecreasing
    kept, of_value = np.unique(of_value, return_inverse=True)  # renumber the non-empty ones
    longest = np.zeros(len(kept), np.int64)
    np.maximum.at(longest, of_value, values)  # (K,)
    sizes = np.bincount(of_value, weights=counts).astype(np.int64)  # (K,)
    dtype = np.int16 if len(kept) < 2**15 else np.int32  # 16 bits: numpy's stable sort is a radix
    if values[-1] <= 1 << 24:  # a lookup table: one gather instead of a search per sample
        table = np.zeros(values[-1] + 1, dtype)
        table[values] = of_value
        return table[lengths], longest, sizes
    return of_value.astype(dtype)[np.searchsorted(values, lengths)], longest, sizes


class TokenBudgetBatchSampler(Sampler[list[int]]):
    r"""Yield this rank's batches, each within ``max_tokens``; every rank the same number.

    Every rank computes the same plan of the epoch (see the module docstring) and reads the
    ``rank``-th batch of every step. Each sample is read once per epoch, but for the padding of
    the last step (fewer than ``num_replicas`` batches, repeated from the plan's head) or the
    fewer than ``num_replicas`` lightest batches that ``drop_last`` drops. Call
    :meth:`set_epoch` at the start of every epoch.

    Args:
        lengths: the length (tokens) of every sample: a list, a numpy array or a 1-D tensor.
        max_tokens: the budget of a batch; a sample longer than it is an error.
        cost: ``"padded"`` (longest length x batch size, a padded batch) or ``"sum"`` (the sum of
            the lengths, packed sequences).
        num_buckets: length buckets to shuffle within: more pads less, fewer mixes more.
        max_batch_size: at most this many samples in a batch (``None``: the budget alone).
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.
        shuffle: shuffle within buckets and shuffle the steps, seeded by ``seed + epoch``.
        seed: base seed; must be the same on every rank.
        drop_last: drop the last, incomplete step instead of padding it.

    Examples:
        >>> lengths = [2, 7, 3, 8, 2, 6, 4, 3, 7, 2]
        >>> ranks = [TokenBudgetBatchSampler(lengths, 12, num_buckets=4, num_replicas=2, rank=r)
        ...          for r in (0, 1)]
        >>> [list(s) for s in ranks]  # 3 batches each: steps of 2 batches
        [[[6], [4, 7, 9, 0], [8]], [[1], [2, 5], [3]]]
        >>> [[[lengths[i] for i in b] for b in s] for s in ranks]  # padded costs 4|7, 12|12, 7|8
        [[[4], [2, 3, 2, 2], [7]], [[7], [3, 6], [8]]]
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray | torch.Tensor,
        max_tokens: int,
        *,
        cost: str = "padded",
        num_buckets: int = 128,
        max_batch_size: int | None = None,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        self.max_tokens = check_int64("max_tokens", max_tokens, low=1)
        self.lengths = _check_lengths(lengths, self.max_tokens)  # (N,), checked before any step
        if cost not in ("padded", "sum"):
            raise ValueError(f'cost should be "padded" or "sum", but got cost={cost!r}')
        self.cost = cost
        self.num_buckets = check_int64("num_buckets", num_buckets, low=1)
        self.max_batch_size = (
            None if max_batch_size is None else check_int64("max_batch_size", max_batch_size, low=1)
        )
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        self.shuffle = check_bool("shuffle", shuffle)
        self.seed = check_seed(seed)
        self.drop_last = check_bool("drop_last", drop_last)
        self.epoch = 0
        self._resumed: list[list[int]] = []  # [[world, steps done], ...] of this epoch, loaded
        self._skip = self._yielded = 0  # steps of the current plan done (loaded), and handed out
        self._cached: tuple[Any, Any] = (None, None)  # (epoch, resumed) -> the plan
        self._digest: str | None = None  # the lengths' hash, for the state

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch (the same on every rank); a position loaded for another one is dropped."""
        epoch = check_int("epoch", epoch)
        check_seed(self.seed, epoch)
        if epoch != self.epoch:
            self.epoch, self._resumed, self._skip, self._yielded = epoch, [], 0, 0

    # --- the plan --------------------------------------------------------------------------

    def _batches(self, g: torch.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(order (N,), bounds (B+1,), cost (B,))``: batch ``b`` is ``order[bounds[b]:bounds[b+1]]``."""
        lengths, n, budget = self.lengths, len(self.lengths), self.max_tokens
        most = n if self.max_batch_size is None else min(self.max_batch_size, n)
        if n == 0:
            return np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64)
        bucket, longest, sizes = _buckets(lengths, self.num_buckets)  # (N,), (K,), (K,)
        if self.shuffle:  # shuffled, then stably sorted by bucket: shuffled within each bucket
            perm = torch.randperm(n, generator=g, dtype=torch.int64).numpy()  # (N,)
            order = perm[np.argsort(bucket[perm], kind="stable")]
        else:
            order = np.argsort(bucket, kind="stable")
        ordered = lengths[order]  # (N,) lengths in plan order, buckets ascending
        if self.cost == "padded":  # per bucket: batches of max_tokens // longest samples
            per_batch = np.minimum(budget // longest, most)  # (K,) >= 1: longest <= budget
            ends, starts, p = np.cumsum(sizes), [], 0
            for k in range(len(sizes)):  # a loop over buckets; a leftover carries on into k + 1
                full = (int(ends[k]) - p) // int(per_batch[k])
                starts.append(p + np.arange(full, dtype=np.int64) * per_batch[k])
                p += full * int(per_batch[k])
            starts.append(np.arange(p, n, n))  # the last leftover, if any
            bounds = np.append(np.concatenate(starts), n)
        else:  # greedy: batch i..j-1 where the sum of lengths stays within the budget
            total = np.cumsum(ordered, dtype=np.int64)  # (N,)
            ends = np.searchsorted(total, total - ordered + budget, side="right")  # (N,)
            ends = np.minimum(ends, np.arange(1, n + 1) + (most - 1))
            bounds_list, i = [0], 0
            while i < n:  # a loop over batches, never over samples
                i = int(ends[i])
                bounds_list.append(i)
            bounds = np.asarray(bounds_list, np.int64)
        sizes_b = np.diff(bounds)  # (B,)
        if self.cost == "padded":
            cost = np.maximum.reduceat(ordered, bounds[:-1]).astype(np.int64) * sizes_b
        else:
            cost = np.add.reduceat(ordered.astype(np.int64), bounds[:-1])
        return order, bounds, cost

    def _steps(
        self, ids: np.ndarray, cost: np.ndarray, world: int, g: torch.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(steps (S, world) of batch ids, stream)``: ``stream`` is every batch of ``ids`` in
        the order the steps read them (the padding and what ``drop_last`` drops left out)."""
        by_cost = ids[np.argsort(cost[ids], kind="stable")]  # ascending cost, ties in plan order
        left = len(ids) % world  # the lightest `left` batches: an incomplete step
        runs = by_cost[left:].reshape(-1, world)  # (S', world) neighbours in cost order
        if self.shuffle:
            runs = runs[torch.randperm(len(runs), generator=g).numpy()]
        stream = np.concatenate([runs.ravel(), by_cost[:left]])
        if left and not self.drop_last:  # pad with the head of the plan (cyclically, if short)
            pad = stream[np.arange(world - left) % len(stream)]
            runs = np.concatenate([runs, np.concatenate([by_cost[:left], pad])[None]])
        return runs, stream

    def _plan(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(order, bounds, steps (S, W))`` of the epoch (after the loaded resumes), cached."""
        key = (self.epoch, [list(r) for r in self._resumed])
        if self._cached[0] == key:
            return self._cached[1]
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)  # one generator per epoch: every rank draws alike
        order, bounds, cost = self._batches(g)
        ids = np.arange(len(cost))
        for world, done in self._resumed:  # re-plan what other worlds left, in their order
            _, stream = self._steps(ids, cost, world, g)
            ids = stream[done * world :]
        steps, _ = self._steps(ids, cost, self.num_replicas, g)
        self._cached = (key, (order, bounds, steps))
        return order, bounds, steps

    def epoch_plan(self) -> torch.Tensor:
        r"""The plan every rank computes, as one int64 tensor: the steps' batch ids, the batch
        bounds and the order (:func:`~distsampling.assert_rank_consistent` hashes it)."""
        order, bounds, steps = self._plan()
        return torch.from_numpy(np.concatenate([steps.ravel(), bounds, order]).astype(np.int64))

    def batches(self) -> list[list[int]]:
        r"""What the next ``iter()`` yields, as a list: this rank's batches, the done ones skipped."""
        order, bounds, steps = self._plan()
        mine = steps[self._skip :, self.rank]  # (S - skip,) this rank's batch of every step
        lo, sizes = bounds[mine], bounds[mine + 1] - bounds[mine]  # (S',), (S',)
        # positions lo..hi-1 of every batch of mine, one after the other: (sum(sizes),)
        shift = np.repeat(lo - (np.cumsum(sizes) - sizes), sizes)
        flat = order[np.arange(int(sizes.sum()), dtype=np.int64) + shift]
        out, ints, p = [], flat.astype(np.int64).tolist(), 0  # Python ints, once
        for size in sizes.tolist():
            out.append(ints[p : p + size])
            p += size
        return out

    def __iter__(self) -> Iterator[list[int]]:
        refuse_split_again(self)  # accelerate's prepare(loader) would split this share again
        batches = self.batches()  # every iter() of a loaded epoch starts where it was saved
        self._yielded = self._skip
        return self._hand_out(batches)

    def _hand_out(self, batches: list[list[int]]) -> Iterator[list[int]]:
        for batch in batches:
            self._yielded += 1  # counted as handed out, before the loop gets it
            yield batch

    def __len__(self) -> int:
        # this rank's batches of the whole epoch: those read before a resume, on any world, and
        # those of the current plan (a resumed iter() yields len() minus the ones read)
        return sum(k for _, k in self._resumed) + len(self._plan()[2])

    @property
    def sampler(self) -> EpochHandle:
        r"""What a framework reaches for ``set_epoch``: Lightning calls
        ``loader.batch_sampler.sampler.set_epoch(epoch)`` every epoch, never the batch sampler's
        own; this handle forwards it here, so each epoch gets its own plan under a ``Trainer``."""
        return EpochHandle(self)

    # --- resume ----------------------------------------------------------------------------

    def _identity(self) -> dict[str, Any]:
        if self._digest is None:  # the lengths never change: hashed once, not at every save
            self._digest = hashlib.sha1(self.lengths.astype(np.int64).tobytes()).hexdigest()[:16]
        digest = self._digest
        return {"num_samples": len(self.lengths), "lengths": digest,
                "max_tokens": self.max_tokens, "cost": self.cost,
                "num_buckets": self.num_buckets, "max_batch_size": self.max_batch_size,
                "shuffle": self.shuffle, "seed": self.seed, "drop_last": self.drop_last}  # fmt: skip

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""Where this rank is: a small JSON-ready dict (``position``: steps done in this plan;
        ``resumed``: ``[num_replicas, steps]`` done on other worlds earlier in the epoch).

        ``position`` counts the batches the latest ``iter()`` handed out. A plain ``DataLoader``
        with workers asks for batches ahead of the loop: pass ``consumed``, the batches the loop
        took from the latest ``iter()`` (torchdata's ``StatefulDataLoader`` needs none).

        Args:
            consumed: batches of the latest ``iter()`` the loop used, at most those handed out.
        """
        position = self._yielded
        if consumed is not None:
            why = f"the latest iter() handed out {self._yielded - self._skip}"
            position = self._skip + check_consumed(
                consumed, self._yielded - self._skip, why, "batches"
            )
        return {"kind": type(self).__name__, "version": 1, **self._identity(),
                "epoch": self.epoch, "num_replicas": self.num_replicas,
                "resumed": [list(r) for r in self._resumed], "position": position}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume at ``state``: every ``iter()`` of its epoch yields the batches left.

        On another number of ranks the batches not yet read are planned again in steps of this
        world: every sample is still read once in the epoch.

        Args:
            state: a :meth:`state_dict` (after ``json.loads`` or ``torch.load`` too).
        """
        fields = ("epoch", "num_replicas", "resumed", "position")
        state = check_state(state, type(self).__name__, 1, self._identity(), required=fields)
        epoch, world = check_int("epoch", state["epoch"]), self.num_replicas
        check_seed(self.seed, epoch)
        saved_world = check_int("num_replicas", state["num_replicas"], low=1)
        resumed = state["resumed"]
        if not isinstance(resumed, list) or not all(
            isinstance(r, (list, tuple)) and len(r) == 2 for r in resumed
        ):
            raise ValueError(
                "resumed should be a list of [num_replicas, steps] pairs, but got "
                f"resumed={resumed!r}"
            )
        resumed = [[check_int("num_replicas", w, low=1), check_int("steps", k, low=0)]
                   for w, k in resumed]  # fmt: skip
        saved = TokenBudgetBatchSampler.__new__(TokenBudgetBatchSampler)
        saved.__dict__.update(self.__dict__, num_replicas=saved_world, rank=0, epoch=epoch)
        saved._resumed, saved._cached = resumed, (None, None)
        steps = len(saved._plan()[2])  # the saved plan's steps: the position cannot be past them
        position = check_int("position", state["position"], low=0, high=steps)
        self.epoch, self._cached = epoch, (None, None)
        if saved_world == world:
            self._resumed, self._skip = resumed, position
        else:  # the steps done on the saved world are a prefix of its plan: plan the rest here
            self._resumed, self._skip = [*resumed, [saved_world, position]], 0
        self._yielded = self._skip
