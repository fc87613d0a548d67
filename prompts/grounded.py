"""Prompt templates of grounded reasoning (Graph CoT / ToT / GoT; paper 001, §4 and appendix F), filled with
:func:`kgagents.prompts.template.render`.

Two interaction methods ground every reasoning step in the graph: the **agent** (a thought, then actions with
Graph-CoT's graph functions, then their observations) and **automatic graph exploration** (a thought, the
entities it mentions, then relation and neighbour pruning around them, Algorithm 1). The strategies add the
state evaluators (selection and score votes) and GoT's merge. Every template is a
:class:`~kgagents.prompts.template.Template`: XML-like sections for the model, and the stage that names its
calls (which decision, which step and candidate), which travels as the call's metadata and never reaches the
model.
"""

from __future__ import annotations

from kgagents.prompts.template import Template, placeholders, render

__all__ = ["AGENT_ACTION", "AGENT_ACTION_TEXT", "AGENT_THOUGHT", "ENTITY_EXTRACTION",
           "FINAL_ANSWER", "KG_RAG_ANSWER", "MERGE", "PRUNE_ENTITIES", "PRUNE_RELATIONS", "SCORE_VOTE", "SEARCH_ATTRIBUTES",
           "SEARCH_END", "SEARCH_THOUGHT", "SELECTION_BEST", "SELECTION_VOTE", "ZERO_SHOT_ANSWER", "placeholders",
           "render"]

# --------------------------------------------------------------------------------------------------------------
# Agent (§4.2.1, Figure 9): thought → action → observation
# --------------------------------------------------------------------------------------------------------------
_AGENT_TASK = """<task>
Solve a question answering task with interleaving Thought, Interaction with Graph and Feedback from Graph steps.
In a Thought step you think about what further information is needed. In an Interaction step you get feedback
from the graph with these functions:
(1) RetrieveNode[keyword]: retrieves the node of the graph that matches the keyword (semantic search) and returns
    its ID.
(2) NodeFeature[node_id, feature]: returns the value of the node's feature (attribute) with that name.
(3) NodeDegree[node_id, neighbor_type]: returns how many neighbours of that type the node has.
(4) NeighbourCheck[node_id, neighbor_type]: lists the IDs of the node's neighbours of that type.
(5) Finish[answer]: ends the task with the answer.
You may take as many steps as necessary. Answer with the nodes' main features (e.g. names or titles), never with
node IDs.
</task>
<examples>
{examples}
</examples>
<graph_definition>
{graph_definition}
</graph_definition>
<question>{question}</question>
<scratchpad>
{scratchpad}
</scratchpad>"""

AGENT_THOUGHT = Template("agent thought, step {step}, candidate {candidate}", _AGENT_TASK + """
<instructions>
Write Thought {step}: in one or two sentences, what you know so far and what you need next. Do not call a
function yet.
</instructions>""")

AGENT_ACTION = Template("agent action, step {step}, candidate {candidate}", _AGENT_TASK + """
<thought>Thought {step}: {thought}</thought>
<instructions>
Take Action {step}: call the graph function (or functions) that this thought needs, with node IDs exactly as the
graph returned them and neighbour types and feature names as in the graph definition. Call Finish with the answer
once you know it.
</instructions>""")

AGENT_ACTION_TEXT = Template("agent action, step {step}, candidate {candidate}", _AGENT_TASK + """
<thought>Thought {step}: {thought}</thought>
<instructions>
Write Action {step}: the graph function call (or calls, separated by commas) that this thought needs, written as
Function[arguments] like the examples, with node IDs exactly as the graph returned them and neighbour types and
feature names as in the graph definition. Write Finish[answer] once you know the answer. Reply with the action
only.
</instructions>""")

# --------------------------------------------------------------------------------------------------------------
# Automatic graph exploration (§4.2.2, Figure 10, Algorithm 1)
# --------------------------------------------------------------------------------------------------------------
SEARCH_THOUGHT = Template("search thought, step {step}, candidate {candidate}", """<task>
Given the previous thoughts, generate the next thought to answer the question. Your end goal is to answer the
question step by step. For context you also get knowledge triples (head -> relation -> tail) and entity
attributes found in a knowledge graph so far. Follow the format of the examples.
</task>
<examples>
{examples}
</examples>
<graph_definition>
{graph_definition}
</graph_definition>
<question>{question}</question>
<knowledge_triples>
{triples}
</knowledge_triples>
<previous_thoughts>
{thoughts}
</previous_thoughts>
<entity_attributes>
{attributes}
</entity_attributes>
<instructions>
Write the next thought (one or two sentences). Name the entities it is about exactly as they would appear in the
knowledge graph.
</instructions>""")

ENTITY_EXTRACTION = Template("entity extraction", """<task>
Extract from the text the entities that may appear in a knowledge graph (names of people, works, places,
organisations, concepts, ...), exactly as they are written. Return an empty list when there is none.
</task>
<examples>
Text: I need to find the paper "Graph Reasoning at Scale" and follow its venue.
Relevant entities: ["Graph Reasoning at Scale"]

Text: Maria Ortiz and Ken Ito both wrote for KDD; I should compare their papers.
Relevant entities: ["Maria Ortiz", "Ken Ito", "KDD"]
</examples>
<text>
{text}
</text>""")

PRUNE_RELATIONS = Template("prune relations", """<task>
From the given entity and its relations in the knowledge graph, select only the relations that are relevant to
answer the question (at most {limit}). Return them exactly as listed; an empty list if none is relevant.
</task>
<examples>
Question: Who are the authors of "Graph Reasoning at Scale"?
Head entity: Graph Reasoning at Scale
Relations: author, venue, reference, cited_by
Relevant relations: ["author"]
</examples>
<question>{question}</question>
<head_entity>{entity}</head_entity>
<relations>
{relations}
</relations>""")

PRUNE_ENTITIES = Template("prune entities", """<task>
You get a question, a head entity, a relation, and the tail entities the relation leads to in the knowledge
graph. Select the tail entities that help to answer the question (at most {limit}), exactly as listed; an empty
list if none does.
</task>
<examples>
Question: Who are the authors of "Graph Reasoning at Scale"?
Head entity: Graph Reasoning at Scale
Relation: author
Tail entities: Maria Ortiz; Ken Ito
Relevant entities: ["Maria Ortiz", "Ken Ito"]
</examples>
<question>{question}</question>
<head_entity>{head_entity}</head_entity>
<relation>{relation}</relation>
<tail_entities>
{tail_entities}
</tail_entities>""")

SEARCH_ATTRIBUTES = Template("search attributes", """<task>
Is any of the entity's attributes relevant to answer the question? Return the names of the relevant attributes
exactly as listed; an empty list if none is.
</task>
<examples>
Question: In which year was "Graph Reasoning at Scale" published?
Entity: Graph Reasoning at Scale
Attributes: year: 2021; abstract: We study ...
Relevant attributes: ["year"]
</examples>
<question>{question}</question>
<entity>{entity}</entity>
<attributes>
{attributes}
</attributes>""")

SEARCH_END = Template("search end", """<task>
You get an original question, the thoughts so far and the knowledge-graph triples (head -> relation -> tail) and
entity attributes found for them. Is this sufficient to answer the original question? Answer yes or no.
</task>
<examples>
Question: Which venue published "Graph Reasoning at Scale"?
Thoughts: I need to find the paper and follow its venue.
Knowledge triples: Graph Reasoning at Scale -> venue -> KDD
Sufficient: yes (the venue is known)

Question: Who are the co-authors of Maria Ortiz?
Thoughts: I need Maria Ortiz's papers.
Knowledge triples: Maria Ortiz -> paper -> Graph Reasoning at Scale
Sufficient: no (the authors of her papers are not known yet)
</examples>
<question>{question}</question>
<thoughts>
{thoughts}
</thoughts>
<knowledge_triples>
{triples}
</knowledge_triples>
<entity_attributes>
{attributes}
</entity_attributes>""")

# --------------------------------------------------------------------------------------------------------------
# State evaluators (§4.1) and GoT's merge (eq. 3)
# --------------------------------------------------------------------------------------------------------------
SELECTION_VOTE = Template("selection vote, depth {depth}", """<task>
Given a question, select the chains of thought that are most likely to lead to the correct answer. Each choice is
a chain of thoughts with what the knowledge graph returned for them. Analyse each choice, then give the ids of the
{keep} most promising choices, best first.
</task>
<question>{question}</question>
<choices>
{choices}
</choices>""")

SELECTION_BEST = Template("selection vote, depth {depth}", """<task>
Which of the choices below is the chain of thought most likely to reach the correct answer to the question? Each
choice is a chain of thoughts with what the knowledge graph returned for them. Weigh every choice, then name the
one best on a last line of the form "The best choice is s" (s: the choice's number).
</task>
<question>{question}</question>
<choices>
{choices}
</choices>""")

SCORE_VOTE = Template("score vote, state {state}", """<task>
Generate a score for the given reasoning chain: the probability (a number between 0 and 1) that the chain will
lead to the correct answer of the question. The chain interleaves thoughts with what the knowledge graph returned.
Some chains are not complete: judge the steps they have.
</task>
<examples>
Question: Who are the authors of "Graph Reasoning at Scale"?
Thought chain: Thought 1: Find the paper. Observation: its ID is p_0131. Thought 2: Its author neighbours are
the authors. Observation: a_77, a_12.
Score: 0.8

Question: Who are the authors of "Graph Reasoning at Scale"?
Thought chain: Thought 1: Look up the venue KDD. Observation: its ID is v_3.
Score: 0.1
</examples>
<question>{question}</question>
<thought_chain>
{chain}
</thought_chain>""")

MERGE = Template("merge thoughts, depth {depth}", """<task>
Generate the next thought for the merged chain of thoughts. You get the question, two chains of thoughts (with what
the knowledge graph returned for them) and the merged chain. Identify inconsistencies or errors between the two
chains and write the next thought of the merged chain, one or two sentences, in the same style.
</task>
<question>{question}</question>
<chain_1>
{chain_1}
</chain_1>
<chain_2>
{chain_2}
</chain_2>
<merged_chain>
{merged_chain}
</merged_chain>""")

FINAL_ANSWER = Template("final answer", """<task>
Answer the question from the reasoning chain and what the knowledge graph returned for it. Give the answer itself
(names, titles or values, never node IDs), as short as possible; several answers separated by commas.
</task>
<question>{question}</question>
<reasoning_chain>
{chain}
</reasoning_chain>""")

# --------------------------------------------------------------------------------------------------------------
# Baselines (§5): Base (zero-shot), Text-RAG (node texts retrieved by embedding) and Graph-RAG (plus their 1-hop
# neighbours)
# --------------------------------------------------------------------------------------------------------------
ZERO_SHOT_ANSWER = Template("zero-shot answer", """<task>
Answer the question below from what you know. When you are not sure, give your best guess. Reply with the answer
only (names, titles or values), without explanation.
</task>
<question>{question}</question>""")

KG_RAG_ANSWER = Template("rag answer", """<task>
You are an AI assistant that answers questions. Use your own knowledge and the context retrieved from a knowledge
graph. If you do not know the answer, give the most probable one. Reply with the answer only (names, titles or
values), without explanation.
</task>
<question>{question}</question>
<context>
{context}
</context>""")
