"""The ``graph`` command: static KGs that the exploring workflows read (ARK-V1, grounded reasoning, Agent-G).

    kgagents graph import SOURCE --format ark|grbench|stark|triples|crag [--name NAME]
                          [--to DIR | --neo4j [URI] | --falkordb [URL]] [--record ID] [--merge]
    kgagents graph list
    kgagents graph info NAME [--json]
    kgagents graph show NAME NODE [--radius R] [--html FILE] [--json]
    kgagents graph export NAME [--out FILE]

A graph is imported once (into ``KGAGENTS_GRAPHS_DIR``, default ``graphs`` in the data directory: see
:func:`kgagents.core.config.data_home`; or ``--to DIR``, or a Cypher database) and then named in workflows by
its name or path; a source file given directly to a workflow is built into the same directory's cache on first
use.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgagents.core.config import HOME_VARIABLE, PROJECT_DIR, data_home
from kgagents.tools.kg.base import snapshot_to_jsonl
from kgagents.tools.pgraph import FORMATS, graphs_dir, import_graph, known_graphs, open_graph
from kgagents.tools.pgraph.catalog import GRAPHS_DIR_ENV, default_name
from kgagents.tools.pgraph.limits import ImportLimits, env_variable, flag
from kgagents.tools.pgraph.loaders import FORMATS_HELP
from kgagents.tools.pgraph.model import GraphRef

#: The import's limits as flags: field of ImportLimits, metavar, what it bounds.
IMPORT_LIMITS = (
    ("max_mb", "MB", "text one source file may hold, once decompressed"),
    ("max_ratio", "N", "how many times its size on disk a compressed file may expand"),
    ("max_record_mb", "MB", "one line, row or record (a GRBench node)"),
    ("max_document_mb", "MB", "a file parsed whole (ARK-V1 JSON, CRAG calls)"),
    ("max_parse_mb", "MB", "memory parsing one record, document or batch of table rows may take"),
    ("max_depth", "N", "how deeply a JSON value may nest"),
    ("max_nodes", "N", "distinct nodes of the graph"),
    ("max_edges", "N", "edges of the graph"),
)


def add_commands(sub: Any, command: Callable[[str], Callable[[Any], Any]]) -> None:
    """Add ``graph`` and its sub-commands to the ``kgagents`` parser."""
    graph = sub.add_parser("graph", help="import and inspect static knowledge graphs")
    gsub = graph.add_subparsers(dest="graph_command", required=True)

    imp = gsub.add_parser("import", help="build a graph from a source file or folder")
    imp.add_argument("source", help="a graph file or folder (triples as TSV, CSV or JSON lines; GRBench "
                                    "graph.json, ARK-V1 JSON, STaRK-style KB, ...)")
    imp.add_argument("--format", choices=FORMATS,
                     help=f"the source's format (default: detected): {FORMATS_HELP}")
    imp.add_argument("--name", help="the graph's name (default: from the source)")
    where = imp.add_mutually_exclusive_group()
    where.add_argument("--to", metavar="DIR", help="build the compact store into DIR instead of the graphs directory")
    where.add_argument("--neo4j", nargs="?", const="", metavar="URI",
                       help="load into a Bolt database (URI, else NEO4J_URI, else the embedded server)")
    where.add_argument("--falkordb", nargs="?", const="", metavar="URL",
                       help="load into FalkorDB (URL, else FALKORDB_URL, else the embedded server)")
    imp.add_argument("--record", help="ARK-V1 files of many graphs: the record id to import")
    imp.add_argument("--merge", action="store_true", help="ARK-V1 files of many graphs: merge every record")
    imp.add_argument("--batch-size", type=int, default=5000, help="rows per database batch (--neo4j/--falkordb)")
    imp.add_argument("--quiet", action="store_true", help="no progress bar")
    caps = imp.add_argument_group("limits", "what a source file may hold before the import refuses it "
                                            "(default: the KGAGENTS_GRAPH_MAX_* variables, else the built-in "
                                            "values; docs/graphs.md)")
    for name, metavar, what in IMPORT_LIMITS:
        caps.add_argument(flag(name), type=int, metavar=metavar, dest=name,
                          help=f"{what} (default {getattr(ImportLimits(), name):,}, or {env_variable(name)})")

    gsub.add_parser("list", help="the imported graphs")

    info = gsub.add_parser("info", help="counts, types, relations, memory and index status of a graph")
    info.add_argument("name", help="a graph name or path")
    info.add_argument("--json", action="store_true")

    show = gsub.add_parser("show", help="a node's neighbourhood as text, JSON or an HTML page")
    show.add_argument("name", help="a graph name or path")
    show.add_argument("node", help="a node id (or an exact node name)")
    show.add_argument("--radius", type=int, default=1, help="hops around the node for --html/--json (default 1)")
    show.add_argument("--max-nodes", type=int, default=200, help="at most this many nodes in --html/--json")
    show.add_argument("--html", metavar="FILE", help="write the neighbourhood as a self-contained HTML page")
    show.add_argument("--json", action="store_true", help="print the neighbourhood as snapshot JSON lines")

    export = gsub.add_parser("export", help="the whole graph as snapshot JSON lines")
    export.add_argument("name", help="a graph name or path")
    export.add_argument("--out", metavar="FILE", help="write to FILE (default: standard output)")

    command("graph")(cmd_graph)


def cmd_graph(args: argparse.Namespace) -> int:
    handler = {"import": _import, "list": _list, "info": _info, "show": _show, "export": _export}[args.graph_command]
    return handler(args)


def _import(args: argparse.Namespace) -> int:
    started = time.monotonic()
    limits = ImportLimits.from_env(**{name: getattr(args, name, None) for name, _, _ in IMPORT_LIMITS})
    try:
        ref = _build(args, limits)
    except MemoryError:
        ref = None  # handled below, once the failed build's objects are gone with the traceback
    if ref is None:
        print(f"kgagents: error: {args.source}: the import ran out of memory; nothing was kept. The limits bound "
              "what one record, document or batch of rows may take (--max-parse-mb, --max-record-mb, "
              "--max-document-mb; docs/graphs.md): lower them to refuse such a file, or give the import more "
              "memory", file=sys.stderr)
        return 2
    print(f"imported {ref.get('name')} ({ref.get('format', '?')}, fingerprint {ref['fingerprint']}) into "
          f"{ref['location']} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    if not args.to and args.neo4j is None and args.falkordb is None:
        print(_where_graphs_live(), file=sys.stderr)
    name = ref["location"] if args.to else ref.get("name")
    print(f"ask about it: kgagents ask --workflow ark|grounded|agent-g --graph {name} \"QUESTION\"",
          file=sys.stderr)
    print(name)
    return 0


def _build(args: argparse.Namespace, limits: ImportLimits) -> GraphRef:
    """The import itself: into the compact store, or into a Cypher database."""
    progress = False if args.quiet else None
    if args.neo4j is not None or args.falkordb is not None:
        from kgagents.tools.pgraph.cypher import import_to_cypher

        backend = "neo4j" if args.neo4j is not None else "falkordb"
        url = (args.neo4j if backend == "neo4j" else args.falkordb) or None
        name = args.name or _default_name(args.source, args.record)
        return import_to_cypher(args.source, backend=backend, url=url, name=name, format=args.format,
                                record=args.record, merge=args.merge, batch_size=args.batch_size,
                                progress=progress, limits=limits)
    return import_graph(args.source, format=args.format, name=args.name, to=args.to, record=args.record,
                        merge=args.merge, progress=progress, limits=limits)


def _where_graphs_live() -> str:
    """Which graphs directory this is and why (the data directory's origin), for the user to find it again."""
    if os.environ.get(GRAPHS_DIR_ENV, "").strip():
        why = f"{GRAPHS_DIR_ENV}; runs started where it is set find it"
    else:
        why = data_home()[1]
        why += ("; runs started from this folder find it" if why.endswith(PROJECT_DIR)
                else "; runs started with the same KGAGENTS_HOME find it" if why == HOME_VARIABLE
                else f"; runs started from any folder find it, {HOME_VARIABLE} moves it")
    return f"graphs directory: {graphs_dir().resolve()} ({why})"


def _default_name(source: str, record: str | None) -> str:
    return default_name(Path(source), record)


def _list(args: argparse.Namespace) -> int:
    names = known_graphs()
    if not names:
        print(f"no graphs in {graphs_dir()} (import one with `kgagents graph import SOURCE`)")
        return 0
    for name in names:
        manifest = json.loads((graphs_dir() / name / "manifest.json").read_text(encoding="utf-8"))
        counts = manifest.get("counts", {})
        print(f"{name:24} {manifest.get('backend', 'compact'):9} {counts.get('nodes', '?'):>10} nodes "
              f"{counts.get('edges', '?'):>11} edges  {(manifest.get('source') or {}).get('format', '')}")
    return 0


def _open(name: str) -> Any:
    return open_graph(name)


def _rss_mb() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _info(args: argparse.Namespace) -> int:
    before = _rss_mb()
    started = time.monotonic()
    graph = _open(args.name)
    opened = time.monotonic() - started
    stats = graph.stats()
    types = graph.type_counts() if hasattr(graph, "type_counts") else {t: None for t in stats.types}
    relations = graph.relation_counts() if hasattr(graph, "relation_counts") else {r: None for r in stats.relations}
    after = _rss_mb()
    info = {"name": graph.ref.get("name"), "fingerprint": graph.ref.get("fingerprint"),
            "location": graph.ref.get("location"), "source": graph.ref.get("source"),
            "format": graph.ref.get("format"), "nodes": stats.nodes, "edges": stats.edges, "heads": stats.heads,
            "types": types, "relations": relations, "feature_keys": stats.feature_keys,
            "qualifier_keys": stats.qualifier_keys, "open_seconds": round(opened, 4),
            "indexes": graph.indexes.status() if hasattr(graph, "indexes") else {},
            "rss_mb_after_open": None if after is None or before is None else round(after - before, 1),
            **stats.extra}
    if args.json:
        print(json.dumps(info, indent=2, ensure_ascii=False, default=str))
        return 0
    print(f"{info['name']}  (fingerprint {info['fingerprint']}, {stats.extra.get('backend', '?')} at "
          f"{info['location']})")
    if info["source"]:
        print(f"source: {info['source']} ({info['format']})")
    print(f"{stats.nodes} nodes, {stats.edges} edges, {stats.heads} nodes with outgoing edges")
    print("node types: " + (", ".join(f"{t or '(none)'} {c if c is not None else ''}".strip()
                                      for t, c in types.items()) or "(none)"))
    shown = list(relations.items())[:40]
    print(f"relations ({len(relations)}): " + ", ".join(f"{r} {c if c is not None else ''}".strip() for r, c in shown)
          + (" …" if len(relations) > len(shown) else ""))
    print(f"features: {', '.join(stats.feature_keys[:40]) or '(none)'}")
    if stats.qualifier_keys:
        print(f"edge qualifiers: {', '.join(stats.qualifier_keys[:40])}")
    if "bytes_on_disk" in stats.extra:
        print(f"on disk: {stats.extra['bytes_on_disk'] / 1e6:.1f} MB; opened in {opened * 1000:.0f} ms"
              + (f", {info['rss_mb_after_open']} MB resident" if info["rss_mb_after_open"] is not None else ""))
    indexes = info["indexes"]
    print("embedding indexes: " + (", ".join(f"{k} ({v.get('kind')}, {v.get('count')})" for k, v in indexes.items())
                                   or "none yet (built on the first fuzzy lookup)"))
    return 0


def _resolve_node(graph: Any, text: str) -> str:
    if graph.has_node(text):
        return text
    named = graph.nodes_named(text)
    if named:
        return named[0].id
    near = graph.nearest_nodes(text, 5)
    hint = "; nearest: " + ", ".join(f"{graph.display_name(i)} ({s:.2f})" for i, s in near) if near else ""
    raise ValueError(f"no node with id or name {text!r} in {graph.ref.get('name')}{hint}")


REACH_COUNT_MAX = 100_000
"""How far ``graph show --html`` counts a neighbourhood it cut (beyond: "at least")."""


def cut_notice(graph: Any, node_id: str, radius: int, snapshot: Any, max_nodes: int) -> str:
    """What a neighbourhood view leaves out: empty when it shows the whole neighbourhood, else how many nodes
    it shows of how many lie within ``radius``."""
    shown = len(snapshot["nodes"])
    if shown < max_nodes:
        return ""
    reach = graph.ego_graph([node_id], radius=radius, max_nodes=REACH_COUNT_MAX)
    total = len(reach.hops)
    if total <= shown:
        return ""
    counted = f"at least {total:,}" if reach.truncated else f"{total:,}"
    return (f"Cut: showing {shown:,} of {counted} nodes within {radius} hop(s) (the nearest first; "
            f"--max-nodes sets how many).")


def _show(args: argparse.Namespace) -> int:
    graph = _open(args.name)
    node_id = _resolve_node(graph, args.node)
    if args.json:
        sys.stdout.write(snapshot_to_jsonl(graph.neighbourhood(node_id, radius=args.radius,
                                                               max_nodes=args.max_nodes)))
        return 0
    print(graph.describe(node_id))
    if args.html:
        from kgagents.cli.kgview import render_html

        snapshot = graph.neighbourhood(node_id, radius=args.radius, max_nodes=args.max_nodes)
        Path(args.html).write_text(render_html([(f"{graph.display_name(node_id)}, radius {args.radius}", snapshot)],
                                               title=f"{graph.ref.get('name')}: {graph.display_name(node_id)}",
                                               subtitle=f"{len(snapshot['nodes'])} nodes, "
                                                        f"{len(snapshot['relationships'])} edges",
                                               notices=[cut_notice(graph, node_id, args.radius, snapshot,
                                                                   args.max_nodes)]),
                                   encoding="utf-8")
        print(args.html, file=sys.stderr)
    return 0


def _export(args: argparse.Namespace) -> int:
    graph = _open(args.name)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            lines = graph.export_jsonl(out)
        print(f"{args.out}: {lines} lines", file=sys.stderr)
    else:
        graph.export_jsonl(sys.stdout)
    return 0
