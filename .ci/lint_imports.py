"""`lint-imports` over a source checkout: import-linter seeing the folders under the one ``kgagents`` namespace.

grimp (import-linter's scanner) finds a package's folders without importing it, so in a source checkout it sees
``kgagents/`` alone: ``kgagents.core`` and ``kgagents.cli``, not ``graphs/``, ``nodes/``, ``tools/``, ``prompts/``
and ``evals/``, which an installed wheel holds inside ``kgagents/`` and a checkout keeps beside it (the package
finds them through a finder of its own, which grimp does not ask). So this script extends the package's
``__path__`` to the checkout's root, and grimp scans those folders as ``kgagents.graphs``, ``kgagents.nodes``, ...
— the names the code imports them by. The rest is ``lint-imports``
itself, with its own options (``--help``); the contracts are pyproject's ``[tool.importlinter]``.

    python .ci/lint_imports.py
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(ROOT)
sys.path.insert(0, ROOT)

from importlinter.cli import lint_imports_command  # noqa: E402

import kgagents  # noqa: E402

kgagents.__path__.append(ROOT)  # for grimp only (see above): at run time the five folders are all there is

if __name__ == "__main__":
    lint_imports_command()
