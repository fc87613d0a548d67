"""kgagents: knowledge-graph reasoning agents as checkpointed LangGraph state machines.

The project's folders keep their layout — ``graphs/``, ``nodes/``, ``tools/``, ``prompts/`` and ``evals/`` beside
this package — and import under one namespace: ``kgagents.graphs``, ``kgagents.nodes``, ``kgagents.tools``,
``kgagents.prompts``, ``kgagents.evals``. An installed wheel holds them inside ``kgagents/`` (pyproject's
package-dir mapping); a source checkout (an editable install, a clone on ``sys.path``) finds them beside this
folder through the lookup below, so every module has one name wherever it runs.
"""

from pathlib import Path as _Path

_NAMESPACED = ("graphs", "nodes", "tools", "prompts", "evals")
_here = _Path(__file__).resolve().parent
if not (_here / "graphs").is_dir() and all((_here.parent / name / "__init__.py").is_file() for name in _NAMESPACED):
    # a source checkout: the subpackages live beside kgagents/, not in it
    __path__.append(str(_here.parent))  # the package's own __path__
del _Path, _here
