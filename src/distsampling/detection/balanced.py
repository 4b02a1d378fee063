r"""BatchBalanceClassSampler: batches of P classes times K samples each, seeded, split across ranks.

Metric learning (triplet and contrastive losses, person re-identification) needs every batch
to hold several classes with several samples of each, so that positive and negative pairs
exist in it. catalyst's ``BatchBalanceClassSampler`` builds each batch from ``num_classes``
distinct classes and ``num_samples`` samples of each (with replacement only when a class is
smaller than that), for a fixed number of batches per epoch. It draws from Python's and
numpy's global RNGs, so two ranks draw different, possibly overlapping batches, and a run
cannot be reproduced or resumed.

Here every rank draws the same global epoch of ``num_batches * W`` batches from a generator
seeded by ``seed + epoch`` (as ``DistributedSampler`` seeds its shuffle), and rank ``r`` reads
batches ``r, r + W, ...``: different batches on every rank, the same number on each. The
distinct classes and distinct samples are drawn with Floyd's algorithm, vectorised over all
batches: ``k`` steps, whatever the number of classes.

References:
    catalyst/data/sampler.py (BatchBalanceClassSampler); Hermans et al., "In Defense of the
    Triplet Loss for Person Re-Identification" (P x K batches); Bentley and Floyd,
    "Programming Pearls: A Sample of Brilliance" (CACM 1987)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Sampler

from .._checks import _SEED_HIGH, _SEED_LOW, check_int, check_int64, check_len, resolve_world
from ..guards import refuse_split_again
from ..resume.state import EpochHandle, check_consumed, check_state

__all__ = ["BatchBalanceClassSampler", "distinct_draws"]

# the fields of a state that must match on resume (the others are the world and the position)
_MATCH = ("labels", "num_classes", "num_samples", "num_batches", "seed")


def distinct_draws(n: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    r"""Row ``i``: ``k`` distinct numbers from ``range(n[i])`` (needs ``n[i] >= k``), by Floyd's algorithm.

    Every ``k``-subset of ``range(n)`` comes out equally likely, from ``k`` uniforms per row
    and ``O(k^2)`` work, never ``O(n)``: step ``j`` draws ``t`` from ``[0, n - k + j]`` and
    takes ``t``, or ``n - k + j`` itself when ``t`` was taken before (which it never was).

    Args:
        n: shape ``(m,)``, the range of each row.
        u: shape ``(m, k)``, uniforms in ``[0, 1)`` (float64).

    Examples:
        >>> u = torch.tensor([[0.9, 0.9, 0.9], [0.0, 0.0, 0.0]], dtype=torch.float64)
        >>> distinct_draws(torch.tensor([5, 5]), u).tolist()
        [[2, 3, 4], [0, 3, 4]]
    """
    if not (isinstance(n, torch.Tensor) and n.dim() == 1 and not n.is_floating_point()):
        raise TypeError(f"n should be a 1-D integer tensor, but got n={n!r}")
    if not (isinstance(u, torch.Tensor) and u.dim() == 2 and len(u) == len(n)):
        raise ValueError(
            f"u should be a tensor of shape (len(n), k) = ({len(n)}, k), but got u={u!r}"
        )
    m, k = u.shape
    out = torch.empty(m, k, dtype=torch.int64)  # (m, k)
    for j in range(k):
        top = n - k + j  # (m,) this step draws from [0, top]
        t = torch.minimum((u[:, j] * (top + 1)).long(), top)  # (m,) floor(u * (top + 1))
        taken = (out[:, :j] == t[:, None]).any(dim=1)  # (m,) t drawn in an earlier step?
        out[:, j] = torch.where(taken, top, t)  # top is new: earlier steps drew below it
    return out


class BatchBalanceClassSampler(Sampler[list[int]]):
    r"""Batches of ``num_classes`` distinct classes times ``num_samples`` samples each.

    A batch lists its classes one after another, ``num_samples`` indices each: distinct
    samples when the class has that many, else drawn with replacement. Every set of classes
    (and of samples in a class) is equally likely; their order in the batch is not shuffled. Each epoch has
    ``num_batches`` batches per rank, drawn from a generator seeded by ``seed + epoch``:
    the same on every rank, so the ranks read different batches of one global epoch. Use it
    as a DataLoader's ``batch_sampler``.

    Args:
        labels: one label per sample (list, numpy array or tensor); any sortable values.
        num_classes: classes per batch ``P``, at most the number of distinct labels.
        num_samples: samples per class in a batch ``K``, ``>= 1``.
        num_batches: batches per rank per epoch; default
            ``len(labels) // (P * K * num_replicas)``, about one pass over the data.
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.
        seed: base seed, the same on every rank.

    Examples:
        >>> labels = ["cat"] * 3 + ["dog"] * 2 + ["eel"] * 4
        >>> s = BatchBalanceClassSampler(labels, 2, 3, num_batches=3, num_replicas=1, rank=0)
        >>> list(s)  # 2 classes x 3 samples; the dog (2 samples) is drawn with replacement
        [[3, 3, 4, 5, 6, 8], [0, 1, 2, 5, 6, 8], [4, 4, 3, 6, 5, 7]]
        >>> [labels[i] for i in next(iter(s))]
        ['dog', 'dog', 'dog', 'eel', 'eel', 'eel']
    """

    def __init__(
        self,
        labels: Sequence[object] | np.ndarray | torch.Tensor,
        num_classes: int,
        num_samples: int,
        num_batches: int | None = None,
        num_replicas: int | None = None,
        rank: int | None = None,
        seed: int = 0,
    ) -> None:
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        if check_len("labels", labels) == 0:
            raise ValueError(f"labels should have at least one sample, but got labels={labels!r}")
        arr = (
            labels.detach().cpu().numpy()
            if isinstance(labels, torch.Tensor)
            else np.asarray(labels)
        )
        if arr.ndim != 1:
            raise ValueError(
                f"labels should be 1-D, one label per sample, but got shape {arr.shape}"
            )
        try:  # codes: (N,) the class number of each sample, classes in sorted order
            classes, codes = np.unique(arr, return_inverse=True)
        except TypeError as err:
            raise TypeError(
                f"labels should be mutually sortable, but got labels={labels!r}"
            ) from err
        codes = torch.from_numpy(codes.reshape(-1).astype(np.int64))  # (N,)
        #: the sorted distinct labels, and how many samples carry each
        self.classes: list[object] = classes.tolist()
        self._sizes = torch.bincount(codes, minlength=len(self.classes))  # (C,)
        self._members = torch.argsort(codes, stable=True)  # (N,) sample indices, class by class
        self._starts = torch.cumsum(self._sizes, 0) - self._sizes  # (C,) where class c begins
        C = len(self.classes)
        self.num_classes = check_int("num_classes", num_classes, low=1)
        if self.num_classes > C:
            raise ValueError(
                f"num_classes should be <= the number of distinct labels ({C}), but got "
                f"num_classes={self.num_classes}"
            )
        self.num_samples = check_int64("num_samples", num_samples, low=1)
        per_epoch = len(codes) // (self.batch_size * self.num_replicas)
        if num_batches is None and per_epoch == 0:
            raise ValueError(
                f"num_batches defaults to len(labels) // (num_classes * num_samples * "
                f"num_replicas) = {len(codes)} // ({self.num_classes} * {self.num_samples} * "
                f"{self.num_replicas}) = 0, but got num_batches=None: pass num_batches >= 1"
            )
        self.num_batches = (
            per_epoch if num_batches is None else check_int64("num_batches", num_batches, low=1)
        )
        self.seed = check_int("seed", seed, low=_SEED_LOW, high=_SEED_HIGH)
        self.epoch = 0
        self.position = 0  # batches yielded in the current (or last) iter()
        self._skip = 0  # where every iter() of the epoch starts: 0, or a loaded position
        digest = hashlib.sha256(codes.numpy().tobytes() + repr(self.classes).encode())
        self._digest = digest.hexdigest()[:16]

    @property
    def batch_size(self) -> int:
        r"""Indices per batch: ``num_classes * num_samples``."""
        return self.num_classes * self.num_samples

    def epoch_batches(self) -> torch.Tensor:
        r"""This rank's batches of this epoch, shape ``(num_batches, num_classes * num_samples)``."""
        if not _SEED_LOW <= self.seed + self.epoch <= _SEED_HIGH:
            raise ValueError(
                f"seed + epoch should be in [{_SEED_LOW}, {_SEED_HIGH}] (torch.Generator's "
                f"range), but got seed={self.seed}, epoch={self.epoch}"
            )
        P, K, B = self.num_classes, self.num_samples, self.num_batches * self.num_replicas
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        # the whole global epoch's uniforms, drawn alike on every rank
        u_classes = torch.rand(B, P, generator=g, dtype=torch.float64)  # (B, P)
        u_samples = torch.rand(B, P, K, generator=g, dtype=torch.float64)  # (B, P, K)
        # this rank's batches: rows rank, rank + W, ... of the global epoch
        u_classes, u_samples = (
            u_classes[self.rank :: self.num_replicas],
            u_samples[self.rank :: self.num_replicas],
        )
        b = len(u_classes)
        classes = distinct_draws(torch.full((b,), len(self.classes)), u_classes)  # (b, P)
        n = self._sizes[classes].reshape(-1)  # (b * P,) size of each chosen class
        u = u_samples.reshape(-1, K)  # (b * P, K)
        distinct = distinct_draws(n, u)  # (b * P, K) right where n >= K
        repeated = (u * n[:, None]).long()  # (b * P, K) with replacement: where n < K
        within = torch.where((n >= K)[:, None], distinct, repeated)  # (b * P, K)
        first = self._starts[classes].reshape(-1, 1)  # (b * P, 1) each class's first member
        return self._members[first + within].reshape(b, P * K)  # (b, P * K)

    def __iter__(self) -> Iterator[list[int]]:
        refuse_split_again(self)  # accelerate's prepare(loader) would split this share again
        self.position = self._skip  # a loaded position: where every iter() of its epoch starts
        for batch in self.epoch_batches()[self.position :].tolist():
            self.position += 1  # counted before the yield: exact if the loop stops here
            yield batch

    def __len__(self) -> int:
        return self.num_batches

    @property
    def sampler(self) -> EpochHandle:
        r"""Where Lightning calls ``set_epoch`` (``loader.batch_sampler.sampler``): forwarded here."""
        return EpochHandle(self)

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch: each ``seed + epoch`` draws its own batches, the same on all ranks.

        Args:
            epoch: epoch number (an integer; call it with the same value on every rank).
        """
        epoch = check_int("epoch", epoch)
        if epoch != self.epoch:  # a position belongs to its epoch
            self.position = self._skip = 0
        self.epoch = epoch

    def state_dict(self, consumed: int | None = None) -> dict[str, object]:
        r"""The epoch and the batches this rank has read of it: small and JSON-serialisable,
        the same on every rank that read in step (it names no rank).

        Args:
            consumed: batches of the latest ``iter()`` the loop used, when a plain
                ``DataLoader`` with workers asked for more (``None``: all it handed out).
        """
        position = self.position
        if consumed is not None:
            why = f"the latest iter() handed out {self.position - self._skip}"
            position = self._skip + check_consumed(
                consumed, self.position - self._skip, why, "batches"
            )
        return {
            "kind": "BatchBalanceClassSampler",
            "version": 2,
            "labels": self._digest,
            "num_classes": self.num_classes,
            "num_samples": self.num_samples,
            "num_batches": self.num_batches,
            "num_replicas": self.num_replicas,
            "seed": self.seed,
            "epoch": self.epoch,
            "position": position,
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        r"""Set the saved epoch; every ``iter()`` of it starts at the saved batch (no replay).

        Any rank's state loads on every rank of the saved world. The labels (compared by a
        digest), ``num_classes``, ``num_samples``, ``num_batches`` and the seed must match, and
        the number of ranks: the global epoch of ``num_batches * num_replicas`` batches is drawn
        for its world, so another world's is another epoch.
        """
        mine = self.state_dict()
        fields = ("num_replicas", "epoch", "position")
        same = {k: mine[k] for k in _MATCH}
        check_state(state, mine["kind"], mine["version"], same, required=fields)
        if state["num_replicas"] != self.num_replicas:
            raise ValueError(
                f"state was saved on num_replicas={state['num_replicas']!r} ranks, but this "
                f"sampler has num_replicas={self.num_replicas}: a BatchBalanceClassSampler "
                "resumes on the saved number of ranks only (its epoch's batches are drawn for "
                "that world); build it with that num_replicas, or start a new epoch"
            )
        epoch = check_int("epoch", state["epoch"])
        position = check_int("position", state["position"], low=0, high=self.num_batches)
        self.epoch, self.position, self._skip = epoch, position, position
