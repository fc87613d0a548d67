"""Reading pickles that hold plain data only, such as STaRK's ``node_info.pkl``, without running their code.

A pickle is a program: its ``GLOBAL`` / ``STACK_GLOBAL`` opcodes import any callable by name and ``REDUCE`` calls
it, so ``pickle.load`` on a file from someone else runs what the file says (``os.system``, ``subprocess.Popen``,
...). :func:`load_plain` reads with an unpickler whose every import goes through :func:`admits`: only the names a
data file of dictionaries, lists, strings and numbers needs, and NumPy's arrays and scalars (what pandas and NumPy
leave in records built from a data frame). Anything else stops the load before it is imported, with
:class:`UnsafePickle` naming the file and the type the pickle asked for.

An admitted name is never the callable it names. NumPy's own reconstructors trust what they are given: a dtype's
pickled state sets its flags (a dtype can claim that its object field holds no objects, and an array built on it
reads eight bytes of the file as a pointer), a structured dtype places fields past its item's end. So each
admitted name maps to a constructor of this module (:data:`_CONSTRUCTORS`) that accepts only what plain data is:

- a dtype given by the name of a plain kind (:data:`_DTYPE_NAME`: booleans, integers, floats, complex numbers,
  fixed-size text and bytes, Python objects) and a byte order; no fields, no sub-arrays, no metadata, and the flags
  of the pickle never read (NumPy derives them from the name again);
- a scalar of such a dtype from exactly its item's bytes, returned as the Python value it holds (``str``,
  ``int``, ``float``, ``bool``, ``complex``, ``bytes``);
- an array of such a dtype from exactly ``shape × item size`` bytes (an object array from a list of exactly its
  length, each item read by this same unpickler), built once the load is over, so that nothing in the pickle can
  touch a real NumPy object;
- a ``bytearray`` of given bytes (never of a size: ``bytearray(2**31)`` would allocate 2 GiB from 32 bytes), bytes
  from text in Latin-1 and empty bytes (protocol 2), sets, complex numbers.

Whatever else goes wrong while reading (a truncated file, a length the file cannot hold, memory) is an
:class:`UnsafePickle` too, naming the file: never a traceback from inside the unpickler.

Dictionaries, lists, tuples, strings, bytes, numbers, booleans and ``None`` need no import at all (they are
opcodes of their own); sets and frozensets need one in pickles of protocol 2 and 3, bytes in protocol 2.
"""

from __future__ import annotations

import math
import pickle
import re
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np

from kgagents.core.errors import KGAgentsError

__all__ = ["PLAIN_GLOBALS", "UnsafePickle", "admits", "dtype_of", "load_plain"]

_NUMPY_CORE = ("numpy.core.multiarray", "numpy._core.multiarray")
_NUMPY_NUMERIC = ("numpy.core.numeric", "numpy._core.numeric")

#: The dtypes plain data has, by the name NumPy pickles them with: ``b1``, ``i1``..``i8``, ``u1``..``u8``,
#: ``f2``/``f4``/``f8``, ``c8``/``c16``, text ``U<n>`` and bytes ``S<n>`` of a fixed length, objects ``O`` / ``O8``.
_DTYPE_NAME = re.compile(r"b1|[iu][1248]|f[248]|c(?:8|16)|U[0-9]{1,7}|S[0-9]{1,8}|O8?")
_BYTE_ORDERS = ("<", ">", "|", "=")
#: The most dimensions an array of a plain-data pickle may have (NumPy allows 64; data frames have 1 or 2).
MAX_DIMENSIONS = 32
_LATIN_1 = ("latin1", "latin-1", "latin_1", "iso-8859-1", "iso8859-1")


class UnsafePickle(KGAgentsError, pickle.UnpicklingError, ValueError):
    """A pickle that is not plain data: it asked for a type outside :data:`PLAIN_GLOBALS`, gave an admitted one
    values plain data never has, or could not be read within what the file holds."""

    def __init__(self, source: str, problem: str) -> None:
        self.source, self.problem = source, problem
        super().__init__(f"{source} {problem}: refused, since loading it could run code or exhaust memory. Use "
                         "only files you downloaded from their publisher yourself")


def admits(module: str, name: str) -> bool:
    """Whether a plain-data pickle may name ``module.name`` (protocol 2 names Python's built-ins by their
    Python 2 module, ``__builtin__``, which the unpickler maps to ``builtins``)."""
    if module == "__builtin__":
        module = "builtins"
    return (module, name) in PLAIN_GLOBALS


class _Refused(KGAgentsError):
    """A constructor's refusal, given its file's name by :func:`load_plain`."""


# ----------------------------------------------------------------------------------------------------------------
# Pure checks: which dtype a pickled name and state stand for
# ----------------------------------------------------------------------------------------------------------------
def _item_size(name: str) -> int:
    """The item size of a plain dtype name that :data:`_DTYPE_NAME` matches (``-1``: NumPy's own, not stated)."""
    if name[0] == "U":
        return 4 * int(name[1:])
    if name[0] == "S":
        return int(name[1:])
    return -1


def dtype_of(name: Any, state: Any = None) -> np.dtype[Any]:
    """The NumPy dtype a plain-data pickle describes by ``name`` (NumPy's ``dtype`` reduce arguments' first item)
    and ``state`` (its ``__setstate__`` tuple; ``None``: none given): a plain kind of :data:`_DTYPE_NAME` in the
    byte order the state gives. Anything else -- fields, sub-arrays, metadata (datetimes), a size that is not the
    name's -- raises :class:`_Refused`; the state's flags and alignment are never read."""
    if not (isinstance(name, str) and _DTYPE_NAME.fullmatch(name)):
        raise _Refused(f"names a NumPy dtype {str(name)[:40]!r} that is not plain data (numbers, booleans, text, "
                       "bytes, objects)")
    order = "="
    if state is not None:
        if not (isinstance(state, tuple) and len(state) == 8 and state[0] == 3):
            raise _Refused(f"gives the NumPy dtype {name!r} a state plain data never has (fields, sub-arrays or "
                           "metadata)")
        order, subarray, names, fields, size = state[1], state[2], state[3], state[4], state[5]
        if order not in _BYTE_ORDERS or subarray is not None or names is not None or fields is not None:
            raise _Refused(f"gives the NumPy dtype {name!r} fields, a sub-array or byte order {str(order)[:8]!r}")
        if size not in (-1, _item_size(name)):
            raise _Refused(f"says the NumPy dtype {name!r} has items of {str(size)[:20]} bytes")
    dtype = np.dtype(object) if name[0] == "O" else np.dtype(name)
    if dtype.kind not in "iufcU" or order not in ("<", ">"):
        return dtype
    return dtype.newbyteorder("<" if order == "<" else ">")


def _shape(value: Any) -> tuple[int, ...]:
    if not (isinstance(value, tuple) and len(value) <= MAX_DIMENSIONS
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value)):
        raise _Refused(f"gives a NumPy array the shape {str(value)[:60]} (at most {MAX_DIMENSIONS} sizes of 0 or "
                       "more)")
    return value


# ----------------------------------------------------------------------------------------------------------------
# What the admitted names stand for while a pickle is read
# ----------------------------------------------------------------------------------------------------------------
class _Dtype:
    """``numpy.dtype(name, align, copy)`` as a pickle builds it: the name now, the state (``BUILD``) once."""

    __slots__ = ("dtype", "name", "stated")

    def __init__(self, name: Any = None, align: Any = False, copy: Any = True) -> None:
        self.name = name
        self.dtype = dtype_of(name)
        self.stated = False

    def __setstate__(self, state: Any) -> None:
        if self.stated:
            raise _Refused("sets a NumPy dtype's state twice")
        self.dtype, self.stated = dtype_of(self.name, state), True


def _the_dtype(value: Any) -> np.dtype[Any]:
    if not isinstance(value, _Dtype):
        raise _Refused("gives a NumPy array or scalar something else than a dtype")
    return value.dtype


class _ArrayType:
    """What ``numpy.ndarray`` stands for: only the first argument of ``_reconstruct``."""


class _Array:
    """A NumPy array of a plain-data pickle: its data checked when given, the array made once the load is over
    (:func:`_finished`), so that the pickle never holds, changes or passes on a real NumPy object."""

    __slots__ = ("dtype", "items", "order", "raw", "shape")

    def __init__(self) -> None:
        self.shape: tuple[int, ...] | None = None
        self.order: Literal["C", "F"] = "C"

    def fill(self, dtype: np.dtype[Any], shape: tuple[int, ...], order: Literal["C", "F"], raw: Any) -> _Array:
        count = math.prod(shape)
        self.dtype, self.shape, self.order = dtype, shape, order
        if dtype.hasobject:
            if not (isinstance(raw, list) and len(raw) == count):
                raise _Refused(f"gives an object array of {count} item(s) something else than a list of them")
            self.items, self.raw = raw, b""
            return self
        if not isinstance(raw, (bytes, bytearray)) or len(raw) != count * dtype.itemsize:
            size = len(raw) if isinstance(raw, (bytes, bytearray)) else type(raw).__name__
            raise _Refused(f"gives an array of shape {shape} and dtype {dtype} {size} bytes of data; it needs "
                           f"{count * dtype.itemsize}")
        self.items, self.raw = [], bytes(raw)
        return self

    def __setstate__(self, state: Any) -> None:
        if self.shape is not None:
            raise _Refused("sets a NumPy array's state twice")
        if isinstance(state, tuple) and len(state) == 5 and state[0] == 1:
            state = state[1:]
        if not (isinstance(state, tuple) and len(state) == 4 and isinstance(state[2], bool)):
            raise _Refused("gives a NumPy array a state that is not (version, shape, dtype, order, data)")
        shape, dtype, fortran, raw = state
        self.fill(_the_dtype(dtype), _shape(shape), "F" if fortran else "C", raw)

    def array(self, items: list[Any]) -> np.ndarray[Any, Any]:
        """The array, ``items``: the object array's items as the load finished them."""
        if self.shape is None:
            raise _Refused("holds a NumPy array that was never given its data")
        if self.dtype.hasobject:
            flat = np.empty(len(items), dtype=object)
            for i, item in enumerate(items):
                flat[i] = item
            return flat.reshape(self.shape, order=self.order)
        flat = np.frombuffer(self.raw, dtype=self.dtype).copy()
        return flat.reshape(self.shape, order=self.order)


def _reconstruct(subtype: Any, shape: Any = (0,), typecode: Any = b"b") -> _Array:
    """``numpy.core.multiarray._reconstruct(ndarray, (0,), b'b')``: an array whose state follows."""
    if not isinstance(subtype, _ArrayType) or shape != (0,) or typecode not in (b"b", "b"):
        raise _Refused("asks NumPy for an array of another kind than a plain ndarray")
    return _Array()


def _frombuffer(buffer: Any, dtype: Any, shape: Any, order: Any) -> _Array:
    """``numpy.core.numeric._frombuffer(data, dtype, shape, order)`` (protocol 5): an array of plain numbers."""
    plain = _the_dtype(dtype)
    if plain.hasobject or order not in ("C", "F"):
        raise _Refused("asks NumPy to read objects or an unknown order from bytes")
    return _Array().fill(plain, _shape(shape), "F" if order == "F" else "C", buffer)


def _scalar(dtype: Any, data: Any = None) -> Any:
    """``numpy.core.multiarray.scalar(dtype, data)``: the Python value of one item of a plain dtype."""
    plain = _the_dtype(dtype)
    if plain.hasobject or not isinstance(data, (bytes, bytearray)) or len(data) != plain.itemsize:
        raise _Refused(f"gives a NumPy {plain} scalar something else than its {plain.itemsize} bytes")
    return np.frombuffer(bytes(data), dtype=plain)[0].item()


def _bytearray(source: Any = b"", encoding: Any = None) -> bytearray:
    """``bytearray`` of given bytes (protocol 3 and 4) or Latin-1 text (protocol 2); never of a size."""
    if isinstance(source, (bytes, bytearray)) and encoding is None:
        return bytearray(source)
    if isinstance(source, str) and encoding in _LATIN_1:
        return bytearray(source.encode("latin-1"))
    raise _Refused("asks for a bytearray of a size or an encoding (only of given bytes)")


def _bytes(*arguments: Any) -> bytes:
    """``bytes()``: empty bytes in protocol 2; never of a size."""
    if arguments:
        raise _Refused("asks for bytes of a size or of something (protocol 2 makes only empty ones so)")
    return b""


def _encode(text: Any, encoding: Any = "utf-8") -> bytes:
    """``_codecs.encode(text, "latin1")``: bytes in protocol 2."""
    if isinstance(text, str) and encoding in _LATIN_1:
        return text.encode("latin-1")
    raise _Refused(f"asks to encode something else than text in Latin-1 ({str(encoding)[:20]!r})")


def _complex(real: Any = 0, imag: Any = 0) -> complex:
    if not all(isinstance(part, (int, float)) for part in (real, imag)):
        raise _Refused("asks for a complex number of something else than numbers")
    return complex(real, imag)


_ARRAY_TYPE = _ArrayType()
#: What each admitted global stands for while a pickle is read.
_CONSTRUCTORS: dict[tuple[str, str], Any] = {
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "bytearray"): _bytearray,
    ("builtins", "complex"): _complex,
    ("builtins", "bytes"): _bytes,
    ("_codecs", "encode"): _encode,
    ("numpy", "dtype"): _Dtype,
    ("numpy", "ndarray"): _ARRAY_TYPE,
    **{(module, "scalar"): _scalar for module in _NUMPY_CORE},
    **{(module, "_reconstruct"): _reconstruct for module in _NUMPY_CORE},
    **{(module, "_frombuffer"): _frombuffer for module in _NUMPY_NUMERIC},
}
#: ``(module, name)`` of every global a plain-data pickle may name (NumPy's reconstructors under both module paths
#: NumPy has used: ``numpy.core`` before 2.0, ``numpy._core`` since); each stands for its constructor above.
PLAIN_GLOBALS: frozenset[tuple[str, str]] = frozenset(_CONSTRUCTORS)


class _PlainUnpickler(pickle.Unpickler):
    """An unpickler whose globals are :data:`_CONSTRUCTORS` only, and that follows no persistent ids."""

    def __init__(self, file: BinaryIO, source: str) -> None:
        super().__init__(file)
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        if not admits(module, name):
            raise UnsafePickle(self._source, f"asks to load {module}.{name}, which is not plain data (dictionaries, "
                                             "lists, strings, numbers, NumPy arrays)")
        return _CONSTRUCTORS[("builtins" if module == "__builtin__" else module, name)]

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickle(self._source, f"refers to an object outside the file ({pid!r:.80})")


def _finished(value: Any) -> Any:
    """``value`` with every array of the load made (:class:`_Array`), in place where containers allow it; an array
    where plain data cannot hold one (a dictionary's key, a set's member) is refused."""
    done: dict[int, Any] = {}

    def visit(item: Any) -> Any:
        if isinstance(item, (str, bytes, int, float, complex, type(None))):
            return item
        known = done.get(id(item))
        if known is not None:
            if isinstance(known, _Array):
                raise _Refused("holds an object array that holds itself")
            return known
        if isinstance(item, _Array):
            done[id(item)] = item
            made = item.array([visit(x) for x in item.items])
            done[id(item)] = made
            return made
        if isinstance(item, list):
            done[id(item)] = item
            item[:] = [visit(x) for x in item]
            return item
        if isinstance(item, dict):
            done[id(item)] = item
            if any(isinstance(key, _Array) for key in item):
                raise _Refused("holds a NumPy array as a dictionary's key")
            for key in item:
                item[key] = visit(item[key])
            return item
        if isinstance(item, (set, frozenset)):
            if any(isinstance(member, _Array) for member in item):
                raise _Refused("holds a NumPy array in a set")
            done[id(item)] = item
            return item
        if isinstance(item, tuple):
            made_tuple = tuple(visit(x) for x in item)
            done[id(item)] = made_tuple
            return made_tuple
        if isinstance(item, _Dtype):
            return item.dtype
        if isinstance(item, _ArrayType):
            raise _Refused("holds numpy.ndarray itself as a value")
        return item

    return visit(value)


def load_plain(path: str | Path) -> Any:
    """The plain data pickled in ``path`` (see the module docstring); :class:`UnsafePickle` naming the file when the
    pickle asks for anything else or cannot be read within what it holds, ``OSError`` when the file cannot be
    opened."""
    source = str(path)
    with open(path, "rb") as f:
        try:
            return _finished(_PlainUnpickler(f, source).load())
        except UnsafePickle:
            raise
        except _Refused as exc:
            raise UnsafePickle(source, str(exc)) from None
        except MemoryError:
            raise UnsafePickle(source, "asks for more memory than this process may have (a length no file of its "
                                       "size holds)") from None
        except RecursionError:
            raise UnsafePickle(source, "is nested too deeply for plain data") from None
        except Exception as exc:  # noqa: BLE001 - anything the unpickler raises on a damaged or hostile file
            raise UnsafePickle(source, f"is not a readable plain-data pickle ({type(exc).__name__}: "
                                       f"{str(exc)[:200]})") from None

