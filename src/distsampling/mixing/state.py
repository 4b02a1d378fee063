r"""What a MixtureSampler's resume needs: the count of what one ``iter()`` handed out, and the
checks of a loaded state (resume.py's words, here so that the folder copies with two helpers).

References:
    distsampling/resume/state.py (CountingIterator, check_state, check_consumed)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain
from operator import length_hint
from typing import Any, NamedTuple

import torch

from ..resume.state import check_consumed

__all__ = ["Read"]


class Read(NamedTuple):
    """Where a sample is read: its global ``position``, the ``step``, the ``rank`` and its ``slot``."""

    position: int
    step: int
    rank: int
    slot: int


class _Counting:
    """One ``iter()``'s ints at C speed (``ints``) and how many it has handed out: finished
    blocks, plus the current block's length less what its list iterator has left (resume.py's
    ``CountingIterator``, here so that this file copies with two helpers)."""

    def __init__(self, blocks: Iterator[torch.Tensor | list[int]]) -> None:
        self._done, self._len, self._it = 0, 0, iter(())
        self.ints: Iterator[int] = chain.from_iterable(self._lists(blocks))

    def _lists(self, blocks: Iterator[torch.Tensor | list[int]]) -> Iterator[Iterator[int]]:
        for part in blocks:
            self._done += self._len
            self._it, self._len = iter(part if isinstance(part, list) else part.tolist()), len(part)
            yield self._it
        self._done, self._len = self._done + self._len, 0

    @property
    def yielded(self) -> int:
        return self._yielded()

    def _yielded(self) -> int:
        return self._done + self._len - length_hint(self._it)


def _consumed(consumed: object, handed_out: int, unit: str) -> int:
    """``consumed`` in ``[0, handed_out]``: a loop cannot have used more than it got."""
    return check_consumed(consumed, handed_out, f"the latest iter() handed out {handed_out}", unit)


def _state(state: object, version: int, identity: dict[str, Any], fields: Sequence[str]) -> dict:
    """``state`` if it is a MixtureSampler state of ``version`` with ``identity`` and
    ``fields``; else the error resume.py's ``check_state`` gives, naming the field."""
    if not isinstance(state, dict):
        raise TypeError(
            f"state should be a dict from state_dict(), but got state={state!r} "
            f"of type {type(state).__name__}"
        )
    for keys in (("kind", "version"), (*identity, *fields)):  # the class and format first
        for key in keys:
            if key not in state:
                raise KeyError(f"state has no {key!r}: it is not a MixtureSampler state_dict() "
                               f"(got {state!r})")  # fmt: skip
        if keys[0] == "kind" and state["kind"] != "MixtureSampler":
            raise ValueError(
                f"state comes from another sampler: kind was {state['kind']!r} when saved, "
                "but this is a MixtureSampler"
            )
        if keys[0] == "kind" and state["version"] != version:
            raise ValueError(f"state has format version={state['version']!r}, but this "
                             f"MixtureSampler reads version={version}")  # fmt: skip
    for key, now in identity.items():
        if state[key] != now:
            raise ValueError(
                f"state does not match this sampler: {key} was {state[key]!r} when saved, "
                f"but is {now!r} now"
            )
    return state
