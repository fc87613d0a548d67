"""Prompt templates of Agent-G (paper 004, §2–§3, appendix A.1), filled with
:func:`kgagents.prompts.template.render`.

Two task modes follow the paper's two benchmark designs: **generation** (CRAG: the output is an answer; the
agent also decides the question's domain, type and dynamism; the text module is web pages read in batches) and
**retrieval** (STaRK: the output is a ranked list of documents; each entity of the knowledge base has one).
Every template is a :class:`~kgagents.prompts.template.Template`: XML-like sections for the model, and the
stage that names its calls (which role, which iteration), which travels as the call's metadata and never
reaches the model.
"""

from __future__ import annotations

from kgagents.prompts.template import Template, placeholders, render

__all__ = ["AGENT", "AGENT_EXAMPLES_GENERATION", "AGENT_EXAMPLES_RETRIEVAL", "COMMENTOR",
           "COMMENTOR_EXAMPLES_GENERATION", "COMMENTOR_EXAMPLES_RETRIEVAL", "CORRECTIVE_EVALUATOR",
           "ERROR_TYPES_GENERATION", "ERROR_TYPES_RETRIEVAL", "EVALUATOR", "GENERATOR", "GENERATOR_EXAMPLE",
           "GENERATOR_IDK", "REACT_EXAMPLES", "REACT_STEP", "VALIDATOR_GENERATION",
           "VALIDATOR_GENERATION_BARE", "VALIDATOR_RETRIEVAL", "VALIDATOR_RETRIEVAL_BARE",
           "placeholders", "render"]

# --------------------------------------------------------------------------------------------------------------
# The agent: a_t = {domain, (question type, dynamism), topic entities, useful relations, selection}
# --------------------------------------------------------------------------------------------------------------
AGENT = Template("agent, iteration {iteration}", """<task>
You are a helpful, pattern-following assistant that decides how to retrieve references for a question. Extract
from the question the information requested, then choose the reference source.
{decisions}
Rules:
1. Topic entities are names that occur in the question; each has exactly one type from the entity types.
2. Useful relations come only from the relation types.
3. Choose the knowledge graph when the question asks about entities and their relations, the text documents
   when it asks about descriptions or facts that a document states (or when no entity can be extracted).
</task>
<examples>
{examples}
</examples>
<entity_types>{entity_types}</entity_types>
<relation_types>
{relation_types}
</relation_types>
<question>{question}</question>
<query_time>{query_time}</query_time>
<previous_actions>
{previous}
</previous_actions>
<feedback>{feedback}</feedback>""")

DECISIONS_GENERATION = """Decide: the question's domain (one of: {domains}); its type (simple, simple_w_condition, set,
comparison, aggregation, multi_hop, post_processing, false_premise); its dynamism (real-time, fast-changing,
slow-changing, static); the topic entities with their types and the useful relations; the reference source
(knowledge graph or text documents). After a rejected answer from text documents you may instead ask for the
next batch of documents (next_batch)."""

DECISIONS_RETRIEVAL = """Documents are required to answer the question; each entity of the knowledge graph is associated
with a document. Decide: the topic entities with their types and the useful relations; then whether the
knowledge graph or the text documents narrow the search space down."""

AGENT_EXAMPLES_GENERATION = """Question: who are the members of the band maroon 5?
Action: domain music; type set; dynamism slow-changing; entities: maroon 5 (band); relations: music_get_members;
source: knowledge graph

Question: what did the reviewers say about the new phone's battery life?
Action: domain encyclopedia; type simple; dynamism slow-changing; entities: (none); relations: (none);
source: text documents

Question: what was meta's closing price yesterday?
Action: domain finance; type simple_w_condition; dynamism real-time; entities: meta (ticker_symbol);
relations: finance_get_price_history; source: knowledge graph"""

AGENT_EXAMPLES_RETRIEVAL = """Question: Which papers by Maria Ortiz study graph neural networks for drug design?
Action: entities: Maria Ortiz (author), graph neural networks (field_of_study); relations: author___writes___paper,
paper___has_topic___field_of_study; source: knowledge graph

Question: Find a waterproof hiking jacket that packs into its own pocket.
Action: entities: (none); relations: (none); source: text documents"""

# --------------------------------------------------------------------------------------------------------------
# The generator (CRAG, appendix A.1.2)
# --------------------------------------------------------------------------------------------------------------
GENERATOR_EXAMPLE = """Question: how many grammy awards has adele won?
Reference: Adele → music_grammy_get_award_count_by_artist → 16
Problems to solve: 1. Which artist is asked about? Adele. 2. How many Grammy awards does the reference give? 16.
Final answer: 16"""

GENERATOR = Template("generator, iteration {iteration}", """<task>
You are a helpful, pattern-following assistant. You are given a question, references and the time when it was
asked in the Pacific Time Zone (PT), the query time (mm/dd/yyyy, hh:mm:ss PT). The references may help answer the
question. If the question contains a false premise or assumption, answer "invalid question".{idk_instruction}
First list systematically and in detail the problems that need to be solved before you can arrive at the correct
answer. Then solve each problem using the answers of the previous ones and reach a final solution. End with one
line `Final answer: <answer>`, the answer as short as possible.
</task>
<example>
{example}
</example>
<reference_source>{source}</reference_source>
<references>
{references}
</references>
<question>{question}</question>
<query_time>{query_time}</query_time>
<query_type>{question_type}</query_type>
<query_dynamism>{dynamism}</query_dynamism>
<query_domain>{domain}</query_domain>""")

#: ReAct's in-context examples (appendix A.2.3: "is given a few examples"), written for this project.
REACT_EXAMPLES = """Question: how many grammy awards has adele won?
Thought 1: The count of an artist's awards is a knowledge-graph fact; first the entity and relation.
Action 1: extract (domain music; entities: adele (artist); relations: music_grammy_get_award_count_by_artist)
Observation 1: extracted: domain: music; entities: adele (artist); relations: music_grammy_get_award_count_by_artist
Thought 2: Now the knowledge graph can answer.
Action 2: search_kg
Observation 2: [1] Adele → music_grammy_get_award_count_by_artist → 16
Thought 3: The reference gives the count.
Action 3: finish (16)

Question: what did critics say about the finale of the series?
Thought 1: Opinions are in web pages, not in a knowledge graph.
Action 1: search_web
Observation 1: [1] Review: the finale was praised for ... [2] ...
Thought 2: The pages answer it.
Action 2: finish (critics praised it)"""

#: What the generator reads only with ``generator_idk`` (the paper's generator prompt has no such instruction).
GENERATOR_IDK = ' If you do not know the answer, answer "I don\'t know".'

# --------------------------------------------------------------------------------------------------------------
# The critic: validator and commentor (§2.3, Table 3)
# --------------------------------------------------------------------------------------------------------------
VALIDATOR_GENERATION = Template("validator, iteration {iteration}", """<references>
{context}
</references>
<prediction>{answer}</prediction>
<question>{question}</question>
<query_time>{query_time}</query_time>
<task>The prediction was generated from the references. Does the prediction answer the question? Answer with one
word, yes or no.</task>""")

#: The validator without its validation context (Tables 6 and 7's "w/o Context"): the question and the prediction.
VALIDATOR_GENERATION_BARE = Template("validator, iteration {iteration}", """<prediction>{answer}</prediction>
<question>{question}</question>
<query_time>{query_time}</query_time>
<task>Does the prediction answer the question? Answer with one word, yes or no.</task>""")

VALIDATOR_RETRIEVAL = Template("validator, iteration {iteration}", """<task>
You are a helpful, pattern-following assistant. Is the document aligned with the requirements of the question?
The reasoning paths show how the document's entity is connected to the question's topic entities in the knowledge
graph. Reply with only yes or no.
</task>
<question>{question}</question>
<document>
{context}
</document>""")

#: The retrieval validator without its validation context (the reasoning paths): the document alone.
VALIDATOR_RETRIEVAL_BARE = Template("validator, iteration {iteration}", """<task>
You are a helpful, pattern-following assistant. Is the document aligned with the requirements of the question?
Reply with only yes or no.
</task>
<question>{question}</question>
<document>
{context}
</document>""")

#: Table 3, CRAG: error type → the corrective feedback the agent receives.
ERROR_TYPES_GENERATION = {
    "incorrect question type": "The predicted question type is wrong. Please answer again: which type is this "
                               "question?",
    "incorrect question dynamism": "The predicted dynamism of the question is wrong. Please answer again: which "
                                   "dynamism is this question?",
    "incorrect question domain": "The predicted domain of the question is wrong. Please answer again: which domain "
                                 "is this question from?",
    "incorrect entity and relation": "The topic entities and useful information extracted from the question are "
                                     "incorrect. Please extract them again.",
    "incorrect retrieval module": "The answer is incorrect. The reference does not contain useful information for "
                                  "solving the question. Please answer again: should the knowledge graph be the "
                                  "reference source, with newly extracted entities and relations, or the next batch "
                                  "of text documents?",
}

#: Table 3, STaRK: error type → the corrective feedback the agent receives.
ERROR_TYPES_RETRIEVAL = {
    "incorrect entity/relation": "The entity or relation is incorrect. Please remove or substitute this entity and "
                                 "relation.",
    "missing entity": "There is only one entity but there may be more. Please extract one more entity and "
                      "relation.",
    "no intersection": "There is no intersection between the entities. Please remove or substitute one entity and "
                       "relation.",
    "incorrect intersection": "There is an intersection between the entities, but the answer is not within it. "
                              "Please remove or substitute one entity and relation.",
    "incorrect document": "The retrieved document is incorrect. The current retrieval module may not be helpful to "
                          "narrow down the search space.",
}

COMMENTOR_EXAMPLES_GENERATION = """Action: source knowledge graph; domain movie; entities: maroon 5 (movie);
relations: movie_get_movie_info
Retrieval: the knowledge graph returned nothing for the entities
Feedback: incorrect question domain (the question is about a band: music)

Action: source text documents, batch 1; domain finance
Retrieval: 5 web pages about the company's history, none with a price
Feedback: incorrect retrieval module (a price is a knowledge-graph fact)

Action: source knowledge graph; domain music; entities: adele (song); relations: music_get_song_author
Retrieval: no reasoning path
Feedback: incorrect entity and relation (adele is an artist; the relation is
music_grammy_get_award_count_by_artist)"""

COMMENTOR_EXAMPLES_RETRIEVAL = """Action: entities: optical TALU implementations (field_of_study),
Netaji Subhash Engineering College (institution);
relations: paper___has_topic___field_of_study, author___affiliated_with___institution
Retrieval: the ego-graphs of the two entities do not intersect
Feedback: no intersection (the field is a textual aspect of the question, not an entity)

Action: entities: Maria Ortiz (author); relations: author___writes___paper
Retrieval: 240 papers reached; the question also names a venue
Feedback: missing entity"""

COMMENTOR = Template("commentor, iteration {iteration}", """<task>
You are a helpful, pattern-following assistant. The answer produced with the action below was rejected. Point out
what was wrong in the action: choose exactly one error type from the list.
</task>
<error_types>
{error_types}
</error_types>
<examples>
{examples}
</examples>
<question>{question}</question>
<query_time>{query_time}</query_time>
<action>
{action}
</action>
<retrieval>
{retrieval}
</retrieval>""")

# --------------------------------------------------------------------------------------------------------------
# Baselines (§4): Corrective RAG's retrieval evaluator and ReAct's step
# --------------------------------------------------------------------------------------------------------------
CORRECTIVE_EVALUATOR = Template("retrieval evaluator", """<task>
Is the reference relevant and sufficient to answer the question? Answer with one word: correct, ambiguous or
incorrect.
</task>
<question>{question}</question>
<references>
{references}
</references>""")

REACT_STEP = Template("react, step {step}", """<task>
Answer the question by interleaving Thought, Action and Observation steps. Actions: search_web (the question's
web pages, the next batch each time), search_kg (the knowledge graph, with the topic entities and relations you
extracted), extract (extract the domain, topic entities with types and useful relations), finish (give the
answer). Reply with your thought and one action.
</task>
<examples>
{examples}
</examples>
<entity_types>{entity_types}</entity_types>
<relation_types>
{relation_types}
</relation_types>
<question>{question}</question>
<query_time>{query_time}</query_time>
<scratchpad>
{scratchpad}
</scratchpad>""")

# --------------------------------------------------------------------------------------------------------------
# The paper's evaluator (§4, appendix A.1.2): a three-way judgement of an answer against the true answer
# --------------------------------------------------------------------------------------------------------------
EVALUATOR = Template("agent-g evaluator", """### Question: {question}
### True Answer: {answer}
### Predicted Answer: {prediction}
### Task: Based on the question and the true answer, is the predicted answer accurate, incorrect, or missing? The
answer must be one of them and is in one word.""")
