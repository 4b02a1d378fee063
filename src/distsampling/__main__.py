"""``python -m distsampling``: see :mod:`distsampling.tools.cli`."""

from .tools.cli import main

if __name__ == "__main__":
    main()
