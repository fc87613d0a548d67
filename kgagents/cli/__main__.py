"""``python -m kgagents.cli``: the command line."""

from kgagents.cli import main

raise SystemExit(main())
