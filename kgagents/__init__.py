"""kgagents: knowledge-graph reasoning agents as checkpointed LangGraph state machines.

The project's folders keep their layout — ``graphs/``, ``nodes/``, ``tools/``, ``prompts/`` and ``evals/`` beside
this package — and import under one namespace: ``kgagents.graphs``, ``kgagents.nodes``, ``kgagents.tools``,
``kgagents.prompts``, ``kgagents.evals``. An installed wheel holds them inside ``kgagents/`` (pyproject's
package-dir mapping); a source checkout (an editable install, a clone on ``sys.path``) finds them beside this
folder through the finder below, which knows those five names and no others (``kgagents.tests`` stays
unimportable), so every module has one name wherever it runs.
"""

import sys as _sys
from importlib.machinery import ModuleSpec as _ModuleSpec
from importlib.util import spec_from_file_location as _spec_from_file_location
from pathlib import Path as _Path

_NAMESPACED = ("graphs", "nodes", "tools", "prompts", "evals")


class _CheckoutFinder:
    """Finds ``kgagents.<name>`` for each of the five folders of a source checkout, in the folder ``<root>/<name>``
    beside ``kgagents/``; every other name is left to the other finders. Their own modules are found through
    their ``__path__``, as in any package."""

    def __init__(self, root: _Path) -> None:
        self.folders = {f"{__name__}.{name}": root / name for name in _NAMESPACED}

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> _ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return _spec_from_file_location(fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])


_here = _Path(__file__).resolve().parent
if not (_here / "graphs").is_dir() and all((_here.parent / name / "__init__.py").is_file() for name in _NAMESPACED):
    # a source checkout: the subpackages live beside kgagents/, not in it. First on the meta path: an editable
    # install's own finder maps the same names, to the checkout it was installed from, which may be another one.
    _sys.meta_path.insert(0, _CheckoutFinder(_here.parent))
del _here
