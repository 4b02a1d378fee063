r"""IterationBasedBatchSampler: a fixed number of iterations instead of epochs, with exact resume.

Detection codebases train for a number of *iterations*: the batch sampler is re-iterated pass
after pass until ``num_iterations`` batches are out, and every rank stops after the same count
(even when grouping gives ranks different numbers of batches per pass).

maskrcnn-benchmark resumes at ``start_iter`` by starting its counter there and seeding pass
``p`` with the *iteration* number, so a resumed run reads other batches than the run it
resumes. Here pass ``p`` always gets ``set_epoch(p)``, and resuming at ``k`` skips whole passes
by their length (``len(batch_sampler)``, no batch built) and then ``k'`` batches inside one
pass, so ``list(IBS(..., start_iter=k)) == list(IBS(..., start_iter=0))[k:]`` exactly, and no
sample is ever loaded for a skipped batch.

References:
    maskrcnn_benchmark/data/samplers/iteration_based_batch_sampler.py
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from torch.utils.data import Sampler

from .._checks import check_int
from ..resume.state import check_state

__all__ = ["IterationBasedBatchSampler"]


class IterationBasedBatchSampler(Sampler[list[int]]):
    r"""Re-iterate a batch sampler until ``num_iterations`` batches in all; resume exactly.

    Pass ``p`` (0, 1, 2, ...) starts with ``set_epoch(p)`` on the batch sampler if it has one,
    else on its ``.sampler`` if that has one, so each pass reads a different order. The result
    is exact as long as each pass depends only on its epoch (true of this project's samplers).

    Resuming costs ``len(batch_sampler)`` once per skipped pass (``O(1)`` for ``BatchSampler``,
    one pass over the sampler for ``GroupedBatchSampler``; a batch sampler without ``len`` is
    counted by iterating it) plus the index work of the batches skipped inside the last pass.

    Args:
        batch_sampler: yields lists of indices; re-iterated once per pass.
        num_iterations: total batches of the whole run, an ``int >= 0``.
        start_iter: batches already done (resume point), in ``[0, num_iterations]``.

    Examples:
        >>> from distsampling import BatchSampler, DistributedSampler
        >>> sampler = DistributedSampler(range(6), num_replicas=1, rank=0, seed=0)
        >>> batches = BatchSampler(sampler, batch_size=4, drop_last=False)
        >>> list(IterationBasedBatchSampler(batches, num_iterations=5))
        [[2, 5, 3, 0], [1, 4], [1, 5, 2, 0], [3, 4], [0, 3, 1, 2]]
        >>> list(IterationBasedBatchSampler(batches, num_iterations=5, start_iter=3))
        [[3, 4], [0, 3, 1, 2]]
    """

    def __init__(
        self, batch_sampler: Iterable[list[int]], num_iterations: int, start_iter: int = 0
    ) -> None:
        if not isinstance(batch_sampler, Iterable):
            raise TypeError(
                "batch_sampler should be an iterable of batches (lists of indices), "
                f"but got batch_sampler={batch_sampler!r}"
            )
        self.batch_sampler = batch_sampler
        # len() of this sampler is num_iterations - start_iter: Python's len stops at maxsize
        self.num_iterations = check_int("num_iterations", num_iterations, low=0)
        if self.num_iterations > sys.maxsize:
            raise ValueError(
                f"num_iterations should be <= {sys.maxsize}, but got "
                f"num_iterations={self.num_iterations}"
            )
        self.start_iter = check_int("start_iter", start_iter, low=0)
        if self.start_iter > self.num_iterations:
            raise ValueError(
                "start_iter should be <= num_iterations (the batches already done), but got "
                f"start_iter={self.start_iter}, num_iterations={self.num_iterations}"
            )
        self._iteration = self.start_iter  # batches done, the last iter()'s included

    def _set_epoch(self, epoch: int) -> None:
        for owner in (self.batch_sampler, getattr(self.batch_sampler, "sampler", None)):
            if hasattr(owner, "set_epoch"):
                owner.set_epoch(epoch)
                return

    def _pass_length(self) -> int:
        if hasattr(self.batch_sampler, "__len__"):
            return len(self.batch_sampler)
        return sum(1 for _ in self.batch_sampler)  # no len: count the pass (index work only)

    def _empty_pass(self, epoch: int) -> RuntimeError:
        return RuntimeError(
            f"the batch sampler yielded no batch in pass epoch={epoch}, so num_iterations="
            f"{self.num_iterations} can never be reached (an empty dataset or rank, or "
            "drop_last/drop_uneven dropping everything)"
        )

    def __iter__(self) -> Iterator[list[int]]:
        remaining = self.num_iterations - self.start_iter
        skip, epoch = self.start_iter, 0
        self._iteration = self.start_iter
        # 1. resume: skip whole passes by their length, without building their batches
        while remaining and skip:
            self._set_epoch(epoch)
            length = self._pass_length()
            if length == 0:
                raise self._empty_pass(epoch)
            if skip < length:
                break  # the resume point lies inside this pass
            skip -= length
            epoch += 1
        # 2. yield pass after pass; the first one starts `skip` batches in
        while remaining:
            self._set_epoch(epoch)
            empty = True  # no batch from this pass yet
            for batch in islice(iter(self.batch_sampler), skip, None):
                self._iteration += 1
                yield batch
                empty = False
                remaining -= 1
                if not remaining:
                    return
            if empty and not skip:
                raise self._empty_pass(epoch)
            skip, epoch = 0, epoch + 1

    def __len__(self) -> int:
        return self.num_iterations - self.start_iter

    def _world(self) -> int | None:
        # num_replicas of the distributed sampler inside, if any: pass lengths depend on it
        owner: object = self.batch_sampler
        while owner is not None:
            if isinstance(getattr(owner, "num_replicas", None), int):
                return owner.num_replicas  # type: ignore[attr-defined]
            owner = getattr(owner, "sampler", None)
        return None

    def state_dict(self) -> dict[str, Any]:
        r"""``{kind, version, num_iterations, num_replicas, iteration}``: batches done so far.

        The passes are set by this sampler (pass ``p`` is epoch ``p``), so the iteration is the
        whole position; ``num_replicas`` is the world of the sampler inside (``None`` if none).
        """
        return {"kind": type(self).__name__, "version": 1, "num_iterations": self.num_iterations,
                "num_replicas": self._world(), "iteration": self._iteration}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume at ``state``'s iteration: the same as building it with ``start_iter=iteration``.

        Only on the number of ranks the state was saved on: a pass holds ``len(batch_sampler)``
        batches per rank, which depends on the world, so iteration ``k`` on one world is no
        position on another (ValueError).

        Args:
            state: a :meth:`state_dict` of a sampler with the same ``num_iterations``.
        """
        must_match = {"num_iterations": self.num_iterations}
        state = check_state(
            state, type(self).__name__, 1, must_match, required=("num_replicas", "iteration")
        )
        if state["num_replicas"] != self._world():
            raise ValueError(
                "IterationBasedBatchSampler resumes only on the number of ranks it was saved on: "
                f"num_replicas was {state['num_replicas']!r} when saved, but is {self._world()!r} "
                "now (an iteration count means other batches on another world)"
            )
        self.start_iter = self._iteration = check_int(
            "iteration", state["iteration"], low=0, high=self.num_iterations
        )
