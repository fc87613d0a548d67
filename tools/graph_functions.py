"""Graph-CoT's graph functions as LangChain tools over a static KG (the grounded agent's actions).

- ``RetrieveNode(keyword)``: the node named exactly as the keyword, else the node whose name (or text) is closest
  to it (semantic search over the store's embedding index), with its id;
- ``NodeFeature(node_id, feature)``: one feature of a node (its name counts as the feature ``name``);
- ``NeighbourCheck(node_id, neighbor_type)``: the node's neighbours along one edge type;
- ``NodeDegree(node_id, neighbor_type)``: how many such neighbours it has;
- ``Finish(answer)``: the final answer.

A wrong call never raises: an unknown node id, an unknown feature or edge type, or missing arguments become an
observation that says what is wrong and what exists (the node's features or edge types), so the agent can
correct itself. Observations longer than the run's limit are cut, with a note of how much was cut.

The functions are called as tools (native tool calls) or from Graph-CoT's text protocol: an action line such as
``NodeFeature[a_1, name], NodeFeature[a_2, name]`` is read by :func:`parse_actions` (several calls per line;
``Finish[...]`` takes everything up to its closing bracket as the answer); a call that cannot be read becomes an
observation that says how to write it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from kgagents.tools.pgraph import StaticKG

FINISH = "Finish"
#: Each function's parameters, in the order the text protocol writes them (``NeighborCheck`` is accepted too).
PARAMETERS: dict[str, tuple[str, ...]] = {
    "RetrieveNode": ("keyword",), "NodeFeature": ("node_id", "feature"), "NeighbourCheck": ("node_id", "neighbor_type"),
    "NeighborCheck": ("node_id", "neighbor_type"), "NodeDegree": ("node_id", "neighbor_type"), FINISH: ("answer",),
}


class RetrieveNodeArgs(BaseModel):
    keyword: str = Field(description="Text that describes the node to find, e.g. a title or a name")


class NodeArgs(BaseModel):
    node_id: str = Field(description="The ID of a node, as RetrieveNode or NeighbourCheck returned it")


class NodeFeatureArgs(NodeArgs):
    feature: str = Field(description="The feature (attribute) name, e.g. name, title, year")


class NeighbourArgs(NodeArgs):
    neighbor_type: str = Field(description="The edge type to follow, as in the graph definition")


class FinishArgs(BaseModel):
    answer: str = Field(description="The final answer: node names or values, not node IDs")


@dataclass
class Observation:
    """What one call of a graph function returned."""

    text: str
    ok: bool = True
    finished: bool = False
    answer: str | None = None


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a note saying how much was cut."""
    if limit <= 0 or len(text) <= limit:
        return text
    return text[:limit] + f" […] ({len(text) - limit} more characters cut; ask for less, e.g. NodeDegree first)"


class GraphFunctions:
    """The graph functions of one run over one graph (the graph is the process's shared read-only instance)."""

    names = ("RetrieveNode", "NodeFeature", "NeighbourCheck", "NodeDegree", FINISH)

    def __init__(self, graph: StaticKG, *, max_chars: int = 2000, retrieve_k: int = 1,
                 retrieve_field: str = "name", embedder: Any = None, index: str | None = "flat",
                 retrieve_exact: bool = True) -> None:
        self.graph = graph
        self.max_chars = max_chars
        self.retrieve_k = retrieve_k
        self.retrieve_field = retrieve_field
        self.embedder = embedder
        self.index = index
        """The kind of vector index RetrieveNode searches (``flat``: exact, ``ivf``; ``None``: by the graph's
        size)."""
        self.retrieve_exact = retrieve_exact
        """Whether RetrieveNode first looks for nodes named exactly as the keyword (else: embedding search only,
        as Graph-CoT's retriever)."""

    # --- the functions -------------------------------------------------------------------------------------
    def retrieve_node(self, keyword: str) -> Observation:
        keyword = keyword.strip()
        if not keyword:
            return Observation("RetrieveNode needs a keyword.", ok=False)
        exact = self.graph.nodes_named(keyword) if self.retrieve_exact else []
        found = [n.id for n in exact][: self.retrieve_k] or \
            [i for i, _ in self.graph.nearest_nodes(keyword, self.retrieve_k, field=self.retrieve_field,
                                                    embedder=self.embedder, kind=self.index)]
        if not found:
            return Observation("There is no information that can be matched in the database. Please try another "
                               "query.", ok=False)
        if len(found) == 1:
            return Observation(f"The ID of this retrieval target node is {found[0]}.")
        listed = "; ".join(f"{i} ({self.graph.display_name(i)})" for i in found)
        return Observation(f"The IDs of the closest nodes, best first, are: {listed}.")

    def _unknown_node(self, node_id: str) -> Observation:
        return Observation(f"There is no node with ID {node_id!r} in the graph. Use RetrieveNode to find a node's "
                           "ID.", ok=False)

    def node_feature(self, node_id: str, feature: str) -> Observation:
        node = self.graph.node(_clean(node_id))
        if node is None:
            return self._unknown_node(node_id)
        features = self.graph.features(node.id)
        key = _clean(feature)
        if key in features:
            value = features[key]
        elif key == "name":
            value = node.name
        elif key == "type":
            value = node.type
        else:
            known = ", ".join(["name", *[k for k in features if k != "name"]])
            return Observation(f"Node {node.id} has no feature {key!r}; its features are: {known}.", ok=False)
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return Observation(cap(f"The {key} feature of {node.id} is: {text}.", self.max_chars))

    def neighbour_check(self, node_id: str, neighbor_type: str) -> Observation:
        node = self.graph.node(_clean(node_id))
        if node is None:
            return self._unknown_node(node_id)
        relation = _clean(neighbor_type)
        relations = self.graph.relations_of(node.id)
        if relation not in relations:
            return Observation(f"Node {node.id} has no {relation!r} neighbours; its neighbour types are: "
                               f"{', '.join(relations) or '(none)'}.", ok=False)
        neighbours = self.graph.neighbours(node.id, relation)
        return Observation(cap(f"The {relation} neighbors of {node.id} are: {json.dumps(neighbours)}.",
                               self.max_chars))

    def node_degree(self, node_id: str, neighbor_type: str) -> Observation:
        node = self.graph.node(_clean(node_id))
        if node is None:
            return self._unknown_node(node_id)
        relation = _clean(neighbor_type)
        relations = self.graph.relations_of(node.id)
        if relation not in relations:
            return Observation(f"Node {node.id} has no {relation!r} neighbours (degree 0); its neighbour types are: "
                               f"{', '.join(relations) or '(none)'}.", ok=False)
        return Observation(f"The {relation} neighbor node degree of {node.id} is: "
                           f"{self.graph.degree(node.id, relation)}.")

    def finish(self, answer: str) -> Observation:
        return Observation(f"Finish: {answer}", finished=True, answer=str(answer).strip())

    # --- dispatch ------------------------------------------------------------------------------------------
    def call(self, name: str, args: dict[str, Any]) -> Observation:
        """Run one function by name; wrong names or arguments become an observation."""
        functions: dict[str, Callable[..., Observation]] = {
            "RetrieveNode": self.retrieve_node, "NodeFeature": self.node_feature,
            "NeighbourCheck": self.neighbour_check, "NeighborCheck": self.neighbour_check,
            "NodeDegree": self.node_degree, FINISH: self.finish,
        }
        if name not in functions:
            return Observation(f"Invalid action {name!r}. Valid actions are RetrieveNode[keyword], "
                               "NodeFeature[node_id, feature], NeighbourCheck[node_id, neighbor_type], "
                               "NodeDegree[node_id, neighbor_type] and Finish[answer].", ok=False)
        function, params = functions[name], PARAMETERS[name]
        missing = [p for p in params if not isinstance(args.get(p), (str, int,
                                                                     float)) or str(args.get(p)).strip() == ""]
        if missing:
            return Observation(f"{name} needs {', '.join(params)}; missing or empty: {', '.join(missing)}.",
                               ok=False)
        return function(*(str(args[p]) for p in params))

    def tools(self) -> list[BaseTool]:
        """The functions as LangChain tools (names, descriptions and argument schemas the model sees)."""
        def tool(name: str, schema: type[BaseModel], description: str, params: tuple[str, ...]) -> BaseTool:
            return StructuredTool.from_function(
                func=lambda **kw: self.call(name, kw).text, name=name, description=description, args_schema=schema)

        return [
            tool("RetrieveNode", RetrieveNodeArgs, "Retrieve the node of the graph that best matches the keyword "
                 "(semantic search); returns its ID.", ("keyword",)),
            tool("NodeFeature", NodeFeatureArgs, "Return the value of one feature (attribute) of a node.",
                 ("node_id", "feature")),
            tool("NeighbourCheck", NeighbourArgs, "List the IDs of the neighbours of a node along one edge type.",
                 ("node_id", "neighbor_type")),
            tool("NodeDegree", NeighbourArgs, "Count the neighbours of a node along one edge type.",
                 ("node_id", "neighbor_type")),
            tool(FINISH, FinishArgs, "Finish with the final answer (node names or values, not IDs).", ("answer",)),
        ]


def _clean(text: str) -> str:
    """An argument without surrounding whitespace or quotes (models often quote ids)."""
    value = str(text).strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
        value = value[1:-1].strip()
    return value


# ------------------------------------------------------------------------------------------------------------------
# The text protocol: ``Action n: Function[args], Function[args]``
# ------------------------------------------------------------------------------------------------------------------
@dataclass
class ParsedAction:
    """One call read from an action line: the function's name and arguments, or why it could not be read."""

    name: str
    args: dict[str, str]
    written: str
    error: str | None = None


_CALL = re.compile(r"([A-Za-z_]\w*)\s*\[")


def _label(names: str) -> re.Pattern[str]:
    """A line that begins with a step label of the text protocol (``names``, e.g. ``Action``), numbered or not, as
    chat models write it: plain (``Action 2:``) or decorated as Markdown (``**Action 2:**``, ``**Action 2**:``,
    ``### Thought 2:``, ``_Thought_:``); the match takes the label and its decoration, up to the step's text."""
    return re.compile(rf"^\s*(?:#+\s*)?[*_]*\s*(?:{names})\s*\d*(?:\.\d+)?\s*[*_]*\s*:\s*[*_]*\s*", re.IGNORECASE)


_PREFIX = _label("Action")
_NEXT_STEP = _label("Observation|Thought")


def _closing(text: str, start: int) -> int:
    """The index of the ``]`` that closes the ``[`` at ``start - 1`` (nested brackets counted), or -1."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "[":
            depth += 1
        elif text[i] == "]":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _arguments(name: str, raw: str) -> tuple[dict[str, str], str | None]:
    """A call's arguments by parameter: one parameter takes the whole text (a keyword or an answer may hold
    commas), two split at the first comma (node ids hold none)."""
    params = PARAMETERS.get(name)
    if params is None:  # an unknown function: GraphFunctions.call says which exist
        return {"arguments": raw.strip()}, None
    if len(params) == 1:
        return {params[0]: raw.strip()}, None
    first, comma, rest = raw.partition(",")
    if not comma or not first.strip() or not rest.strip():
        return {}, (f"{name} takes {len(params)} arguments: write {name}[{', '.join(params)}], e.g. "
                    f"{name}[{_EXAMPLES[name]}].")
    return {params[0]: first.strip(), params[1]: rest.strip()}, None


_EXAMPLES = {"NodeFeature": "p_12, title", "NeighbourCheck": "p_12, author", "NeighborCheck": "p_12, author",
             "NodeDegree": "p_12, cited_by"}


#: A line that begins a step of the text protocol: ``Thought n:``, ``Action n:`` or ``Observation n:``.
_STEP_LINE = _label("Thought|Action|Observation")
_THOUGHT_PREFIX = _label(r"(?:Next\s+)?Thought")


def one_thought(text: str) -> str:
    """The thought of a thought reply, one step as Graph-CoT keeps it: without its ``Thought n:`` label, and cut
    where the model wrote on into a step of its own (an ``Action``, an ``Observation``, the next ``Thought``), which
    it invented: nothing of that reaches the scratchpad."""
    lines = str(text).strip().splitlines()
    if not lines:
        return ""
    kept = [_THOUGHT_PREFIX.sub("", lines[0], count=1)] if _THOUGHT_PREFIX.match(lines[0]) else []
    for line in lines[len(kept):]:
        if _STEP_LINE.match(line):
            break
        kept.append(line)
    return "\n".join(kept).strip()


def parse_actions(text: str) -> list[ParsedAction]:
    """The calls of one action line (Graph-CoT's text protocol), in order. The line is the reply's first
    ``Action n:`` line when it has one (a reply that first echoes its ``Thought n:`` still has its action), else
    the reply from its start; what the model wrote on past it (an observation, the next thought, the next
    action: Graph-CoT stops generating at the line's end and never reads them) is dropped. Labels may be decorated
    as Markdown (``**Action 1:**``). A call that cannot be read (no closing bracket, too few arguments) is a
    :class:`ParsedAction` with an ``error``; a line with no call at all is one such error."""
    parts = str(text).strip().splitlines()
    first = next((i for i, part in enumerate(parts) if _PREFIX.match(part)), 0)
    lines = []
    for i, part in enumerate(parts[first:]):
        if _NEXT_STEP.match(part) or (i and _PREFIX.match(part)):  # the model wrote on into a step of its own
            break
        lines.append(_PREFIX.sub("", part, count=1))
    line = " ".join(part for part in lines if part.strip())
    out: list[ParsedAction] = []
    position = 0
    while True:
        match = _CALL.search(line, position)
        if match is None:
            break
        name, start = match.group(1), match.end()
        end = _closing(line, start)
        if end < 0:
            out.append(ParsedAction(name, {}, line[match.start():].strip(),
                                    f"{name}[...] has no closing bracket: write {name}[arguments]."))
            break
        args, error = _arguments(name, line[start:end])
        out.append(ParsedAction(name, args, line[match.start():end + 1], error))
        position = end + 1
    if not out:
        shown = line[:200] or "(nothing)"
        out.append(ParsedAction("", {}, line, f"Invalid action: no Function[arguments] was found in {shown!r}. Write "
                                              "an action such as RetrieveNode[keyword], NodeFeature[node_id, feature], "
                                              "NeighbourCheck[node_id, neighbor_type], NodeDegree[node_id, "
                                              "neighbor_type] or Finish[answer]."))
    return out
