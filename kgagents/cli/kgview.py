"""A self-contained HTML view of task KGs (``kgagents show THREAD --kg``).

One file, no network: the snapshots are embedded as JSON, a small force layout written here draws them as SVG
(drag a node to move it, click it for its labels and properties), and the same content is listed in plain HTML
tables, which also serve readers without JavaScript. Several snapshots (the KG after each write, fusion
variants) share one page with a selector.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kgagents.tools.kg.base import KGSnapshot


def _json_for_script(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _value(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str))


def _tables(snapshot: KGSnapshot) -> str:
    rows = ["<h3>Nodes</h3><table><thead><tr><th>id</th><th>labels</th><th>properties</th></tr></thead><tbody>"]
    for node in snapshot["nodes"]:
        props = "<br>".join(f"<b>{html.escape(str(k))}</b>: {_value(v)}" for k, v in node["properties"].items())
        rows.append(f"<tr><td>{html.escape(str(node['id']))}</td><td>{html.escape(', '.join(node['labels']))}</td>"
                    f"<td>{props}</td></tr>")
    rows.append("</tbody></table><h3>Relationships</h3><table><thead><tr><th>source</th><th>type</th>"
                "<th>target</th><th>properties</th></tr></thead><tbody>")
    for rel in snapshot["relationships"]:
        props = "<br>".join(f"<b>{html.escape(str(k))}</b>: {_value(v)}" for k, v in rel["properties"].items())
        rows.append(f"<tr><td>{html.escape(str(rel['source']))}</td><td>{html.escape(rel['type'])}</td>"
                    f"<td>{html.escape(str(rel['target']))}</td><td>{props}</td></tr>")
    rows.append("</tbody></table>")
    return "".join(rows)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{padding:12px 18px;background:#24343f;color:#fff}header h1{font-size:18px;margin:0 0 4px}
header p{margin:0;font-size:13px;opacity:.85}
.bar{padding:8px 18px;display:flex;gap:12px;align-items:center;flex-wrap:wrap;font-size:14px}
main{display:flex;gap:0;min-height:520px}
#svg{flex:1;min-width:0;background:#fff;border-top:1px solid #ddd;border-bottom:1px solid #ddd}
#details{width:300px;padding:10px 14px;border-left:1px solid #ddd;background:#fff;font-size:13px;overflow:auto}
svg text{font-size:11px;pointer-events:none}svg .edge-label{fill:#555;font-size:10px}
svg circle{stroke:#fff;stroke-width:1.5px;cursor:grab}svg line{stroke:#999;stroke-width:1.2px}
section.tables{padding:6px 18px 30px}table{border-collapse:collapse;margin:6px 0 14px;font-size:13px;width:100%}
td,th{border:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}th{background:#eef2f4}
.legend span{display:inline-block;margin-right:10px}.legend i{display:inline-block;width:10px;height:10px;
border-radius:50%;margin-right:4px;vertical-align:middle}.snapshot{display:none}.snapshot.active{display:block}
"""

_JS = r"""
(function(){
const data = JSON.parse(document.getElementById('kg-data').textContent);
const svg = document.getElementById('svg'), details = document.getElementById('details');
const select = document.getElementById('which'), legend = document.getElementById('legend');
const NS = 'http://www.w3.org/2000/svg';
const palette = ['#4e79a7','#f28e2b','#e15759','#76b7b2','#59a14f','#edc948','#b07aa1','#ff9da7','#9c755f','#bab0ac'];
const colours = {};
function colour(label){ if(!(label in colours)) colours[label] = palette[Object.keys(colours).length % palette.length]; return colours[label]; }
function el(name, attrs, parent){ const e = document.createElementNS(NS, name); for (const k in attrs) e.setAttribute(k, attrs[k]); if (parent) parent.appendChild(e); return e; }
function esc(s){ return String(s).replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'})[c]); }
function show(node){
  if (!node){ details.innerHTML = '<p>Click a node to see its labels and properties.</p>'; return; }
  let h = '<h3>' + esc(node.id) + '</h3><p><b>labels:</b> ' + esc(node.labels.join(', ') || '(none)') + '</p><table>';
  for (const k in node.properties) h += '<tr><th>' + esc(k) + '</th><td>' + esc(typeof node.properties[k] === 'string' ? node.properties[k] : JSON.stringify(node.properties[k])) + '</td></tr>';
  details.innerHTML = h + '</table>';
}
function draw(index){
  const kg = data[index].kg; svg.innerHTML = '';
  document.querySelectorAll('.snapshot').forEach((s, i) => s.classList.toggle('active', i === index));
  const W = svg.clientWidth || 900, H = svg.clientHeight || 520;
  const nodes = kg.nodes.map((n, i) => ({...n, x: W/2 + 200*Math.cos(2*Math.PI*i/Math.max(1,kg.nodes.length)), y: H/2 + 160*Math.sin(2*Math.PI*i/Math.max(1,kg.nodes.length)), vx: 0, vy: 0}));
  const byId = {}; nodes.forEach(n => byId[n.id] = n);
  const links = kg.relationships.filter(r => byId[r.source] && byId[r.target]).map(r => ({...r, s: byId[r.source], t: byId[r.target]}));
  for (let step = 0; step < 400; step++){
    const alpha = 1 - step/400;
    for (let i = 0; i < nodes.length; i++) for (let j = i + 1; j < nodes.length; j++){
      const a = nodes[i], b = nodes[j]; let dx = a.x - b.x, dy = a.y - b.y; let d2 = dx*dx + dy*dy || 0.01;
      const f = 2500 / d2; const d = Math.sqrt(d2); dx /= d; dy /= d;
      a.vx += dx*f; a.vy += dy*f; b.vx -= dx*f; b.vy -= dy*f; }
    for (const l of links){ let dx = l.t.x - l.s.x, dy = l.t.y - l.s.y; const d = Math.sqrt(dx*dx + dy*dy) || 0.01;
      const f = (d - 120) * 0.02; dx /= d; dy /= d; l.s.vx += dx*f; l.s.vy += dy*f; l.t.vx -= dx*f; l.t.vy -= dy*f; }
    for (const n of nodes){ n.vx += (W/2 - n.x)*0.004; n.vy += (H/2 - n.y)*0.004;
      n.x += n.vx*alpha; n.y += n.vy*alpha; n.vx *= 0.6; n.vy *= 0.6;
      n.x = Math.max(30, Math.min(W - 30, n.x)); n.y = Math.max(30, Math.min(H - 30, n.y)); }
  }
  const defs = el('defs', {}, svg);
  const marker = el('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 20, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'}, defs);
  el('path', {d: 'M 0 0 L 10 5 L 0 10 z', fill: '#999'}, marker);
  const lines = links.map(l => { const g = el('g', {}, svg); const line = el('line', {'marker-end': 'url(#arrow)'}, g);
    const text = el('text', {class: 'edge-label', 'text-anchor': 'middle'}, g); text.textContent = l.type; return {l, line, text}; });
  const circles = nodes.map(n => { const g = el('g', {}, svg); const c = el('circle', {r: 11, fill: colour(n.labels[0] || '(none)')}, g);
    const t = el('text', {dx: 14, dy: 4}, g); t.textContent = n.id; c.addEventListener('click', () => show(n));
    c.addEventListener('mousedown', ev => { ev.preventDefault(); const move = e => { const p = svg.getBoundingClientRect(); n.x = e.clientX - p.left; n.y = e.clientY - p.top; place(); };
      const up = () => { window.removeEventListener('mousemove', move); window.removeEventListener('mouseup', up); };
      window.addEventListener('mousemove', move); window.addEventListener('mouseup', up); });
    return {n, c, t}; });
  function place(){
    for (const {l, line, text} of lines){ line.setAttribute('x1', l.s.x); line.setAttribute('y1', l.s.y); line.setAttribute('x2', l.t.x); line.setAttribute('y2', l.t.y);
      text.setAttribute('x', (l.s.x + l.t.x)/2); text.setAttribute('y', (l.s.y + l.t.y)/2 - 3); }
    for (const {n, c, t} of circles){ c.setAttribute('cx', n.x); c.setAttribute('cy', n.y); t.setAttribute('x', n.x); t.setAttribute('y', n.y); }
  }
  place(); show(null);
  legend.innerHTML = Object.keys(colours).filter(k => nodes.some(n => (n.labels[0] || '(none)') === k)).map(k => '<span><i style="background:' + colours[k] + '"></i>' + esc(k) + '</span>').join('');
}
data.forEach((d, i) => { const o = document.createElement('option'); o.value = i; o.textContent = d.title; select.appendChild(o); });
select.value = String(data.length - 1); select.addEventListener('change', () => draw(Number(select.value)));
document.querySelectorAll('.snapshot').forEach(s => s.classList.remove('active'));
draw(data.length - 1);
})();
"""


def render_html(graphs: Sequence[tuple[str, KGSnapshot]], *, title: str = "Knowledge graph", subtitle: str = "") -> str:
    """One HTML page showing ``graphs`` (``(title, snapshot)`` pairs; the last one is shown first)."""
    if not graphs:
        raise ValueError("there is no knowledge graph to show")
    payload = [{"title": name, "kg": kg} for name, kg in graphs]
    sections = "".join(
        f'<div class="snapshot active"><h2>{html.escape(name)}</h2><p>{len(kg["nodes"])} nodes, '
        f'{len(kg["relationships"])} relationships</p>{_tables(kg)}</div>' for name, kg in graphs)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>
<body><header><h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p></header>
<div class="bar"><label>Knowledge graph: <select id="which"></select></label><span id="legend" class="legend"></span></div>
<main><svg id="svg" width="100%" height="520" role="img" aria-label="knowledge graph"></svg>
<aside id="details"></aside></main>
<section class="tables">{sections}</section>
<script type="application/json" id="kg-data">{_json_for_script(payload)}</script>
<script>{_JS}</script>
</body></html>
"""


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
