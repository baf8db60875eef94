"""python -m ortlite: the `ortlite` command (ortlite/cli.py)."""

import sys

from ortlite.cli import main

if __name__ == "__main__":
    sys.exit(main())
