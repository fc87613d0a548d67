"""The HTML views of ``kgagents show --kg`` / ``graph show --html``: what each draws, and that a real browser
draws it (headless Chromium from the system packages; CI installs it, see .ci/run)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from kgagents.cli import kgview
from kgagents.cli.graph import cut_notice
from kgagents.nodes.grounded import thought_graph

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _kg(n: int = 8) -> dict:
    return {"nodes": [{"id": f"Q{i:06d}", "labels": ["person" if i % 2 else "city"],
                       "properties": {"name": f"Entity number {i}"}} for i in range(n)],
            "relationships": [{"type": "knows", "source": f"Q{i:06d}", "target": f"Q{i + 1:06d}", "properties": {}}
                              for i in range(n - 1)]}


def _thoughts() -> dict:
    """A ToT run: two candidates per depth, the second depth-1 state kept, its child the answer."""
    def t(tid, depth, parents, **more):
        return {"id": tid, "depth": depth, "parents": parents, "kind": "step", "thought": f"thought {tid}", **more}

    thoughts = {"s1": t("s1", 1, [], kept=False), "s2": t("s2", 1, [], kept=True),
                "s3": t("s3", 2, ["s2"], answer="KDD"), "s4": t("s4", 2, ["s2"], error="no such node")}
    return {"question": "Where was the paper published?", "thoughts": thoughts, "finals": ["s3"], "best": "s3"}


ARK_STATE = {
    "question": "Is Yui's pet a dachshund?", "final_answer": "True",
    "steps": [{"k": 1, "anchor": "Yui Yuigahama", "relation": "has pet", "implication": "Her pet is Sablé.",
               "retrieved": [{"key": "t1", "head": "Yui Yuigahama", "relation": "has pet", "tail": "Sablé"},
                             {"key": "t2", "head": "Yui Yuigahama", "relation": "friend of", "tail": "Yukino"}],
               "selected": [{"key": "t1", "head": "Yui Yuigahama", "relation": "has pet", "tail": "Sablé"}]},
              {"k": 2, "anchor": "Sablé", "relation": "animal breed", "implication": "A dachshund.",
               "retrieved": [{"key": "t3", "head": "Sablé", "relation": "animal breed", "tail": "dachshund"}],
               "selected": [{"key": "t3", "head": "Sablé", "relation": "animal breed", "tail": "dachshund"}]}]}

AGENT_G_STATE = {
    "question": "Which paper cites GraphSAGE?", "final_answer": "P2",
    "iterations": [{"t": 1, "action": {"entities": [{"name": "GraphSAGE", "type": "paper"}]},
                    "retrieval": {"module": "graph", "references": [
                        {"id": "P2", "kind": "path", "score": 0.9, "text": "GraphSAGE → cited by → P2"},
                        {"id": "P3", "kind": "path", "score": 0.5,
                         "text": "GraphSAGE → cited by → P9 → cited by → P3"}]}},
                   {"t": 2, "retrieval": {"module": "text", "references": [
                       {"id": "doc-7", "kind": "document", "score": 0.7, "text": "P2 extends GraphSAGE."}]}}]}


def test_nodes_carry_names_and_the_tables_keep_ids():
    page = kgview.render_html([("one", _kg())], title="t")
    data = json.loads(page.split('id="kg-data">')[1].split("</script>")[0])
    assert data[0]["kg"]["nodes"][0]["id"] == "Q000000"
    assert kgview.display_label(_kg()["nodes"][3]) == "Entity number 3"
    assert kgview.display_label({"id": "x" * 40, "properties": {}}) == "x" * 31 + "…"
    assert "<td>Q000003</td><td>Entity number 3</td>" in page
    outside_scripts = re.sub(r"<script\b[^>]*>.*?</script>", "", page, flags=re.S)
    assert not any("src=" in attrs for attrs in re.findall(r"<script\b([^>]*)>", page))  # every script inline
    assert not re.search(r"\b(src|href)=", outside_scripts)  # nothing else loaded either


def test_the_layout_is_deterministic_bounded_and_keeps_components_apart():
    kg = _kg(10)
    edges = [(r["source"], r["target"]) for r in kg["relationships"]]
    ids = [n["id"] for n in kg["nodes"]] + ["lonely"]
    first, second = kgview.layout(ids, edges), kgview.layout(ids, edges)
    assert first == second and set(first) == set(ids)
    assert all(-1.0 <= c <= 1.0 for p in first.values() for c in p)
    chain_xs = [first[i][0] for i in ids[:-1]]
    assert first["lonely"][0] > max(chain_xs) or first["lonely"][0] < min(chain_xs)


def test_the_thought_graph_is_layered_by_depth_and_marks_the_answer_path():
    graph = thought_graph(_thoughts())  # type: ignore[arg-type]
    assert kgview.answer_path(graph) == {("s2", "s3")}
    layers = {n["id"]: n["properties"]["depth"] for n in graph["nodes"]}
    pos = kgview.layout([n["id"] for n in graph["nodes"]], [(r["source"], r["target"])
                                                         for r in graph["relationships"]], layers)
    assert pos["s1"][0] == pos["s2"][0] < pos["s3"][0] == pos["s4"][0]
    merged = {"nodes": [{"id": i, "labels": ["step", "answer" if i == "m" else "kept"], "properties": {}}
                        for i in "abcm"],
              "relationships": [{"type": "next", "source": "a", "target": "b", "properties": {}},
                                {"type": "merged into", "source": "b", "target": "m", "properties": {}},
                                {"type": "merged into", "source": "c", "target": "m", "properties": {}}]}
    assert kgview.answer_path(merged) == {("a", "b"), ("b", "m"), ("c", "m")}


def test_ark_view_marks_anchors_and_the_triples_used():
    graph = kgview.ark_graph(ARK_STATE)
    anchors = {n["id"] for n in graph["nodes"] if "anchor" in n["labels"]}
    used = {(r["source"], r["target"]) for r in graph["relationships"] if r["properties"]["used"]}
    assert anchors == {"Yui Yuigahama", "Sablé"}
    assert used == {("Yui Yuigahama", "Sablé"), ("Sablé", "dachshund")}
    assert {n["id"] for n in graph["nodes"]} == {"Yui Yuigahama", "Sablé", "Yukino", "dachshund"}
    assert "answer: True" in kgview.render_ark(ARK_STATE, title="t")
    with pytest.raises(ValueError, match="no reasoning step"):
        kgview.render_ark({"question": "q"}, title="t")


def test_agent_g_view_draws_paths_and_documents():
    graph = kgview.agent_g_graph(AGENT_G_STATE)
    edges = {(r["source"], r["type"], r["target"]) for r in graph["relationships"]}
    assert ("GraphSAGE", "cited by", "P9") in edges and ("P9", "cited by", "P3") in edges
    assert ("question", "topic entity", "GraphSAGE") in edges and ("question", "retrieved", "doc-7") in edges
    roles = {n["id"]: n["labels"] for n in graph["nodes"]}
    assert roles["GraphSAGE"] == ["topic"] and roles["doc-7"] == ["document"] and roles["P3"] == ["entity"]
    with pytest.raises(ValueError, match="retrieved nothing"):
        kgview.render_agent_g({"question": "q"}, title="t")


def test_a_cut_neighbourhood_says_by_how_much():
    def graph(total, truncated=False):
        return SimpleNamespace(ego_graph=lambda seeds, radius, max_nodes: SimpleNamespace(
            hops=dict.fromkeys(range(total)), truncated=truncated))

    shown = {"nodes": [{}] * 200}
    assert cut_notice(graph(3001), "n", 2, shown, 200) == (
        "Cut: showing 200 of 3,001 nodes within 2 hop(s) (the nearest first; --max-nodes sets how many).")
    assert "of at least 100,000 nodes" in cut_notice(graph(100_000, True), "n", 2, shown, 200)
    assert cut_notice(graph(200), "n", 2, shown, 200) == ""
    assert cut_notice(graph(3001), "n", 2, {"nodes": [{}] * 150}, 200) == ""
    page = kgview.render_html([("one", _kg())], title="t", notices=["Cut: showing 8 of 3,001 nodes"])
    assert "Cut: showing 8 of 3,001 nodes" in page


# --------------------------------------------------------------------------------------------------------------
# A real browser draws every view
# --------------------------------------------------------------------------------------------------------------
def _browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def _screenshot(page: str, tmp_path: Path, name: str) -> Path:
    browser = _browser()
    if browser is None:
        if os.environ.get("KGAGENTS_CI"):
            pytest.fail("CI must have a headless Chromium (.ci/run installs the chromium package)")
        pytest.skip("needs a headless Chromium (apt install chromium)")
    html_file, png = tmp_path / f"{name}.html", tmp_path / f"{name}.png"
    html_file.write_text(page, encoding="utf-8")
    run = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,900",
                          "--virtual-time-budget=10000", f"--screenshot={png}", html_file.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and png.exists(), run.stderr[-2000:]
    return png


def _pixels_near(png: Path, colour: str, tolerance: int = 40) -> int:
    from PIL import Image

    target = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    image = Image.open(png).convert("RGB")
    return sum(1 for p in image.get_flattened_data()
               if all(abs(a - b) <= tolerance for a, b in zip(p, target, strict=True)))


VIEWS = {
    "kg": lambda: kgview.render_html([("one", _kg())], title="KG"),
    "thoughts": lambda: kgview.render_thought_graph(thought_graph(_thoughts()), title="thoughts"),  # type: ignore[arg-type]
    "ark": lambda: kgview.render_ark(ARK_STATE, title="ark"),
    "agent-g": lambda: kgview.render_agent_g(AGENT_G_STATE, title="agent-g"),
}
"""Each view and a colour it must draw (its nodes or its marks)."""
DRAWN = {"kg": kgview.PALETTE[0], "thoughts": kgview.MARK, "ark": kgview.MARK, "agent-g": kgview.STATUS_COLOURS["page"]}


@pytest.mark.slow
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_a_headless_browser_draws_the_view(tmp_path, view):
    png = _screenshot(VIEWS[view](), tmp_path, view)
    assert _pixels_near(png, DRAWN[view]) > 100, f"the {view} view drew no {DRAWN[view]} shapes"
    blank = _screenshot("<!DOCTYPE html><html><body></body></html>", tmp_path, "blank")
    assert _pixels_near(blank, DRAWN[view]) == 0
