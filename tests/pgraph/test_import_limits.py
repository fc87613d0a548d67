"""Hostile graph files: decompression bombs, endless lines and records, nesting bombs and oversized graphs, in
every format the import takes that can carry them. Each is refused with an error that names the file, the limit
and how to raise it; a bomb never takes the import's memory past a bound (checked in a child process whose
address space is limited, not by timing)."""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kgagents.cli import main
from kgagents.tools.pgraph import import_graph, load_ark_record
from kgagents.tools.pgraph.limits import (
    GraphLimitError,
    ImportLimits,
    check_depth,
    json_depth,
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
