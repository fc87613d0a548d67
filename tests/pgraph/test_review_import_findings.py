"""Security review of the graph import limits (branch review-sandbox): reproductions. A FAILING test is a finding.

The claim (docs/security.md, docs/graphs.md): a hostile graph file is refused with a clear error naming the file,
the limit and its flag, "and a bomb's import stays within a bounded amount of memory (tested under a 1 GB
address-space limit)". Each import here runs ``kgagents graph import`` in a child process under the same 1 GB
address-space limit as tests/pgraph/test_import_limits.py, and expects a clean refusal (exit 2, no traceback).
"""

from __future__ import annotations

import gzip
import os
import pickle
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from kgagents.tools.pgraph import import_graph

PROJECT = Path(__file__).resolve().parents[2]
MB = 1 << 20
ADDRESS_SPACE = 1024 * MB


def _import_limited(source: Path, fmt: str, out: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    env = {**os.environ, "PYTHONPATH": str(PROJECT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("KGAGENTS_GRAPH_MAX_")}
    return subprocess.run([sys.executable, "-m", "kgagents.cli", "graph", "import", str(source), "--format", fmt,
                           "--to", str(out), "--quiet"], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=PROJECT, preexec_fn=limit, check=False)


def _assert_clean_refusal(done: subprocess.CompletedProcess[str], source: Path) -> None:
    tail = done.stderr[-1500:]
    assert done.returncode == 2, f"exit {done.returncode} (negative: killed by a signal): {tail}"
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, tail
    assert str(source) in done.stderr and "raise it with --max-" in done.stderr, tail


# ---------------------------------------------------------------------------------------------------------
# Finding: Parquet is checked by what its metadata says, which counts encoded, not decoded, data
# ---------------------------------------------------------------------------------------------------------
def _parquet_edges_bomb(folder: Path, edges: int) -> Path:
    """A STaRK folder whose edge list holds ``edges`` edges between ``edges + 1`` distinct nodes in ~400 KB:
    DELTA_BINARY_PACKED ids 0, 1, 2, ... take no bits per value, so ``total_byte_size`` (what
    ``_check_parquet`` adds up) is ~1.5 MB for 30 million rows; the builder then interns 30 million ids."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"id": ["0"], "name": ["zero"]}), folder / "nodes.parquet")
    schema = pa.schema([("src", pa.int64()), ("relation", pa.string()), ("dst", pa.int64())])
    group = 1 << 20
    with pq.ParquetWriter(folder / "edges.parquet", schema, compression="zstd", use_dictionary=["relation"],
                          column_encoding={"src": "DELTA_BINARY_PACKED", "dst": "DELTA_BINARY_PACKED"}) as writer:
        for start in range(0, edges, group):
            k = min(group, edges - start)
            writer.write_table(pa.table({"src": pa.array(range(start, start + k), pa.int64()),
                                         "relation": pa.array(["r"] * k),
                                         "dst": pa.array(range(start + 1, start + k + 1), pa.int64())},
                                        schema=schema))
    return folder / "edges.parquet"


@pytest.mark.slow
def test_a_parquet_encoding_bomb_is_refused_within_bounded_memory(tmp_path):
    edges = _parquet_edges_bomb(tmp_path / "kb", 30_000_000)
    assert edges.stat().st_size < MB
    done = _import_limited(tmp_path / "kb", "stark", tmp_path / "out")
    _assert_clean_refusal(done, edges)  # today: a MemoryError traceback from GraphBuilder._intern


@pytest.mark.slow
def test_a_parquet_dictionary_bomb_is_refused_within_bounded_memory(tmp_path):
    """One 40 MB text value in a dictionary page, referenced by a million rows (an RLE run): the metadata says
    52 MB (under the 64 MB every file may expand to), a batch of 65,536 rows is 2.6 TB of text. Today the
    process aborts in Arrow (``std::bad_alloc``, SIGABRT) under 1 GB; with more memory it takes all it gets
    before a ``MemoryError``."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    kb = tmp_path / "kb"
    kb.mkdir()
    rows = 1_000_000
    text = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["x" * (40 * MB)]))
    pq.write_table(pa.table({"id": pa.array([str(i) for i in range(rows)]), "text": text}), kb / "nodes.parquet",
                   compression="zstd")
    pq.write_table(pa.table({"src": ["0"], "relation": ["r"], "dst": ["1"]}), kb / "edges.parquet")
    assert (kb / "nodes.parquet").stat().st_size < MB
    done = _import_limited(kb, "stark", tmp_path / "out")
    _assert_clean_refusal(done, kb / "nodes.parquet")


# ---------------------------------------------------------------------------------------------------------
# Finding: files within every limit whose parse needs more than the 1 GB the bombs are tested under
# ---------------------------------------------------------------------------------------------------------
def _two_char_strings(n_bytes: int) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    pairs = [f'"{a}{b}"' for a in alphabet for b in alphabet]
    return ",".join(pairs * (n_bytes // (len(pairs) * 5) + 1))


@pytest.mark.slow
@pytest.mark.parametrize("case", ["ARK-V1 JSON (60 MB of [])", "CRAG calls (60 MB of {})",
                                  "JSON-lines triples (.gz of 0.4 MB, one 60 MB line)"])
def test_files_within_the_limits_do_not_run_the_import_out_of_memory(tmp_path, case):
    """ARK-V1 and CRAG files are parsed whole up to ``max_document_mb`` (256 MB), and a line or record up to
    ``max_record_mb`` (64 MB); ``json.loads`` makes ~20 times the text in objects (an empty list: 56 bytes from
    3 characters; a 2-character string: ~51 bytes from 5). A 60 MB ARK file, and a 0.4 MB .jsonl.gz (64 MB of
    text is let through whatever the ratio), end in a MemoryError traceback under 1 GB; the limits bound memory
    at about 20 x 256 MB = 5 GB, not the 1 GB the docs say the bombs are tested under."""
    if case.startswith("ARK"):
        source, fmt = tmp_path / "ark.json", "ark"
        source.write_text("[" + ",".join(["[]"] * (20 * MB)) + "]")
    elif case.startswith("CRAG"):
        source, fmt = tmp_path / "crag.json", "crag"
        source.write_text('{"calls": [' + ",".join(["{}"] * (20 * MB)) + "]}")
    else:
        source, fmt = tmp_path / "t.jsonl.gz", "triples"
        with gzip.open(source, "wt", compresslevel=9) as f:
            f.write('["h", "r", "t", {"q": [' + _two_char_strings(60 * MB) + ']}]\n')
        assert source.stat().st_size < MB
    done = _import_limited(source, fmt, tmp_path / "out")
    _assert_clean_refusal(done, source)


# ---------------------------------------------------------------------------------------------------------
# Finding: a FIFO hangs the import
# ---------------------------------------------------------------------------------------------------------
def test_a_fifo_is_refused_not_waited_on(tmp_path):
    """A source that is a named pipe (nobody writes to it): the import waits forever instead of saying that it
    is no regular file."""
    fifo = tmp_path / "graph.tsv"
    os.mkfifo(fifo)
    try:
        done = _import_limited(fifo, "triples", tmp_path / "out", timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("kgagents graph import of a FIFO still waits after 15 s")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-1000:]


# ---------------------------------------------------------------------------------------------------------
# Pre-existing (not in the diff), in the same claim "files handed to the user are hostile"
# ---------------------------------------------------------------------------------------------------------
class _Marker:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):  # what a hostile node_info.pkl does on load
        return (open, (self.path, "w"))


def test_importing_a_folder_never_runs_code_from_it(tmp_path):
    """``kgagents graph import FOLDER`` detects a folder with ``node_info.pkl`` as STaRK's processed layout and
    unpickles it: code from the folder runs (documented in graphs.md's format table, "pickles can run code",
    but not in security.md's hostile-files table and with no opt-in)."""
    folder = tmp_path / "looks-like-stark"
    folder.mkdir()
    marker = tmp_path / "code-ran"
    (folder / "node_info.pkl").write_bytes(pickle.dumps(_Marker(str(marker))))
    try:
        import_graph(folder, to=tmp_path / "out", progress=False)
    except Exception:  # noqa: BLE001 - the file is no real graph: what matters is whether code ran
        pass
    assert not marker.exists(), "unpickling node_info.pkl ran code during the import"


# ---------------------------------------------------------------------------------------------------------
# Finding: the nesting check is quadratic on an unterminated string full of escaped quotes
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["t.tsv", "t.jsonl", "kb/nodes.jsonl"])
def test_the_nesting_check_of_a_hostile_line_takes_no_more_than_seconds(tmp_path, name):
    """``check_depth`` runs ``json_depth`` (before the parser) on every text with more than ``max_depth``
    brackets; ``json_depth`` strips string literals with ``_JSON_STRING``, which, on a string that never closes
    and holds escaped quotes (``\\"``), scans to the end of the text from every one of them: O(n^2). 65
    brackets and 50,000 ``\\"`` (100 KB) take minutes; a 64 MB line (64 KB gzipped) would take years of CPU.
    Reached from a TSV/CSV qualifier column, a JSON-lines triple, a STaRK JSON-lines row, an ARK-V1 file."""
    hostile = "[" * 65 + '"' + '\\"' * 50_000
    source = tmp_path / name
    source.parent.mkdir(parents=True, exist_ok=True)
    if name == "t.tsv":
        source.write_text(f"h\tr\tt\t{hostile}\n")
    else:
        source.write_text(hostile + "\n")
    if name.startswith("kb/"):
        (source.parent / "edges.csv").write_text("src,relation,dst\nn,r,n\n")
        source, fmt = source.parent, "stark"
    else:
        fmt = "triples"
    try:
        done = _import_limited(source, fmt, tmp_path / "out", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"importing a {len(hostile) // 1024} KB line still runs after 30 s (json_depth is quadratic)")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-1000:]


# ---------------------------------------------------------------------------------------------------------
# Finding: a CRAG call (a Python expression inside the JSON) is a nesting and memory bomb of its own
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("call", ["unary", "wide"])
def test_a_hostile_crag_call_is_a_clear_error(tmp_path, call):
    """``_check_outputs`` bounds each string at ``max_record_mb`` and ``max_depth`` counts JSON brackets only; the
    ``call`` text is then handed to ``ast.parse``, which handles SyntaxError alone. 200,000 unary minus signs
    (200 KB) end in ``MemoryError: Parser stack overflowed`` and a 20 MB argument list in ``MemoryError``:
    tracebacks, the original issue's second symptom in a place the change did not cover."""
    import json

    text = ("api.movie_get_person_info(" + "-" * 200_000 + "1)" if call == "unary"
            else "api.movie_get_person_info([" + "0," * 10_000_000 + "])")
    source = tmp_path / "calls.json"
    source.write_text(json.dumps({"calls": [{"call": text, "output": "None"}]}))
    done = _import_limited(source, "crag", tmp_path / "out")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-800:]
    assert str(source) in done.stderr
