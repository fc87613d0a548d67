"""``python -m kgagents.cli``: the ``kgagents`` command."""

from kgagents.cli import main

raise SystemExit(main())
