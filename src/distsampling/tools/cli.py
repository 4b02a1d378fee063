r"""The command line: ``python -m distsampling split ...`` prints which rank reads what,
``python -m distsampling where ...`` which rank reads one index, and ``python -m distsampling
mixture ...`` what each rank reads at a step of a MixtureSampler, and when a sample is read.

``split`` answers the question every user starts with ("does each rank get a contiguous half,
or a random share?") by printing the plan: for each epoch, each rank's indices, and its batches
when ``--batch-size`` is given. Indices that are padding (repeats of the epoch's head, so that
every rank reads the same number) carry a ``*``. With ``--window T`` the items are windows of
``T`` consecutive samples (:class:`~distsampling.SequentialWindowedDataset`), printed as
``first-...-last``. At any size: past a few dozen a rank, each rank prints its count, how many
are padding and its first and last ``--head`` indices, computed at those positions only.

``where`` answers the reverse question in O(1) for ``--order index-shuffle`` or
``--no-shuffle``: the rank(s) and step(s) that read ``--index`` in ``--epoch``. torch's shuffled
order (``--order torch``, the default) is ``torch.randperm(N)``: both commands draw it only
while it fits in ``--max-memory`` and refuse, saying how much it takes, above. ``demo`` is a
short tour over the users' own small examples.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation

from .cli_mixture import add_mixture, run_mixture
from .render import MAX_MEMORY, ORDERS, format_where, split_lines

__all__ = ["main"]

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS |= {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


_DIGITS = 4300  # Python's own limit on the digits of an int it prints


def _number(text: str) -> Decimal | None:
    """``text`` as an exact number: ``1000``, ``1_000_000``, ``1e9``, ``1.5e3``, ``2**30``;
    ``None`` if it is none of these (or has more than 4300 digits)."""
    power = re.fullmatch(r"\s*(\d[\d_]*)\s*\*\*\s*(\d[\d_]*)\s*", text)
    try:
        if power:  # a ** b, computed only where the result prints
            base, exp = int(power[1]), int(power[2])
            if exp * base.bit_length() > 3.33 * _DIGITS:
                return None
            return Decimal(base**exp)
        value = Decimal(text.strip())  # digits, underscores, a fraction, an exponent
    except (InvalidOperation, ValueError):
        return None
    return value if value.is_finite() and value.adjusted() < _DIGITS else None


def _integer(name: str) -> Callable[[str], int]:
    """An integer option: written ``1000000000``, ``1_000_000_000``, ``1e9`` or ``2**30``, as
    long as it is a whole number (``1.5e0`` is refused, naming the option and the text)."""

    def parse(text: str) -> int:
        value = _number(text)
        if value is None or value != value.to_integral_value():
            raise argparse.ArgumentTypeError(
                f"{name} should be an integer, written e.g. 1000000, 1_000_000, 1e6 or 2**20, "
                f"but got {name}={text!r}"
            )
        return int(value)

    return parse


def _memory(text: str) -> int:
    """``--max-memory``: bytes, written ``4000000000``, ``4e9``, ``2**32``, ``1GiB``, ``1.5GB``, ..."""
    m = re.fullmatch(r"(.*?)\s*([a-zA-Z]*)\s*", text)
    value = _number(m[1]) if m[1] and m[2].lower() in _UNITS else None
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(
            f"max_memory should be a number of bytes with an optional unit (B, kB, MB, GB, TB, "
            f"KiB, MiB, GiB, TiB), e.g. 1GiB, 500MB or 1e9, but got max_memory={text!r}"
        )
    return int(value * _UNITS[m[2].lower()])  # a fraction of a byte is cut


def _sampler_options(parser: argparse.ArgumentParser) -> None:
    """The options ``split`` and ``where`` share: the sampler's arguments and its order."""
    parser.add_argument(
        "--size",
        type=_integer("size"),
        required=True,
        help="dataset length (also written 1e9, 1_000_000_000 or 2**30)",
    )
    parser.add_argument(
        "--replicas", type=_integer("replicas"), required=True, help="number of ranks"
    )
    parser.add_argument("--seed", type=_integer("seed"), default=0, help="base seed (default 0)")
    parser.add_argument(
        "--no-shuffle", dest="shuffle", action="store_false", help="keep dataset order"
    )
    parser.add_argument("--drop-last", action="store_true", help="cut the tail instead of padding")
    parser.add_argument(
        "--order",
        choices=ORDERS,
        default="torch",
        help="torch: DistributedSampler's order, torch.randperm(N) (default); index-shuffle: "
        "IndexShuffleSampler's, computed only at the positions asked for",
    )
    parser.add_argument(
        "--max-memory",
        type=_memory,
        default=MAX_MEMORY,
        metavar="BYTES",
        help="the most torch's shuffled order may take, e.g. 4GiB (default 1GiB)",
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``python -m distsampling``."""
    first = " ".join(__doc__.split("\n\n")[0].split()).replace("``", "")  # the first paragraph
    parser = argparse.ArgumentParser(prog="python -m distsampling", description=first)
    sub = parser.add_subparsers(dest="command", required=True)
    split = sub.add_parser("split", help="print which rank reads which index, per epoch")
    _sampler_options(split)
    split.add_argument(
        "--epochs", type=_integer("epochs"), default=1, help="epochs to show (default 1)"
    )
    split.add_argument(
        "--batch-size",
        type=_integer("batch_size"),
        default=None,
        help="also group each rank's indices into batches",
    )
    split.add_argument(
        "--window",
        type=_integer("window"),
        default=None,
        help="split windows of this many consecutive samples (from a random offset) instead",
    )
    split.add_argument(
        "--head",
        type=_integer("head"),
        default=5,
        help="past a few dozen a rank, show each rank's first and last this many (default 5)",
    )
    where = sub.add_parser("where", help="print which rank reads one index, and at which step")
    _sampler_options(where)
    where.add_argument(
        "--index", type=_integer("index"), required=True, help="the dataset index asked about"
    )
    where.add_argument("--epoch", type=_integer("epoch"), default=0, help="the epoch (default 0)")
    sub.add_parser("demo", help="a tour over the users' own small examples")
    add_mixture(sub)  # `mixture`: its options and lines are in cli_mixture.py
    args = parser.parse_args(argv)
    if args.command == "mixture":
        return run_mixture(parser, args)
    try:
        if args.command == "demo":
            from .demo import main as demo

            return demo()
        sampler = {
            "shuffle": args.shuffle,
            "seed": args.seed,
            "drop_last": args.drop_last,
            "order": args.order,
            "max_memory": args.max_memory,
        }
        if args.command == "where":
            print(format_where(args.index, args.size, args.replicas, epoch=args.epoch, **sampler))
            return None
        shown = {"window": args.window, "batch_size": args.batch_size, "head": args.head}
        lines = split_lines(args.size, args.replicas, args.epochs, **shown, **sampler)
    except (TypeError, ValueError) as err:
        parser.error(str(err))
    try:  # every argument is checked: print the lines as they are computed
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
    return None
