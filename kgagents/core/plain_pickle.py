"""Reading pickles that hold plain data only, such as STaRK's ``node_info.pkl``, without running their code.

A pickle is a program: its ``GLOBAL`` / ``STACK_GLOBAL`` opcodes import any callable by name and ``REDUCE`` calls
it, so ``pickle.load`` on a file from someone else runs what the file says (``os.system``, ``subprocess.Popen``,
...). :func:`load_plain` reads with an unpickler whose every import goes through :func:`admits`: only the types
a data file of dictionaries, lists, strings and numbers needs, and NumPy's arrays and scalars (what pandas and
NumPy leave in records built from a data frame). Anything else stops the load before it is imported, with
:class:`UnsafePickle` naming the file and the type the pickle asked for.

Dictionaries, lists, tuples, strings, bytes, numbers, booleans and ``None`` need no import at all (they are
opcodes of their own); sets and frozensets need one in pickles of protocol 2 and 3, bytes in protocol 2.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, BinaryIO

from kgagents.core.errors import KGAgentsError

__all__ = ["PLAIN_GLOBALS", "UnsafePickle", "admits", "load_plain"]

#: ``(module, name)`` of every global a plain-data pickle may import. NumPy's array and scalar reconstructors
#: rebuild values from bytes and a dtype (an object array's items go through this unpickler too); they are listed
#: under both module paths NumPy has used (``numpy.core`` before 2.0, ``numpy._core`` since).
PLAIN_GLOBALS: frozenset[tuple[str, str]] = frozenset({
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "bytearray"),
    ("builtins", "complex"),
    ("_codecs", "encode"),  # bytes in protocol 2 (``encode(text, "latin1")``)
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    *((module, name) for module in ("numpy.core.multiarray", "numpy._core.multiarray")
      for name in ("scalar", "_reconstruct")),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
})


class UnsafePickle(KGAgentsError, pickle.UnpicklingError, ValueError):
    """A pickle asked for a type that is not plain data (see :data:`PLAIN_GLOBALS`)."""

    def __init__(self, source: str, module: str, name: str) -> None:
        self.source, self.module, self.name = source, module, name
        super().__init__(f"{source} asks to load {module}.{name}, which is not plain data (dictionaries, lists, "
                         "strings, numbers, NumPy arrays): refused, since loading it could run code. Use only "
                         "files you downloaded from their publisher yourself")


def admits(module: str, name: str) -> bool:
    """Whether a plain-data pickle may import ``module.name`` (protocol 2 names Python's built-ins by their
    Python 2 module, ``__builtin__``, which the unpickler maps to ``builtins``)."""
    if module == "__builtin__":
        module = "builtins"
    return (module, name) in PLAIN_GLOBALS


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that imports only what :func:`admits` allows, and follows no persistent ids."""

    def __init__(self, file: BinaryIO, source: str) -> None:
        super().__init__(file)
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        if not admits(module, name):
            raise UnsafePickle(self._source, module, name)
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError(f"{self._source} refers to an object outside the file ({pid!r:.80})")


def load_plain(path: str | Path) -> Any:
    """The plain data pickled in ``path``; :class:`UnsafePickle` when the pickle asks for anything else,
    ``pickle.UnpicklingError`` / ``EOFError`` / ``OSError`` when it cannot be read at all."""
    with open(path, "rb") as f:
        return _PlainUnpickler(f, str(path)).load()
