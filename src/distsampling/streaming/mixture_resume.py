r"""ShardedMixtureDataset's resume: a worker's place, and a resume on the same grid or another.

A worker's state is its step, its slot in it and its count per source (``O(K)``), the readers it
reads for, the grid (its generation: first step and position, the leftovers of an earlier grid,
each source's count before it) and the mix read before the step (``past``). A load refuses
weights that disagree with that past, naming the step and both mixes (``MixtureSampler``'s
words); a change at the saved step or later is taken, and the run goes on exactly: where a
reader's runs lie follows the mix up to the change only (a stretch's segments are laid as if its
mix went on; at a change the unread rest of each segment in flight is read first).

Another grid (``num_replicas``, ``batch_size`` or ``num_workers``): every worker's state of one
rank, at a step boundary. Every old reader's counts at that step are a closed form
(``mixture_readers.py``), checked against the states; at that step the reads of each source are
the first of its global order, so one segment is in flight: its unread rest (``O(K × old
readers)`` intervals, numpy at once) is handed to the new readers as leftovers, read first in the
new grid's global order, and the new grid's trees start at that step.

References:
    distsampling/mixing/sampler.py (MixtureSampler's past, and its refusal of another)
    distsampling/streaming/sharded.py (loader_dataset_states: every worker's state of a rank)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._checks import check_int
from ..resume.state import check_consumed
from .mixture_sources import _mismatch

__all__: list[str] = []


class _Resume:
    """``state_dict``, ``load_state_dict`` and the elastic resume of :class:`ShardedMixtureDataset`
    (its grid, its readers' counts and its progress are the dataset's)."""

    def _recount(self, step: int, slot: int, readers: Sequence[int]) -> list[list[int]]:
        """This rank's ``readers``' counts per source at ``(step, slot)``, from the mixture."""
        nw, at = self._readers(), self._counts(step, [self.rank])[0]
        if slot:  # the slots of the step read so far: its reader's draws in it
            ks = self._grid.sources(self.rank, [step])[0][:slot]
            at[step % nw] = (
                np.array(at[step % nw]) + np.bincount(ks, minlength=len(self.sources))
            ).tolist()
        return [at[q] for q in readers]

    def _main_state(self, step: int, slot: int) -> dict[str, Any]:
        """The main process's place at ``(step, slot)``: every reader's counts, counted again."""
        readers = list(range(self._readers()))
        return {"worker": 0, "num_workers": 0, "readers": readers, "step": step, "slot": slot,
                "counts": self._recount(step, slot, readers)}  # fmt: skip

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""This worker's place (the main process's with ``num_workers=0``): JSON-ready, ``O(K)``
        per reader it reads for (plus, after a resume on another topology, the passes it left:
        ``O(K × old readers)`` intervals).

        Args:
            consumed: samples of the latest ``iter()`` the loop used, in the main process of a
                plain DataLoader (whose workers read ahead): the place is counted from it.
        """
        g, p, b = self._gen, self._progress, self._gen["batch_size"]
        # workers read this epoch after the main process's latest iter() (if any): its own
        # progress is not the loop's place
        behind = (p is None or not p["num_workers"]) and int(self._in_workers[0]) == self.epoch + 1
        # a worker's place is its progress (every batch, under StatefulDataLoader): no search
        steps = self._steps(self.epoch) if consumed is not None or p is None else None
        if consumed is not None:
            # the latest iter() began at this process's own place, or the workers' (a state not
            # read here yet; once this process read it they get none: the epoch's first step)
            began = self._begin[0] == self.epoch and not (behind and self._loaded is None)
            _, step, slot = self._begin if began else (self.epoch, steps.start, 0)
            p = self._progress
            mine = p is not None and not p["num_workers"] and self._begin[0] == self.epoch
            if mine and not behind:
                out = (p["step"] - step) * b + p["slot"] - slot  # what this process's iter() gave
                consumed = check_consumed(consumed, out, f"the latest iter() handed out {out}")
            left = (steps.stop - step) * b - slot
            consumed = check_int("consumed", consumed, low=0, high=max(0, left))
            step, slot = step + (slot + consumed) // b, (slot + consumed) % b
            p = self._main_state(step, slot)
        elif behind:
            raise RuntimeError(
                "state_dict() was called in the main process, but DataLoader workers "
                f"(num_workers={int(self._in_workers[1])}) read this epoch ({self.epoch})"
                + (" after this process's own iter()" if p is not None else "")
                + ": resume through torchdata's StatefulDataLoader (it asks every worker), or "
                "pass consumed= (the samples the loop used)"
            )
        elif p is None:
            p = self._main_state(max(steps.start, g["start"]), 0)
        step, slot = p["step"], p["slot"]
        if slot == b:  # a whole step: the next one this worker reads
            step, slot = step + (1 if len(p["readers"]) == self._readers() else self._readers()), 0
        return {"kind": type(self).__name__, "version": 3, **self._identity,
                "sources": [dict(f) for f in self._identity["sources"]], "epoch": self.epoch,
                "rank": self.rank,
                "generation": {**g, "lead": [lead.tolist() for lead in g["lead"]],
                               "first": list(g["first"])},
                "worker": p["worker"], "num_workers": p["num_workers"], "readers": list(p["readers"]),
                "step": step, "slot": slot, "counts": [list(c) for c in p["counts"]],
                "past": self.mixture._past(step, slot > 0)}  # fmt: skip

    def _checked(self, state: object) -> dict[str, Any]:
        keys = ("kind", "version", *self._identity, "epoch", "rank", "generation", "worker",
                "num_workers", "readers", "step", "slot", "counts", "past")  # fmt: skip
        if not isinstance(state, dict) or any(k not in state for k in keys) or (
            state["kind"], state["version"]) != (type(self).__name__, 3):  # fmt: skip
            raise ValueError(
                f"state should be a {type(self).__name__} state_dict(), but got {state!r}"
            )
        why = _mismatch(state["sources"], self._identity["sources"])
        if why is not None:
            raise ValueError(f"state does not match this dataset: {why}")
        for name in ("seed", "shuffle", "epoch"):
            now = self.epoch if name == "epoch" else self._identity[name]
            if state[name] != now:
                hint = f": call set_epoch({state[name]}) first" if name == "epoch" else ""
                raise ValueError(
                    f"state does not match this dataset: {name} was {state[name]!r} when saved, "
                    f"but is {now!r} now{hint}"
                )
        # the weights read before the saved step are these weights' (a later change is welcome)
        self.mixture._check_past(state["past"], state["step"], state["slot"] > 0)
        return state

    def load_state_dict(self, state: dict[str, Any] | list[dict[str, Any]]) -> None:
        r"""Resume: one worker's state (the same topology), or every worker's state of one rank
        (a list, :func:`loader_dataset_states`): then any ``num_replicas``, ``batch_size`` and
        ``num_workers``, at a step boundary.

        A worker's state saved on another rank of the same run resumes this rank at the same
        step and slot (the ranks step together), its readers' counts counted again from the
        mixture: Lightning's checkpoint holds rank 0's loader state, and every rank loads it
        (https://github.com/Lightning-AI/pytorch-lightning/pull/19361)."""
        if not isinstance(state, (list, tuple)) or not state:  # one worker's, else refused
            state = self._checked(state)
            g = state["generation"]
            if (g["num_replicas"], g["batch_size"]) != (self.num_replicas, self.batch_size):
                raise ValueError(
                    f"state was saved on num_replicas={g['num_replicas']}, batch_size="
                    f"{g['batch_size']}, but is loaded on num_replicas={self.num_replicas}, "
                    f"batch_size={self.batch_size}: load every worker's state of one rank at once "
                    "(load_state_dict(loader_dataset_states(loader_state)))"
                )
            if self._declared not in (None, g["num_workers"]):
                raise ValueError(
                    f"state was saved with num_workers={g['num_workers']}, but this dataset has "
                    f"num_workers={self._declared}: load every worker's state of one rank at once "
                    "(load_state_dict(loader_dataset_states(loader_state)))"
                )
            self._set_generation(dict(g))
            if state["rank"] != self.rank:  # another rank's place: the same step, our counts
                state = {**state, "counts": self._recount(state["step"], state["slot"],
                                                          state["readers"])}  # fmt: skip
            self._loaded = state
            self._progress = {
                x: state[x] for x in ("worker", "num_workers", "readers", "step", "slot", "counts")
            }
            self._begin = (self.epoch, state["step"], state["slot"])
            return
        self._elastic([self._checked(s) for s in state])

    def _elastic(self, states: list[dict[str, Any]]) -> None:
        g, loader_workers = states[0]["generation"], states[0]["num_workers"]
        workers = sorted(s["worker"] for s in states)
        if (any(s["generation"] != g or s["num_workers"] != loader_workers for s in states)
                or workers != list(range(max(1, loader_workers)))):  # fmt: skip
            raise ValueError(
                "state should list every worker's state of one rank (workers 0..n-1, one run), "
                f"but got workers {workers}"
            )
        if any(s["slot"] for s in states):
            raise ValueError(
                "state should be at a step boundary to resume on another topology, but got slots "
                f"{[s['slot'] for s in states]} of batch_size={g['batch_size']}"
            )
        W, b = g["num_replicas"], g["batch_size"]
        self._set_generation(dict(g))  # the old grid: its readers' counts at the boundary
        S = max(min(s["step"] for s in states), g["start"])
        for s in states:  # each reader's counts in the state, against the mixture's
            mixed = self._counts(S, [s["rank"]])[0]  # (nw, K) its rank's readers'
            for q, c in zip(s["readers"], s["counts"], strict=True):
                if c != mixed[q]:
                    raise ValueError(
                        f"state of worker {s['worker']} says reader {q} drew counts={c}, but the "
                        f"mixture gives {mixed[q]} at step {S}: a state of another run"
                    )
        # every source's unread rest of its segment in flight (within the step's stretch)
        p, lead, first, drawn = self._grid._piece(S), [], [], []
        for k in range(len(self.sources)):
            c = self._grid.reader_counts(k, S)  # (W·nw,) every old reader's draws of k before S
            rest, nxt = self._rest(k, p, c - self._before(k, p))  # drawn in the stretch
            lead.append(rest), first.append(nxt), drawn.append(int(c.sum()))  # C_k(S)
            self._segs.clear(), self._reaches.clear()  # (R,) each: this source's, not needed again
        read = [int(x) + y for x, y in zip(g["read"], drawn, strict=True)]
        origin = g["origin"] + (S - g["start"]) * W * b
        before = (g["before"] if g.get("epoch") == self.epoch else 0) + (
            S - self._steps(self.epoch).start
        ) * b
        self._set_generation({"start": S, "origin": origin, "before": before, "epoch": self.epoch,
                              "num_workers": self._declared, "read": read, "lead": lead,
                              "first": first, "num_replicas": self.num_replicas,
                              "batch_size": self.batch_size})  # fmt: skip
        self._loaded, self._progress = None, None
        self._begin = (self.epoch, S, 0)
