"""``python -m kgagents.cli``: the ``kgagents`` command."""

from kgagents.cli import main

if __name__ == "__main__":  # imported (a walk over the package's modules): nothing runs
    raise SystemExit(main())
