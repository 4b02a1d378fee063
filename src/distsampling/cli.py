r"""The command line: ``python -m distsampling split ...`` prints which rank reads what.

``split`` answers the question every user starts with ("does each rank get a contiguous half,
or a random share?") by printing the plan: for each epoch, each rank's indices, and its batches
when ``--batch-size`` is given. Indices that are padding (repeats of the epoch's head, so that
every rank reads the same number) carry a ``*``. With ``--window T`` the items are windows of
``T`` consecutive samples (:class:`~distsampling.SequentialWindowedDataset`), printed as
``first-...-last``. ``demo`` is a short tour over the users' own small examples.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .render import format_split, format_windows

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``python -m distsampling``."""
    parser = argparse.ArgumentParser(
        prog="python -m distsampling", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    split = sub.add_parser("split", help="print which rank reads which index, per epoch")
    split.add_argument("--size", type=int, required=True, help="dataset length")
    split.add_argument("--replicas", type=int, required=True, help="number of ranks")
    split.add_argument("--epochs", type=int, default=1, help="epochs to show (default 1)")
    split.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    split.add_argument(
        "--no-shuffle", dest="shuffle", action="store_false", help="keep dataset order"
    )
    split.add_argument("--drop-last", action="store_true", help="cut the tail instead of padding")
    split.add_argument(
        "--batch-size", type=int, default=None, help="also group each rank's indices into batches"
    )
    split.add_argument(
        "--window",
        type=int,
        default=None,
        help="split windows of this many consecutive samples (from a random offset) instead",
    )
    sub.add_parser("demo", help="a tour over the users' own small examples")
    args = parser.parse_args(argv)
    try:
        if args.command == "split" and args.window is not None:
            print(
                format_windows(
                    args.size,
                    args.window,
                    args.replicas,
                    args.epochs,
                    shuffle=args.shuffle,
                    seed=args.seed,
                    drop_last=args.drop_last,
                    batch_size=args.batch_size,
                )
            )
        elif args.command == "split":
            print(
                format_split(
                    args.size,
                    args.replicas,
                    args.epochs,
                    shuffle=args.shuffle,
                    seed=args.seed,
                    drop_last=args.drop_last,
                    batch_size=args.batch_size,
                )
            )
        else:
            from .demo import main as demo

            demo()
    except (TypeError, ValueError) as err:
        parser.error(str(err))
