"""Hostile graph files: decompression bombs, endless lines and records, nesting bombs and oversized graphs, in
every format the import takes that can carry them. Each is refused with an error that names the file, the limit
and how to raise it; a bomb never takes the import's memory past a bound (checked in a child process whose
address space is limited, not by timing)."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kgagents.cli import main
from kgagents.tools.crag.calls import _parse_call, parse_repr
from kgagents.tools.pgraph import import_graph, load_ark_record
from kgagents.tools.pgraph.formats.stark import arrow_sizes
from kgagents.tools.pgraph.limits import (
    _JSON_STRING,
    JSON_SEPARATORS,
    VALUE_BYTES,
    GraphLimitError,
    ImportLimits,
    check_depth,
    json_depth,
    parse_size,
    size_limit_passed,
)
from kgagents.tools.pgraph.model import GraphFormatError

PROJECT = Path(__file__).resolve().parents[2]
MB = 1 << 20
#: The address space the bombs are imported in: the interpreter with kgagents and NumPy takes about 150 MB.
ADDRESS_SPACE = 1024 * MB


def gzip_bomb(path: Path, head: str, chunk: str, times: int, tail: str = "") -> Path:
    """A gzip file of ``head``, ``times`` copies of ``chunk`` and ``tail``: one gzip member per piece (a reader
    reads them as one stream), so a few megabytes on disk expand to gigabytes without being written out."""
    member = gzip.compress(chunk.encode(), 9)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(gzip.compress(head.encode(), 9))
        for _ in range(times):
            f.write(member)
        f.write(gzip.compress(tail.encode(), 9))
    return path


def _lines(line: str) -> str:
    """One MiB of ``line`` repeated (records of about a kilobyte: a bomb of many ordinary records)."""
    return line * (MB // len(line))


def _bombs(folder: Path) -> dict[str, Path]:
    """A gzip bomb of a few megabytes that expands to about 3 GB, per format and shape."""
    big = "A" * MB
    filler = "x" * 1000
    stark_one, stark_many = folder / "stark-one", folder / "stark-many"
    bombs = {
        "grbench, one endless value": gzip_bomb(folder / "g1" / "graph.json.gz",
                                                '{"paper_nodes": {"p1": {"features": {"t": "', big, 3000),
        "grbench, many nodes": gzip_bomb(folder / "g2" / "graph.json.gz", '{"paper_nodes": {',
                                         _lines(f'"p1": {{"features": {{"t": "{filler}"}}, "neighbors": {{}}}}, '),
                                         3000, '"p2": {}}}'),
        "triples TSV, one endless line": gzip_bomb(folder / "t1.tsv.gz", "h\tr\t", big, 3000),
        "triples TSV, many lines": gzip_bomb(folder / "t2.tsv.gz", "", _lines(f"h\tr\t{filler}\n"), 3000),
        "triples CSV, one endless line": gzip_bomb(folder / "t3.csv.gz", "h,r,", big, 3000),
        "triples JSON lines, one endless line": gzip_bomb(folder / "t4.jsonl.gz", '["h", "r", "', big, 3000),
        "triples JSON lines, many lines": gzip_bomb(folder / "t5.jsonl.gz", "",
                                                    _lines(json.dumps(["h", "r", filler]) + "\n"), 3000),
        "STaRK table, one endless row": gzip_bomb(stark_one / "nodes.jsonl.gz", '{"id": "n", "text": "', big,
                                                  3000),
        "STaRK table, many rows": gzip_bomb(stark_many / "nodes.csv.gz", "id,text\n", _lines(f"n,{filler}\n"),
                                            3000),
    }
    for kb in (stark_one, stark_many):
        (kb / "edges.csv").write_text("src,relation,dst\nn,r,n\n", encoding="utf-8")
    return bombs


FORMAT_OF = {"grbench": "grbench", "triples TSV": "triples", "triples CSV": "triples",
             "triples JSON lines": "triples", "STaRK table": "stark"}


@pytest.mark.slow
def test_gzip_bombs_are_refused_within_bounded_memory(tmp_path):
    """Each bomb is a few megabytes that expand a thousand times: the import stops it once it expands more than
    ``max_ratio`` times (or a record passes ``max_record_mb``), in a process that may not use more than
    ``ADDRESS_SPACE`` of memory; today's importer ran out of memory on them."""
    bombs = _bombs(tmp_path / "bombs")
    assert all(path.stat().st_size < 8 * MB for path in bombs.values())  # each expands to 3 GB
    script = textwrap.dedent("""
        import json, sys
        from pathlib import Path
        from kgagents.tools.pgraph import import_graph
        out = {}
        for name, (path, fmt) in json.loads(sys.argv[1]).items():
            source = Path(path)
            if source.name.startswith(("nodes.", "graph.")):
                source = source.parent
            try:
                import_graph(source, format=fmt, to=Path(sys.argv[2]) / str(len(out)), progress=False)
                out[name] = "imported"
            except BaseException as exc:
                out[name] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(out))
    """)
    # with its format: a first line that never ends tells none (detection reads the first 4 KB)
    formats = {name: (str(path), FORMAT_OF[name.split(",")[0]]) for name, path in bombs.items()}
    done = _limited([sys.executable, "-c", script, json.dumps(formats), str(tmp_path / "built")])
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout)
    for name, path in bombs.items():
        message = outcome[name]
        assert message.startswith("GraphLimitError: "), (name, message)
        assert str(path) in message, (name, message)
        assert any(hint in message for hint in ("--max-ratio or KGAGENTS_GRAPH_MAX_RATIO",
                                                "--max-record-mb or KGAGENTS_GRAPH_MAX_RECORD_MB")), message
    # nothing half-built is left (only the builds' lock files)
    assert [p.name for p in (tmp_path / "built").iterdir() if not p.name.endswith(".lock")] == []


@pytest.mark.slow
def test_the_command_line_says_what_was_refused_and_how_to_allow_it(tmp_path):
    bomb = gzip_bomb(tmp_path / "g" / "graph.json.gz", '{"paper_nodes": {"p1": {"features": {"t": "', "A" * MB,
                     3000)
    done = _limited([sys.executable, "-m", "kgagents.cli", "graph", "import", str(bomb.parent), "--to",
                     str(tmp_path / "out"), "--quiet"])
    assert done.returncode == 2 and "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert done.stderr.startswith(f"kgagents: error: {bomb}: expands more than 100 times"), done.stderr
    assert "refused as a decompression bomb (raise it with --max-ratio or KGAGENTS_GRAPH_MAX_RATIO)" in done.stderr
    assert not (tmp_path / "out").exists()


def _limited(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with at most :data:`ADDRESS_SPACE` of address space (a MemoryError past it)."""

    def limit() -> None:  # in the child, before it runs Python
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    env = {**os.environ, "PYTHONPATH": str(PROJECT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("KGAGENTS_GRAPH_MAX_")}
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, cwd=PROJECT,
                          preexec_fn=limit, check=False)


# ----------------------------------------------------------------------------------------------------------
# Nesting bombs: a clear error, not a RecursionError
# ----------------------------------------------------------------------------------------------------------
DEEP = 100_000


def _nest(levels: int = DEEP) -> str:
    return "[" * levels + "]" * levels


def _nesting_bombs(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    deep_object = '{"a": ' * 5000 + "1" + "}" * 5000  # within a CSV field's 128 KB
    files = {
        "grbench graph.json": ('{"paper_nodes": {"p1": ' + _nest() + "}}", "g/graph.json"),
        "ARK-V1 JSON": (_nest(), "ark.json"),
        "ARK-V1 JSON lines": ('{"id": "a", "graph": ' + _nest() + "}\n", "ark.jsonl"),
        "CRAG calls": ('{"calls": ' + _nest() + "}", "crag.json"),
        "triples JSON lines": ('["h", "r", "t", ' + '{"q": ' * DEEP + "1" + "}" * DEEP + "]\n", "t.jsonl"),
        "triples TSV qualifiers": ("h\tr\tt\t" + deep_object + "\n", "t.tsv"),
        "triples CSV qualifiers": ("h,r,t," + _nest(5000) + "\n", "t.csv"),
        "STaRK JSON lines row": ('{"id": "n", "f": ' + _nest() + "}\n", "kb/nodes.jsonl"),
    }
    out = {}
    for name, (text, relative) in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        out[name] = path
    (folder / "kb" / "edges.csv").write_text("src,relation,dst\nn,r,n\n", encoding="utf-8")
    return out


@pytest.mark.parametrize("name", ["grbench graph.json", "ARK-V1 JSON", "ARK-V1 JSON lines", "CRAG calls",
                                  "triples JSON lines", "triples TSV qualifiers", "triples CSV qualifiers",
                                  "STaRK JSON lines row"])
def test_a_nesting_bomb_is_a_clear_error(tmp_path, name):
    path = _nesting_bombs(tmp_path / "src")[name]
    source = path.parent if path.name in ("graph.json", "nodes.jsonl") else path
    fmt = {"ARK-V1 JSON": "ark", "ARK-V1 JSON lines": "ark", "CRAG calls": "crag"}.get(name)
    with pytest.raises(GraphLimitError) as refused:
        import_graph(source, format=fmt, to=tmp_path / "out", progress=False, merge=name == "ARK-V1 JSON lines")
    message = str(refused.value)
    assert str(path) in message
    assert "JSON nested deeper than 64 levels" in message or "JSON nested too deeply for the parser" in message
    assert "--max-depth or KGAGENTS_GRAPH_MAX_DEPTH" in message
    assert not (tmp_path / "out").exists()


def test_a_record_looked_up_by_id_is_read_within_the_limits_too(tmp_path):
    path = tmp_path / "many.jsonl"
    path.write_text('{"id": "a", "graph": [["x", "y", {"relation": "r"}]]}\n'
                    '{"id": "b", "graph": ' + _nest() + "}\n", encoding="utf-8")
    assert load_ark_record(path, "a")["id"] == "a"
    with pytest.raises(GraphLimitError, match=r"many.jsonl, line 2: JSON nested deeper than 64 levels"):
        load_ark_record(path, "b")


# ----------------------------------------------------------------------------------------------------------
# Each limit, set lower, on ordinary files: the error names it, the flag or the variable raises it
# ----------------------------------------------------------------------------------------------------------
def _triples(path: Path, lines: int, width: int = 10) -> Path:
    path.write_text("".join(f"h{i}\tr\t{'t' * width}{i}\n" for i in range(lines)), encoding="utf-8")
    return path


def test_each_limit_is_named_and_can_be_raised(tmp_path, monkeypatch, capsys):
    source = _triples(tmp_path / "t.tsv", 3000, width=1000)  # about 3 MB, 3000 edges, 6000 nodes
    cases = [({"max_mb": 2}, "more than 2 MB of text, the limit of a graph source file", "--max-mb"),
             ({"max_edges": 2999}, "the graph has more than 2,999 edges", "--max-edges"),
             ({"max_nodes": 5000}, "the graph has more than 5,000 nodes", "--max-nodes")]
    for given, expected, hint in cases:
        with pytest.raises(GraphLimitError) as refused:
            import_graph(source, to=tmp_path / "out", progress=False, limits=ImportLimits(**given))
        assert expected in str(refused.value) and f"{hint} or KGAGENTS_GRAPH_" in str(refused.value)
        assert str(source) in str(refused.value)
    long_line = tmp_path / "long.tsv"
    long_line.write_text("h\tr\t" + "t" * (2 * MB) + "\n", encoding="utf-8")
    with pytest.raises(GraphLimitError, match=r"long.tsv, line 1: longer than 1 MB, the limit of one line or record "
                                              r"\(raise it with --max-record-mb or KGAGENTS_GRAPH_MAX_RECORD_MB\)"):
        import_graph(long_line, to=tmp_path / "out", progress=False, limits=ImportLimits(max_record_mb=1))
    document = tmp_path / "big.json"
    document.write_text(json.dumps([["a", f"b{i}", {"relation": "r" * 1000}] for i in range(1500)]))
    with pytest.raises(GraphLimitError, match=r"big.json: 1.5 MB, over the 1 MB an ARK-V1 graph file may have: it is "
                                              r"parsed whole \(raise it with --max-document-mb or "
                                              r"KGAGENTS_GRAPH_MAX_DOCUMENT_MB\)"):
        import_graph(document, to=tmp_path / "out", progress=False, limits=ImportLimits(max_document_mb=1))
    # the variables set them, a flag of `graph import` overrides a variable
    monkeypatch.setenv("KGAGENTS_GRAPH_MAX_EDGES", "10")
    assert main(["graph", "import", str(source), "--to", str(tmp_path / "a"), "--quiet"]) == 2
    assert "more than 10 edges" in capsys.readouterr().err
    assert main(["graph", "import", str(source), "--to", str(tmp_path / "a"), "--quiet", "--max-edges", "3000"]) == 0
    monkeypatch.setenv("KGAGENTS_GRAPH_MAX_EDGES", "many")
    assert main(["graph", "import", str(source), "--to", str(tmp_path / "b"), "--quiet"]) == 2
    assert "KGAGENTS_GRAPH_MAX_EDGES must be a positive whole number, not 'many'" in capsys.readouterr().err


def test_a_compressed_ark_or_crag_file_is_refused_before_it_is_read(tmp_path):
    bomb = gzip_bomb(tmp_path / "ark.json.gz", "[", '["a", "b", {"relation": "r"}], ' * 1000, 10, "[]]")
    with pytest.raises(GraphFormatError, match=r"ark.json.gz: an ARK-V1 graph file is read as plain JSON"):
        import_graph(bomb, format="ark", to=tmp_path / "out", progress=False)


def test_the_checks_on_their_own():
    assert json_depth("1") == 0 and json_depth("[]") == 1 and json_depth('{"a": [1, {"b": []}]}') == 4
    assert json_depth('["[[[[", "\\"]]]", {"k": "{"}]') == 2  # brackets in strings, escaped quotes
    check_depth('{"a": "' + "[" * 500 + '"}', "x", ImportLimits(max_depth=2))  # in a string: no nesting
    with pytest.raises(GraphLimitError, match="x: JSON nested deeper than 2 levels"):
        check_depth("[[[1]]]", "x", ImportLimits(max_depth=2))
    limits = ImportLimits(max_mb=1024, max_ratio=10)
    assert size_limit_passed(limits, 64 * MB, 1) is None  # the first 64 MB: no ratio
    assert size_limit_passed(limits, 64 * MB + 1, 1) == "max_ratio"
    assert size_limit_passed(limits, 100 * MB, 10 * MB) is None
    assert size_limit_passed(limits, 100 * MB + 1, 10 * MB) == "max_ratio"
    assert size_limit_passed(limits, 2048 * MB, None) == "max_mb"  # a plain file: no ratio
    assert size_limit_passed(limits, 1024 * MB, None) is None


# ----------------------------------------------------------------------------------------------------------
# Files within the size limits whose parse would take more than the import's memory
# ----------------------------------------------------------------------------------------------------------
def _import_limited(source: Path, fmt: str, out: Path) -> subprocess.CompletedProcess[str]:
    """``kgagents graph import`` of ``source`` with at most :data:`ADDRESS_SPACE` of address space."""
    return _limited([sys.executable, "-m", "kgagents.cli", "graph", "import", str(source), "--format", fmt, "--to",
                     str(out), "--quiet"])


def _assert_refused(done: subprocess.CompletedProcess[str], source: Path, limit: str) -> None:
    """A clean refusal: exit 2 (not a signal), no traceback or MemoryError, the file and the limit's flag named."""
    tail = done.stderr[-1500:]
    assert done.returncode == 2, f"exit {done.returncode} (negative: killed by a signal): {tail}"
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, tail
    assert str(source) in done.stderr and f"raise it with --{limit}" in done.stderr, tail


def _two_character_strings(n_bytes: int) -> str:
    """JSON strings of two characters, each new (about 50 bytes each in Python, from 5 of text)."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    pairs = [f'"{a}{b}"' for a in alphabet for b in alphabet]
    return ",".join(pairs * (n_bytes // (len(pairs) * 5) + 1))


@pytest.mark.slow
@pytest.mark.parametrize("case", ["ARK-V1 JSON, 60 MB of []", "CRAG calls, 60 MB of {}",
                                  "JSON-lines triples, 0.4 MB of gzip, one 60 MB line of short strings",
                                  "CSV triples, one row of commas over 60 lines", "TSV triples, one line of tabs"])
def test_files_within_the_size_limits_do_not_run_the_import_out_of_memory(tmp_path, case):
    """Parsing makes many times the text in objects (``[]``: 3 characters, 64 bytes): files within every size
    limit (a document under ``max_document_mb``, lines under ``max_record_mb``, gzip within its ratio) are
    refused by what their parse would take (``max_parse_mb``), estimated before they are parsed, not in a
    MemoryError under the 1 GB the bombs are imported in."""
    if case.startswith("ARK"):
        source, fmt = tmp_path / "ark.json", "ark"
        source.write_text("[" + ",".join(["[]"] * (20 * MB)) + "]")
    elif case.startswith("CRAG"):
        source, fmt = tmp_path / "crag.json", "crag"
        source.write_text('{"calls": [' + ",".join(["{}"] * (20 * MB)) + "]}")
    elif case.startswith("JSON"):
        source, fmt = tmp_path / "t.jsonl.gz", "triples"
        with gzip.open(source, "wt", compresslevel=9) as f:
            f.write('["h", "r", "t", {"q": [' + _two_character_strings(60 * MB) + "]}]\n")
        assert source.stat().st_size < MB
    elif case.startswith("CSV"):
        # a quoted line break ends none of the lines: one row of 60 million cells
        source, fmt = gzip_bomb(tmp_path / "t.csv.gz", "h,r,t", "," * MB + ',"\n"', 60, "\n"), "triples"
    else:
        source, fmt = gzip_bomb(tmp_path / "t.tsv.gz", "h\tr\tt", "\t" * MB, 60, "\n"), "triples"
    done = _import_limited(source, fmt, tmp_path / "out")
    if case.startswith("TSV"):  # only the first columns are split off: nothing to refuse
        assert done.returncode == 0, done.stderr[-1500:]
        return
    _assert_refused(done, source, "max-parse-mb")


def test_the_parse_size_bounds_what_parsing_takes():
    """:func:`parse_size` is an upper bound of what ``json.loads`` (and ``csv``) take, for the shapes that take the
    most per character of text; and no more than a few times it."""
    import csv
    import tracemalloc

    n = 20_000
    json_texts = {"[]": "[" + ",".join(["[]"] * n) + "]", "{}": "[" + ",".join(["{}"] * n) + "]",
                  "short strings": "[" + _two_character_strings(5 * n)[:5 * n - 1] + "]",
                  "members": "{" + ",".join(f'"k{i}":{{"a":{i}}}' for i in range(n)) + "}",
                  "astral strings": "[" + ",".join(['"\U0001F600\U0001F600"'] * n) + "]",
                  "numbers": "[" + ",".join(f"{10**12 + i}.5" for i in range(n)) + "]"}
    row = "," * n + "ab," * n
    for name, (parse, text, separators) in {
            **{name: (json.loads, text, JSON_SEPARATORS) for name, text in json_texts.items()},
            "a CSV row": (lambda t: next(csv.reader([t])), row, ",")}.items():
        tracemalloc.start()
        value = parse(text)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        del value
        bound = parse_size(text, separators)
        assert peak + sys.getsizeof(text) <= bound < 8 * (peak + sys.getsizeof(text)), (name, peak, bound)
    assert parse_size("") == sys.getsizeof("") + VALUE_BYTES
    assert parse_size("a,b", ",", per_value=10) == sys.getsizeof("a,b") + 20


# ----------------------------------------------------------------------------------------------------------
# Parquet: judged by what it decodes to, not by what its metadata says
# ----------------------------------------------------------------------------------------------------------
def _parquet_edges_bomb(folder: Path, edges: int) -> Path:
    """A STaRK folder whose edge list holds ``edges`` edges between ``edges + 1`` distinct nodes in about 400 KB:
    delta-encoded ids 0, 1, 2, ... take no bits each, so the metadata's ``total_byte_size`` says little; the
    builder would intern every id."""
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
    _assert_refused(_import_limited(tmp_path / "kb", "stark", tmp_path / "out"), edges, "max-ratio")


@pytest.mark.slow
def test_a_parquet_dictionary_bomb_is_refused_within_bounded_memory(tmp_path):
    """One 40 MB text in a dictionary page that a million rows point to (a run of index 0): the metadata says
    52 MB, the rows hold 40 TB of text. Arrow reads the column as a dictionary (it aborted the process,
    ``std::bad_alloc``, when it decoded a batch as text) and the rows are refused before they reach Python."""
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
    _assert_refused(_import_limited(kb, "stark", tmp_path / "out"), kb / "nodes.parquet", "max-ratio")


def test_parquet_rows_are_counted_as_decoded(tmp_path):
    """What :func:`arrow_sizes` counts per row (bytes, values, the longest value) for each kind of column, and
    the limits a table of ordinary rows meets: a value past ``max_record_mb``, a row past ``max_parse_mb``."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")

    def sizes(array):
        content, values, longest = arrow_sizes(array)
        return content.tolist(), values.tolist(), longest

    shared = pa.DictionaryArray.from_arrays(pa.array([0, 0, 1, None], pa.int32()), pa.array(["x" * 10, "y"]))
    assert sizes(shared) == ([10, 10, 1, 0], [1, 1, 1, 1], 10)
    assert sizes(pa.array(["ab", None, "cde"])) == ([2, 0, 3], [1, 1, 1], 3)
    assert sizes(pa.array([1, 2])) == ([8, 8], [1, 1], 8)
    assert sizes(pa.array([["a", "bb"], None, ["c"]])[1:]) == ([0, 1], [1, 2], 2)
    assert sizes(pa.array([[("k", 1)], [("kk", 2), ("c", 3)]], pa.map_(pa.string(), pa.int64()))[1:]) == (
        [19], [7], 8)
    assert sizes(pa.StructArray.from_arrays([pa.array([1, 2]), pa.array(["a", "bb"])], ["i", "s"])[1:]) == (
        [10], [3], 8)
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "edges.csv").write_text("src,relation,dst\nn0,r,n1\n")
    texts = [os.urandom(MB).hex() for _ in range(3)]  # 2 MB each, that no compression shrinks much
    pq.write_table(pa.table({"id": ["n0", "n1", "n2"], "text": texts}), kb / "nodes.parquet")
    assert import_graph(kb, to=tmp_path / "a", progress=False)["location"]
    with pytest.raises(GraphLimitError, match=r"nodes.parquet, rows 1-3: a value of 2 MB, over the 1 MB of one "
                                              r"record \(raise it with --max-record-mb"):
        import_graph(kb, to=tmp_path / "b", progress=False, limits=ImportLimits(max_record_mb=1))
    with pytest.raises(GraphLimitError, match=r"nodes.parquet, row 1: parsing it could take 2 MB of memory, over "
                                              r"the 1 MB .*\(raise it with --max-parse-mb"):
        import_graph(kb, to=tmp_path / "c", progress=False, limits=ImportLimits(max_parse_mb=1))


# ----------------------------------------------------------------------------------------------------------
# The nesting check reads a hostile line once; a CRAG call is a Python expression with bombs of its own
# ----------------------------------------------------------------------------------------------------------
#: 65 brackets and a string that never closes, full of escaped quotes: the nesting check's string pattern
#: scanned to the end of the text from each escaped quote (a 100 KB line took minutes).
HOSTILE_LINE = "[" * 65 + '"' + '\\"' * 50_000


def test_the_nesting_check_reads_a_string_that_never_closes_once():
    """The string pattern takes the open string in one match, from its quote to the end of the text: no match
    starts again at one of its escaped quotes, so the check's work grows with the text, not with its square."""
    assert [m.span() for m in _JSON_STRING.finditer(HOSTILE_LINE)] == [(65, len(HOSTILE_LINE))]
    assert [m.span() for m in _JSON_STRING.finditer('["a\\"b", "c"')] == [(1, 7), (9, 12)]
    assert json_depth(HOSTILE_LINE) == 65 and json_depth(HOSTILE_LINE + '"]') == 65


@pytest.mark.slow
@pytest.mark.parametrize("name", ["t.tsv", "t.jsonl", "kb/nodes.jsonl"])
def test_a_hostile_line_for_the_nesting_check_is_refused(tmp_path, name):
    """The line reaches the check from a TSV qualifier column, a JSON-lines triple and a STaRK row: refused for
    its nesting (65 brackets) with a clear error, as any other."""
    source = tmp_path / name
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(f"h\tr\tt\t{HOSTILE_LINE}\n" if name == "t.tsv" else HOSTILE_LINE + "\n")
    if name.startswith("kb/"):
        (source.parent / "edges.csv").write_text("src,relation,dst\nn,r,n\n")
    done = _import_limited(source.parent if name.startswith("kb/") else source,
                           "stark" if name.startswith("kb/") else "triples", tmp_path / "out")
    _assert_refused(done, source, "max-depth")


@pytest.mark.slow
@pytest.mark.parametrize("call", ["unary", "wide"])
def test_a_hostile_crag_call_is_a_clear_error(tmp_path, call):
    """A saved call is a Python expression: 200,000 unary minus signs overflow the parser's stack (a
    MemoryError), a 20 MB argument list takes gigabytes as a syntax tree. The first is refused by the length of a
    call, the second already by what parsing the file would take."""
    text = ("api.movie_get_person_info(" + "-" * 200_000 + "1)" if call == "unary"
            else "api.movie_get_person_info([" + "0," * 10_000_000 + "])")
    source = tmp_path / "calls.json"
    source.write_text(json.dumps({"calls": [{"call": text, "output": "None"}]}))
    done = _import_limited(source, "crag", tmp_path / "out")
    if call == "wide":
        _assert_refused(done, source, "max-parse-mb")
        return
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-800:]
    assert f"{source}, call 0" in done.stderr and "more than the 65,536 a call of the API may have" in done.stderr


def test_crag_calls_nested_past_the_parser_are_a_clear_error():
    """Within the length of a call, operators nested thousands deep overflow Python's parser: a ValueError that
    names the cause, as every other malformed call."""
    with pytest.raises(ValueError, match="nested too deeply for Python's parser"):
        _parse_call("api.movie_get_person_info(" + "-" * 60_000 + "1)")
    with pytest.raises(ValueError, match="more than the 65,536 a call of the API may have"):
        _parse_call("api.f(" + "1," * 40_000 + ")")
    assert _parse_call('api.movie_get_person_info("Jackson", x=[1, -2])') == (
        "movie_get_person_info", ["Jackson"], {"x": [1, -2]})


def test_an_output_cut_off_is_recovered_from_its_last_cut_points_only():
    """A saved output that was cut off is read from the longest prefix that parses; only the last
    ``MAX_CUTS_TRIED`` cut points are tried (each try parses the text again), so an output that never parses
    costs a bounded number of tries."""
    assert parse_repr("[{'a': 1}, {'b': [2, 3") == [{"a": 1}, {"b": [2]}]  # a number cut off is dropped
    with pytest.raises(ValueError, match="not a Python literal"):
        parse_repr("[0 0, " + "1, " * 100_000)


# ----------------------------------------------------------------------------------------------------------
# What is no file
# ----------------------------------------------------------------------------------------------------------
def test_a_fifo_is_refused_not_waited_on(tmp_path):
    """A named pipe that nobody writes to would hang the import (detection and reading wait on it)."""
    fifo = tmp_path / "graph.tsv"
    os.mkfifo(fifo)
    for fmt in (None, "triples"):
        with pytest.raises(GraphFormatError, match=r"graph.tsv: a named pipe \(FIFO\), not a file or folder"):
            import_graph(fifo, format=fmt, to=tmp_path / "out", progress=False)
    assert main(["graph", "import", str(fifo), "--to", str(tmp_path / "out"), "--quiet"]) == 2


class _Marker:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):  # what a hostile node_info.pkl does on load
        return (open, (self.path, "w"))


def test_importing_a_folder_never_runs_code_from_it(tmp_path):
    """``kgagents graph import FOLDER`` takes a folder with ``node_info.pkl`` for STaRK's processed layout: loading
    it must not run code from the folder."""
    folder = tmp_path / "looks-like-stark"
    folder.mkdir()
    marker = tmp_path / "code-ran"
    (folder / "node_info.pkl").write_bytes(pickle.dumps(_Marker(str(marker))))
    try:
        import_graph(folder, to=tmp_path / "out", progress=False)
    except Exception:  # noqa: BLE001 - the file is no real graph: what matters is whether code ran
        pass
    assert not marker.exists(), "unpickling node_info.pkl ran code during the import"
