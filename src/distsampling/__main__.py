"""``python -m distsampling``: see :mod:`distsampling.cli`."""

from .cli import main

if __name__ == "__main__":
    main()
