"""Self-contained HTML views of what a run built or explored (``kgagents show THREAD --kg``, ``graph show --html``).

The pictures are drawn by Bokeh, whose JavaScript ships inside its Python package and is inlined into the page:
a view loads nothing from the network and opens from a file, an e-mail or a CI artefact. Bokeh gives the page its
zoom (wheel, box), pan, reset, hover and tap; this module chooses what to draw and where:

- nodes carry their names, not their ids (a node's ``name`` property, else its id), coloured by their first label;
- the layout is NetworkX's Kamada-Kawai for graphs up to a few hundred nodes (it keeps unrelated nodes apart
  better than a spring layout, so edges run through other nodes less often), a seeded spring layout beyond;
  layered views (the grounded thought graph) put each depth in its own column, ordered to cross few edges;
- a search box finds a node by name (it is selected, centred and its details shown);
- a view cut to fewer nodes than it holds says so and by how much, above the picture;
- the same content is listed in plain HTML tables below the picture, for readers without JavaScript.

Views: a KG (KGoT's task KG after each write, fusion variants, a static graph's neighbourhood), the grounded
thought graph (:func:`render_thought_graph`: depths left to right, kept states, merges, failed and pruned states
and the answer's path marked), ARK-V1's explored subgraph (:func:`ark_graph`: anchors, the triples retrieved and
those each step used) and Agent-G's retrieval (:func:`agent_g_graph`: the topic entities, the reasoning paths
and the pages or documents each iteration retrieved).
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import networkx as nx
from bokeh.embed import components
from bokeh.layouts import column
from bokeh.models import (
    Arrow,
    AutocompleteInput,
    ColumnDataSource,
    CustomJS,
    Div,
    HoverTool,
    LabelSet,
    TabPanel,
    Tabs,
    TapTool,
    VeeHead,
)
from bokeh.plotting import figure
from bokeh.resources import Resources

if TYPE_CHECKING:
    from kgagents.tools.kg.base import KGSnapshot

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#bab0ac",
           "#e15759"]
"""Colours by first label, in order of appearance (the last, red, is kept for marks when a view has them)."""
MARK = "#d62728"
"""The colour of what a view marks: the answer's path, the triples a step used."""
STATUS_COLOURS = {"answer": MARK, "final": "#f28e2b", "kept": "#4e79a7", "pruned": "#bab0ac", "failed": "#7f7f7f",
                  "anchor": MARK, "used": "#f28e2b", "retrieved": "#bab0ac", "topic": MARK, "entity": "#4e79a7",
                  "page": "#59a14f", "document": "#59a14f", "question": "#24343f"}
"""Fixed colours for the roles the run views give their nodes."""
LABEL_CHARS = 32
KAMADA_KAWAI_MAX = 400
"""Up to this many nodes the layout is Kamada-Kawai (quadratic in nodes), beyond it a seeded spring layout."""
EDGE_LABELS_MAX = 80
"""Edge labels are drawn on views with at most this many edges (hover shows them on every view)."""


@dataclass
class View:
    """One picture: a snapshot and how to draw it."""

    title: str
    kg: KGSnapshot
    notice: str = ""
    """Said above the picture (a view cut to fewer nodes than it holds says by how much)."""
    layers: dict[str, int] | None = None
    """Node id → column, for layered views (the thought graph's depths)."""
    marked: set[tuple[str, str]] = field(default_factory=set)
    """Edges drawn thick in :data:`MARK` (source, target)."""
    colour_by_status: bool = False
    """Colour nodes by their last label (the run views' roles) rather than their first (a KG's types)."""


def display_label(node: dict[str, Any]) -> str:
    """What a node is called in a picture: its ``name`` (or ``title``) property, else its id, shortened."""
    props = node.get("properties") or {}
    for key in ("name", "title", "display_name"):
        value = props.get(key)
        if isinstance(value, str) and value.strip():
            text = value.strip()
            break
    else:
        text = str(node["id"])
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _json_for_script(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _value(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str))


def _tables(snapshot: KGSnapshot) -> str:
    rows = ["<h3>Nodes</h3><table><thead><tr><th>id</th><th>name</th><th>labels</th><th>properties</th></tr>"
            "</thead><tbody>"]
    for node in snapshot["nodes"]:
        props = "<br>".join(f"<b>{html.escape(str(k))}</b>: {_value(v)}" for k, v in node["properties"].items())
        rows.append(f"<tr><td>{html.escape(str(node['id']))}</td><td>{html.escape(display_label(node))}</td>"  # type: ignore[arg-type]
                    f"<td>{html.escape(', '.join(node['labels']))}</td><td>{props}</td></tr>")
    rows.append("</tbody></table><h3>Relationships</h3><table><thead><tr><th>source</th><th>type</th>"
                "<th>target</th><th>properties</th></tr></thead><tbody>")
    for rel in snapshot["relationships"]:
        props = "<br>".join(f"<b>{html.escape(str(k))}</b>: {_value(v)}" for k, v in rel["properties"].items())
        rows.append(f"<tr><td>{html.escape(str(rel['source']))}</td><td>{html.escape(rel['type'])}</td>"
                    f"<td>{html.escape(str(rel['target']))}</td><td>{props}</td></tr>")
    rows.append("</tbody></table>")
    return "".join(rows)


# --------------------------------------------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------------------------------------------
def layout(node_ids: Sequence[str], edges: Iterable[tuple[str, str]],
           layers: dict[str, int] | None = None) -> dict[str, tuple[float, float]]:
    """Positions in [-1, 1]²: by column (``layers``) with each column ordered by its parents' mean position
    (fewer crossings), else Kamada-Kawai per connected component (components side by side), else a spring
    layout for big graphs. Deterministic: the same graph is drawn the same way every time."""
    edge_list = [(s, t) for s, t in edges if s != t]
    if not node_ids:
        return {}
    if layers is not None:
        return _layered(node_ids, edge_list, layers)
    graph = nx.Graph()
    graph.add_nodes_from(node_ids)
    graph.add_edges_from(edge_list)
    if len(node_ids) > KAMADA_KAWAI_MAX:
        k = 2.0 / math.sqrt(len(node_ids))
        return {n: (float(x), float(y)) for n, (x, y) in nx.spring_layout(graph, k=k, seed=7, iterations=60).items()}
    parts = sorted((sorted(c, key=node_ids.index) for c in nx.connected_components(graph)), key=len, reverse=True)
    positions: dict[str, tuple[float, float]] = {}
    offset = 0.0
    for part in parts:
        sub = graph.subgraph(part)
        if len(part) == 1:
            local = {part[0]: (0.0, 0.0)}
        elif len(part) == 2:
            local = {part[0]: (-0.5, 0.0), part[1]: (0.5, 0.0)}
        else:
            local = {n: (float(x), float(y)) for n, (x, y) in nx.kamada_kawai_layout(sub).items()}
        width = math.sqrt(len(part))  # a component's size in the picture grows with its node count
        xs = [p[0] for p in local.values()]
        span = (max(xs) - min(xs)) or 1.0
        for n, (x, y) in local.items():
            positions[n] = (offset + (x - min(xs)) / span * width, y * width / 2)
        offset += width + 0.8
    return _normalise(positions)


def _layered(node_ids: Sequence[str], edges: list[tuple[str, str]],
             layers: dict[str, int]) -> dict[str, tuple[float, float]]:
    parents: dict[str, list[str]] = {}
    for s, t in edges:
        parents.setdefault(t, []).append(s)
    columns: dict[int, list[str]] = {}
    for n in node_ids:
        columns.setdefault(layers.get(n, 0), []).append(n)
    positions: dict[str, tuple[float, float]] = {}
    for depth in sorted(columns):
        members = columns[depth]

        def rank(n: str) -> float:
            ys = [positions[p][1] for p in parents.get(n, []) if p in positions]
            return sum(ys) / len(ys) if ys else 0.0

        members.sort(key=lambda n: (rank(n), node_ids.index(n)))
        for i, n in enumerate(members):
            positions[n] = (float(depth), float(i) - (len(members) - 1) / 2)
    return _normalise(positions)


def _normalise(positions: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    xs = [p[0] for p in positions.values()]
    ys = [p[1] for p in positions.values()]
    sx = (max(xs) - min(xs)) or 1.0
    sy = (max(ys) - min(ys)) or 1.0
    return {n: (2 * (x - min(xs)) / sx - 1, 2 * (y - min(ys)) / sy - 1) for n, (x, y) in positions.items()}


# --------------------------------------------------------------------------------------------------------------
# Drawing
# --------------------------------------------------------------------------------------------------------------
_SEARCH_JS = """
const q = (this.value || '').trim().toLowerCase();
if (!q) return;
const names = nodes.data.label, ids = nodes.data.id;
let hit = names.findIndex(n => n.toLowerCase() === q);
if (hit < 0) hit = names.findIndex(n => n.toLowerCase().includes(q));
if (hit < 0) hit = ids.findIndex(n => String(n).toLowerCase().includes(q));
if (hit < 0) { details.text = '<p>No node matches <b>' + q.replace(/[&<>"]/g, '') + '</b>.</p>'; return; }
nodes.selected.indices = [hit];
const x = nodes.data.x[hit], y = nodes.data.y[hit];
const w = (plot.x_range.end - plot.x_range.start) / 2, h = (plot.y_range.end - plot.y_range.start) / 2;
plot.x_range.start = x - w; plot.x_range.end = x + w; plot.y_range.start = y - h; plot.y_range.end = y + h;
"""

_DETAILS_JS = """
const i = nodes.selected.indices[0];
if (i === undefined) { details.text = '<p>Click a node, or search one by name, to see its details.</p>'; return; }
details.text = nodes.data.details[i];
"""


def _node_details(node: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{_value(v)}</td></tr>"
                   for k, v in (node.get("properties") or {}).items())
    return (f"<h3>{html.escape(display_label(node))}</h3><p><b>id:</b> {html.escape(str(node['id']))}<br>"
            f"<b>labels:</b> {html.escape(', '.join(node.get('labels') or []) or '(none)')}</p><table>{rows}</table>")


def _colours(view: View) -> list[str]:
    assigned: dict[str, str] = {}
    out = []
    for node in view.kg["nodes"]:
        labels = node.get("labels") or ["(none)"]
        key = labels[-1] if view.colour_by_status else labels[0]
        if view.colour_by_status and key in STATUS_COLOURS:
            out.append(STATUS_COLOURS[key])
            continue
        if key not in assigned:
            assigned[key] = PALETTE[len(assigned) % (len(PALETTE) - 1)]
        out.append(assigned[key])
    return out


def _picture(view: View) -> Any:
    """The Bokeh layout of one view: notice, search box, the picture, the details of the selected node."""
    kg = view.kg
    ids = [str(n["id"]) for n in kg["nodes"]]
    known = set(ids)
    edges = [r for r in kg["relationships"] if str(r["source"]) in known and str(r["target"]) in known]
    pos = layout(ids, [(str(r["source"]), str(r["target"])) for r in edges], view.layers)
    labels = [display_label(n) for n in kg["nodes"]]  # type: ignore[arg-type]
    nodes = ColumnDataSource({
        "id": ids, "label": labels, "x": [pos[i][0] for i in ids], "y": [pos[i][1] for i in ids],
        "colour": _colours(view), "kind": [", ".join(n.get("labels") or []) for n in kg["nodes"]],
        "details": [_node_details(n) for n in kg["nodes"]],  # type: ignore[arg-type]
    })
    plot = figure(sizing_mode="stretch_width", height=560, tools="pan,wheel_zoom,box_zoom,reset,save",
                  active_scroll="wheel_zoom", x_range=(-1.25, 1.25), y_range=(-1.2, 1.2), toolbar_location="above")
    plot.axis.visible = False
    plot.grid.visible = False
    plot.outline_line_color = None
    if edges:
        plain = [r for r in edges if (str(r["source"]), str(r["target"])) not in view.marked]
        marked = [r for r in edges if (str(r["source"]), str(r["target"])) in view.marked]
        for group, colour, width in ((plain, "#9aa5ad", 1.2), (marked, MARK, 3.2)):
            if not group:
                continue
            src = ColumnDataSource(_edge_columns(group, pos))
            plot.multi_line("xs", "ys", source=src, line_color=colour, line_width=width, line_alpha=0.8)
            plot.add_layout(Arrow(end=VeeHead(size=12, fill_color=colour, line_color=colour), line_color=colour,
                                  line_width=width,
                                  x_start="ax", y_start="ay", x_end="bx", y_end="by", source=src))
            if len(edges) <= EDGE_LABELS_MAX:
                plot.add_layout(LabelSet(x="mx", y="my", text="type", source=src, text_font_size="8pt",
                                         text_color="#55606a", text_align="center"))
    glyph = plot.scatter("x", "y", source=nodes, size=15, fill_color="colour", line_color="#ffffff",
                         line_width=1.5, selection_line_color="#000000", selection_line_width=3,
                         nonselection_fill_alpha=0.75)
    plot.add_layout(LabelSet(x="x", y="y", text="label", source=nodes, x_offset=9, y_offset=4,
                             text_font_size="9pt", text_color="#222222"))
    plot.add_tools(HoverTool(renderers=[glyph], tooltips=[("name", "@label"), ("id", "@id"), ("labels", "@kind")]),
                   TapTool(renderers=[glyph]))
    details = Div(text="<p>Click a node, or search one by name, to see its details.</p>",
                  sizing_mode="stretch_width", styles={"font-size": "13px"})
    nodes.selected.js_on_change("indices", CustomJS(args={"nodes": nodes, "details": details}, code=_DETAILS_JS))
    search = AutocompleteInput(completions=sorted(set(labels)), placeholder="search a node by name",
                               case_sensitive=False, min_characters=1, width=320)
    search.js_on_change("value", CustomJS(args={"nodes": nodes, "details": details, "plot": plot},
                                          code=_SEARCH_JS))
    parts: list[Any] = []
    if view.notice:
        parts.append(Div(text=html.escape(view.notice), sizing_mode="stretch_width", styles=_NOTICE_STYLE))
    parts += [search, plot, details]
    return column(*parts, sizing_mode="stretch_width")


_NOTICE_STYLE = {"background": "#fff4d6", "border": "1px solid #e5c467", "padding": "6px 10px", "font-size": "13px"}


def _edge_columns(group: list[Any], pos: dict[str, tuple[float, float]]) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {k: [] for k in ("xs", "ys", "ax", "ay", "bx", "by", "mx", "my", "type")}
    for r in group:
        (x0, y0), (x1, y1) = pos[str(r["source"])], pos[str(r["target"])]
        if (x0, y0) == (x1, y1):  # a self-loop: a small detour so that it shows
            cols["xs"].append([x0, x0 + 0.05, x0 + 0.05, x0])
            cols["ys"].append([y0, y0, y0 + 0.05, y0])
        else:
            cols["xs"].append([x0, x1])
            cols["ys"].append([y0, y1])
        # the arrow head stops short of the target's circle
        dx, dy = x1 - x0, y1 - y0
        d = math.hypot(dx, dy) or 1.0
        cut = min(0.045, d / 3)
        cols["ax"].append(x1 - dx / d * (cut + 0.01))
        cols["ay"].append(y1 - dy / d * (cut + 0.01))
        cols["bx"].append(x1 - dx / d * cut)
        cols["by"].append(y1 - dy / d * cut)
        cols["mx"].append((x0 + x1) / 2)
        cols["my"].append((y0 + y1) / 2)
        cols["type"].append(str(r["type"]))
    return cols


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{padding:12px 18px;background:#24343f;color:#fff}header h1{font-size:18px;margin:0 0 4px}
header p{margin:0;font-size:13px;opacity:.85}main{padding:8px 18px}
section.tables{padding:6px 18px 30px}table{border-collapse:collapse;margin:6px 0 14px;font-size:13px;width:100%}
td,th{border:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}th{background:#eef2f4}
.legend span{display:inline-block;margin-right:12px;font-size:13px}.legend i{display:inline-block;width:10px;
height:10px;border-radius:50%;margin-right:4px;vertical-align:middle}
"""


def render_views(views: Sequence[View], *, title: str, subtitle: str = "", legend: dict[str, str] | None = None
                 ) -> str:
    """One HTML page holding ``views`` (one tab each; the last one is shown first) and their tables."""
    if not views:
        raise ValueError("there is nothing to show")
    pictures = [_picture(v) for v in views]
    if len(views) == 1:
        root = pictures[0]
    else:
        root = Tabs(tabs=[TabPanel(child=p, title=v.title[:60]) for v, p in zip(views, pictures, strict=True)],
                    active=len(views) - 1, sizing_mode="stretch_width")
    script, div = components(root)
    payload = [{"title": v.title, "kg": v.kg} for v in views]
    resources = Resources(mode="inline", components=["bokeh", "bokeh-widgets"])
    keys = "".join(f'<span><i style="background:{c}"></i>{html.escape(k)}</span>' for k, c in (legend or {}).items())
    sections = "".join(
        f'<details><summary>{html.escape(v.title)}: {len(v.kg["nodes"])} nodes, {len(v.kg["relationships"])} '
        f'relationships</summary>{_tables(v.kg)}</details>' for v in views)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style>
{resources.render_js()}
</head>
<body><header><h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p></header>
<main>{f'<p class="legend">{keys}</p>' if keys else ''}{div}</main>
<section class="tables"><h2>As tables</h2>{sections}</section>
<script type="application/json" id="kg-data">{_json_for_script(payload)}</script>
{script}
</body></html>
"""


def render_html(graphs: Sequence[tuple[str, KGSnapshot]], *, title: str = "Knowledge graph", subtitle: str = "",
                notices: Sequence[str] | None = None) -> str:
    """One HTML page showing the KGs ``graphs`` (``(title, snapshot)`` pairs; the last one is shown first);
    ``notices`` (aligned with ``graphs``) is said above each picture."""
    if not graphs:
        raise ValueError("there is no knowledge graph to show")
    notes = list(notices or [""] * len(graphs))
    return render_views([View(name, kg, notice=note) for (name, kg), note in zip(graphs, notes, strict=True)],
                        title=title, subtitle=subtitle)


def kgot_graphs(state: dict[str, Any], *, snapshot: int | None = None) -> list[tuple[str, KGSnapshot]]:
    """The KGs of a KGoT or fusion run: after each KG write, then the final one (or only write ``snapshot``)."""
    graphs: list[tuple[str, KGSnapshot]] = []
    if state.get("results") and "kg" not in state:  # a fusion run: one final KG per variant
        for result in state["results"]:
            if result.get("kg"):
                graphs.append((f"variant {result['variant']} (answer: {result['final_answer']})", result["kg"]))
        if snapshot is not None:
            if not 0 <= snapshot < len(graphs):
                raise ValueError(f"the run has {len(graphs)} variant KG(s); --snapshot takes 0..{len(graphs) - 1}")
            return [graphs[snapshot]]
        return graphs
    writes = [w for w in state.get("kg_writes") or [] if w.get("snapshot") is not None]
    for number, write in enumerate(writes):
        graphs.append((f"after write {number} (iteration {write['iteration']}, {write['tool_call_id']})",
                       write["snapshot"]))
    if snapshot is not None:
        if not 0 <= snapshot < len(writes):
            raise ValueError(f"the run has {len(writes)} KG snapshot(s); --snapshot takes 0..{len(writes) - 1}")
        return [graphs[snapshot]]
    if state.get("kg") is not None:
        graphs.append(("final knowledge graph", state["kg"]))
    return graphs


# --------------------------------------------------------------------------------------------------------------
# Run views: the grounded thought graph, ARK-V1's exploration, Agent-G's retrieval
# --------------------------------------------------------------------------------------------------------------
def answer_path(graph: KGSnapshot) -> set[tuple[str, str]]:
    """The edges from the first thought to the answer's (a thought graph's node labelled ``answer``), merges
    included: every ancestor of the answer and the edges between them."""
    parents: dict[str, list[str]] = {}
    for r in graph["relationships"]:
        parents.setdefault(str(r["target"]), []).append(str(r["source"]))
    answer = [str(n["id"]) for n in graph["nodes"] if "answer" in (n.get("labels") or [])]
    edges: set[tuple[str, str]] = set()
    todo, seen = list(answer), set(answer)
    while todo:
        child = todo.pop()
        for parent in parents.get(child, []):
            edges.add((parent, child))
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return edges


def render_thought_graph(graph: KGSnapshot, *, title: str, subtitle: str = "") -> str:
    """The grounded workflow's thought graph: one column per depth, states coloured by what became of them
    (the answer's, final, kept, pruned, failed), merges drawn as ``merged into`` edges, the answer's path
    thick and red."""
    layers = {str(n["id"]): int((n.get("properties") or {}).get("depth", 0)) for n in graph["nodes"]}
    view = View("thought graph", graph, layers=layers, marked=answer_path(graph), colour_by_status=True)
    legend = {k: STATUS_COLOURS[k] for k in ("answer", "final", "kept", "pruned", "failed")}
    return render_views([view], title=title, subtitle=subtitle, legend=legend)


def ark_graph(state: dict[str, Any]) -> KGSnapshot:
    """ARK-V1's explored subgraph: the entities of the triples its steps retrieved (each step's anchor labelled
    ``anchor``), an edge per triple; triples a step used for its inference are ``used``, the others
    ``retrieved``."""
    nodes: dict[str, dict[str, Any]] = {}
    relationships: list[Any] = []
    seen: set[tuple[str, str, str]] = set()

    def node(name: str, role: str, step: int) -> None:
        record = nodes.setdefault(name, {"id": name, "labels": ["entity"], "properties": {"name": name,
                                                                                         "steps": []}})
        if step not in record["properties"]["steps"]:
            record["properties"]["steps"].append(step)
        if role == "anchor":
            record["labels"] = ["entity", "anchor"]

    for step in state.get("steps") or []:
        k = int(step.get("k", 0))
        node(step.get("anchor", ""), "anchor", k)
        used = {t.get("key") for t in step.get("selected") or []}
        for triple in step.get("retrieved") or []:
            head, relation, tail = triple["head"], triple["relation"], triple["tail"]
            for end in (head, tail):
                if end != step.get("anchor"):
                    node(end, "entity", k)
            if (head, relation, tail) in seen:
                continue
            seen.add((head, relation, tail))
            relationships.append({"type": relation, "source": head, "target": tail,
                                  "properties": {"step": k, "used": triple.get("key") in used,
                                                 **({"implication": step["implication"]}
                                                    if triple.get("key") in used and step.get("implication")
                                                    else {})}})
    return {"nodes": list(nodes.values()), "relationships": relationships}  # type: ignore[arg-type]


def _question_and_answer(state: dict[str, Any]) -> str:
    """A run view's subtitle: the run's question and, once it has one, its answer."""
    answer = state.get("final_answer") or state.get("answer")
    question = str(state.get("question", ""))
    return question if answer in (None, "") else f"{question} — answer: {answer}"


def render_ark(state: dict[str, Any], *, title: str) -> str:
    """ARK-V1's exploration as a page: anchors in red, the triples its steps used thick and red."""
    graph = ark_graph(state)
    if not graph["nodes"]:
        raise ValueError("the run has no reasoning step yet")
    marked = {(str(r["source"]), str(r["target"])) for r in graph["relationships"] if r["properties"].get("used")}
    subtitle = _question_and_answer(state)
    view = View(f"explored subgraph ({len(state.get('steps') or [])} steps)", graph, marked=marked,
                colour_by_status=True)
    return render_views([view], title=title, subtitle=subtitle,
                        legend={"anchor": STATUS_COLOURS["anchor"], "entity": STATUS_COLOURS["entity"],
                                "triple a step used": MARK})


_ARROW = re.compile(r"\s*(?:→|->)\s*")


def agent_g_graph(state: dict[str, Any]) -> KGSnapshot:
    """Agent-G's retrieval: the question, the topic entities each iteration linked, the reasoning paths
    (``e → r → … → n``) as entity-relation-entity edges, and the pages or documents retrieved (an edge from the
    question, with the iteration and the score)."""
    nodes: dict[str, dict[str, Any]] = {"question": {"id": "question", "labels": ["question"],
                                                     "properties": {"name": "question",
                                                                    "text": state.get("question", "")}}}
    relationships: list[Any] = []
    seen: set[tuple[str, str, str]] = set()

    def add(name: str, role: str) -> str:
        record = nodes.setdefault(name, {"id": name, "labels": [role], "properties": {"name": name}})
        if role == "topic" and record["labels"] != ["topic"]:
            record["labels"] = ["topic"]
        return name

    def edge(source: str, relation: str, target: str, props: dict[str, Any]) -> None:
        if (source, relation, target) not in seen:
            seen.add((source, relation, target))
            relationships.append({"type": relation, "source": source, "target": target, "properties": props})

    for it in state.get("iterations") or []:
        t = it.get("t")
        for entity in (it.get("action") or {}).get("entities") or []:
            edge("question", "topic entity", add(entity.get("name", ""), "topic"), {"iteration": t})
        for ref in (it.get("retrieval") or {}).get("references") or []:
            if ref.get("kind") == "path":
                parts = _ARROW.split(ref.get("text", ""))
                for i in range(0, len(parts) - 2, 2):
                    edge(add(parts[i], "entity"), parts[i + 1], add(parts[i + 2], "entity"), {"iteration": t})
            else:
                node = add(str(ref.get("id", "")), ref.get("kind", "document"))
                nodes[node]["properties"].setdefault("text", str(ref.get("text", ""))[:500])
                edge("question", "retrieved", node, {"iteration": t, "score": ref.get("score")})
    return {"nodes": list(nodes.values()), "relationships": relationships}  # type: ignore[arg-type]


def render_agent_g(state: dict[str, Any], *, title: str) -> str:
    """Agent-G's retrieval as a page (one picture over all iterations)."""
    graph = agent_g_graph(state)
    if len(graph["nodes"]) <= 1:
        raise ValueError("the run has retrieved nothing yet")
    subtitle = _question_and_answer(state)
    view = View(f"retrieval over {len(state.get('iterations') or [])} iteration(s)", graph, colour_by_status=True)
    return render_views([view], title=title, subtitle=subtitle,
                        legend={k: STATUS_COLOURS[k] for k in ("question", "topic", "entity", "page")})
