r"""``python -m distsampling mixture``: what each rank reads at a step of a mixture, and when a
sample is read (:class:`~distsampling.MixtureSampler`, computed at that step alone).

    python -m distsampling mixture --sizes 60000 6000 600 --weights 0.5 0.3 0.2 \
        --replicas 8 --batch-size 8 --step 1000
    python -m distsampling mixture ... --where 2:17 --pass 3
    python -m distsampling mixture ... --change 500:0.4,0.3,0.3 --step 600

Each read is printed ``source:sample``; a weight may be a fraction (``1/3``) or a decimal;
``--change STEP:W1,W2,...`` (repeatable) changes the weights from that training step on;
``--layout per_rank`` bounds each rank's reads instead of the global stream's.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator
from fractions import Fraction

from ..mixing.sampler import MixtureSampler

__all__ = ["add_mixture", "mixture_lines", "run_mixture"]


#: the sampler's argument names -> the options that give them, as the errors name them
_FLAGS = {"num_replicas": "--replicas", "batch_size": "--batch-size", "pass_": "--pass"}
_FLAGS |= {"source": "--where's source", "sample": "--where's sample", "step": "--step"}
_FLAGS |= {"sizes": "--sizes", "weights": "--weights", "seed": "--seed"}
_NAME = re.compile(rf"(?<![\w'-])({'|'.join(_FLAGS)})(?=\[|=| should)")


def _weight(text: str) -> float | Fraction:
    """A decimal as a float (the sampler reads it as the decimal it prints as), ``a/b`` exact."""
    try:
        exact = Fraction(text)
        weight = exact if "/" in text else float(exact)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(
            f"a weight should be a number or a fraction such as 0.3 or 1/3, but got {text!r}"
        ) from None
    except OverflowError:  # 1e400: no float holds it
        raise argparse.ArgumentTypeError(
            f"a weight should be at most {sys.float_info.max!r} (the largest float), or a "
            f"fraction a/b, but got {text!r}"
        ) from None
    if exact and not weight:  # 1e-400: a float holds it as 0, which would drop the source
        raise argparse.ArgumentTypeError(
            f"a weight should be 0 or a float above 0 (from {5e-324!r}), but got {text!r}, "
            "which a float holds as 0: scale the weights up, or give it as a fraction a/b"
        )
    return weight


def _change(text: str) -> tuple[int, list[float | Fraction]]:
    """``STEP:W1,W2,...``: the weights from that training step on."""
    step, _, weights = text.partition(":")
    if not (step.strip().isdigit() and weights):
        raise argparse.ArgumentTypeError(
            f"--change should be STEP:W1,W2,... such as 500:0.4,0.3,0.3, but got {text!r}"
        )
    return int(step), [_weight(w) for w in weights.split(",")]


def _read(text: str) -> tuple[int, int]:
    source, _, sample = text.partition(":")
    if not (source.strip().isdigit() and sample.strip().isdigit()):
        raise argparse.ArgumentTypeError(
            f"--where should be SOURCE:SAMPLE, two integers such as 2:17, but got {text!r}"
        )
    return int(source), int(sample)


def add_mixture(sub: argparse._SubParsersAction) -> None:
    """The ``mixture`` subcommand and its options (its errors print its own usage)."""
    p = sub.add_parser("mixture", help="print what each rank reads at one step of a mixture")
    p.set_defaults(mixture_parser=p)
    p.add_argument("--sizes", type=int, nargs="+", required=True, help="each source's length")
    p.add_argument("--weights", type=_weight, nargs="+", required=True, help="each source's weight")
    p.add_argument("--replicas", type=int, required=True, help="number of ranks")
    p.add_argument("--batch-size", type=int, required=True, help="a rank's micro-batch")
    p.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    p.add_argument("--no-shuffle", dest="shuffle", action="store_false", help="passes in order")
    p.add_argument(
        "--step", type=int, default=None, help="the step to print (default 0), not with --where"
    )
    p.add_argument(
        "--where", type=_read, default=None, metavar="K:I", help="when sample I of source K is read"
    )
    p.add_argument(
        "--pass",
        dest="pass_",
        type=int,
        default=None,
        metavar="PASS",
        help="with --where: its pass (default 0)",
    )
    p.add_argument(
        "--layout",
        choices=["global", "per_rank"],
        default="global",
        help="global (default): one stream whatever the ranks; per_rank: each rank's reads exact",
    )
    p.add_argument(
        "--change",
        type=_change,
        action="append",
        default=[],
        metavar="STEP:W1,W2,...",
        help="the weights from training step STEP on (repeat for a schedule)",
    )


def _label(s: MixtureSampler, index: int) -> str:
    k = max(k for k, offset in enumerate(s.offsets) if offset <= index and s.sizes[k])
    return f"{k}:{index - s.offsets[k]}"


def _in_flags(text: str) -> str:
    """An error of the sampler in the options' words: ``num_replicas=0`` is ``--replicas=0``, a
    schedule's ``weights[2][0]`` is ``--change #2's step``."""
    text = _NAME.sub(lambda m: _FLAGS[m[1]], text)
    text = re.sub(r"--weights\[0\]\[1\]", "--weights", text)  # the weights before any change
    text = re.sub(r"--weights\[(\d+)\]\[0\]", r"--change #\1's step", text)
    return re.sub(r"--weights\[(\d+)\]\[1\]", r"--change #\1's weights", text)


def _decimal(x: Fraction) -> str:
    """A share or a bound as a decimal of at most 6 significant digits (0.5, 0.333333)."""
    return f"{float(x):.6g}"


def _never(k: int, plan: list[tuple[int, list]]) -> str:
    """Why source ``k``'s sample is never read: its weight is 0 from some step on, for good."""
    zero = [step for step, ws in plan if not ws[k]]  # the steps from which its weight is 0 ...
    last = next((step for step, ws in reversed(plan) if ws[k]), None)  # ... its last positive
    since = min(step for step in zero if last is None or step > last)
    if since == 0:
        return "its weight is 0"
    return f"source {k}'s weight is 0 from step {since} on, before this sample's turn in its pass"


def mixture_lines(args: argparse.Namespace) -> Iterator[str]:
    """The lines to print; the sampler is built (and every argument checked) before the first."""
    if args.where is not None and args.step is not None:
        raise ValueError(
            f"--step is not used with --where (it finds the step that reads the sample): "
            f"give one of them, but got --step {args.step} and --where {args.where[0]}:{args.where[1]}"
        )
    if args.where is None and args.pass_ is not None:
        raise ValueError(
            f"--pass is the pass of the sample --where asks about: give --where SOURCE:SAMPLE "
            f"with it, but got --pass {args.pass_} alone"
        )
    plan = [(0, args.weights), *args.change]
    weights = plan if args.change else args.weights
    try:
        s = MixtureSampler(
            args.sizes,
            weights,
            args.batch_size,
            args.replicas,
            0,
            args.seed,
            args.shuffle,
            layout=getattr(args, "layout", "global"),
        )
        if args.where is not None:
            k, i = args.where
            pass_ = 0 if args.pass_ is None else args.pass_
            read = s.when_read(k, i, pass_)
        else:
            at_step = 0 if args.step is None else args.step
            batches = s.batch_at(at_step)
    except (TypeError, ValueError) as err:  # the sampler's words, in the options' words
        raise type(err)(_in_flags(str(err))) from None
    B = args.batch_size * args.replicas
    layout = getattr(args, "layout", "global")
    one, two = _decimal(s.bound()), _decimal(2 * s.bound())
    proven = (  # the layout's bound: the stream's prefixes, or each rank's reads
        f"every prefix of the stream within {one} and every global batch within {two}"
        if layout == "global"
        else f"every rank's reads within {two}"  # a change: each rank's phases carried
        if args.change
        else f"every global batch and every rank's reads within {two}"
    ) + " of a sample of each share (the proven bound"
    proven += ", changes included)" if args.change else ")"  # bound() is the schedule's
    exact = [[w if isinstance(w, Fraction) else Fraction(repr(w)) for w in ws] for _, ws in plan]
    shares = [", ".join(_decimal(w / sum(ws)) for w in ws) for ws in exact]
    head = [
        f"MixtureSampler(sizes={args.sizes}, num_replicas={args.replicas}, "
        f"batch_size={args.batch_size}, seed={args.seed}, shuffle={args.shuffle}, "
        f"layout={layout!r})",
        f"shares {shares[0]}; a global batch of {B}; {proven}",
        *(f"from step {step}: shares {text}" for (step, _), text in zip(plan[1:], shares[1:])),
    ]
    if args.where is not None:
        what = f"sample {i} of source {k} (index {s.offsets[k] + i}) in its pass {pass_}"
        if read is None:
            return iter([*head, f"{what} is never read: {_never(k, plan)}"])
        at = f"position {read.position}: step {read.step}, rank {read.rank}, slot {read.slot}"
        return iter([*head, f"{what} is read at {at}"])
    counts = [0] * len(args.sizes)
    for batch in batches:
        for index in batch:
            counts[int(_label(s, index).split(":")[0])] += 1
    first = at_step * B
    exact = exact[max(g for g, (step, _) in enumerate(plan) if step <= at_step)]
    total = sum(exact)
    return iter(
        [
            *head,
            f"step {at_step} (positions {first}..{first + B - 1}): source:sample",
            *(f"  rank {r}: {' '.join(_label(s, i) for i in b)}" for r, b in enumerate(batches)),
            f"  per source: {' / '.join(map(str, counts))} (shares x {B}: "
            + " / ".join(f"{float(w / total * B):g}" for w in exact)
            + ")",
        ]
    )


def run_mixture(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Print the lines; a bad argument is the ``mixture`` parser's error (exit 2, its usage),
    naming the option."""
    try:
        lines = mixture_lines(args)
    except (TypeError, ValueError) as err:
        getattr(args, "mixture_parser", parser).error(str(err))
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
