"""The nodes of Agent-G (paper 004, Algorithm 1): agent → retriever bank → generator → validator, and on
a rejection the commentor's corrective feedback for the next action; at most T iterations.

Two task modes (the paper's two benchmark designs):

- ``generation`` (CRAG): the output is an answer ("I don't know" allowed); the agent also decides the
  question's domain, type and dynamism; the text module reads the question's web pages in batches; the graph
  module returns reasoning paths; the validator judges the answer against the retrieved references.
- ``retrieval`` (STaRK): the output is a ranked list of node ids; the text module ranks the nodes' documents;
  the graph module ranks the documents of the entities its ego-graphs reach; the validator judges the top
  document with its reasoning paths.

Every iteration's action, references, answer, verdict and feedback are in the state (``iterations``).

A model call that fails for good (after its API retries and parse re-asks) never ends the run: a failed agent
call falls back to the text module, a failed generator answers "I don't know", a failed validator call
rejects, a failed commentor gives the feedback the retrieval notes suggest. Each is logged in ``failures``.

The package holds one part each: :mod:`.context` (the context), :mod:`.state`, :mod:`.replies` (the agent's
and the commentor's structured replies), :mod:`.pages` (the start: input, graph, web pages), :mod:`.agent`,
:mod:`.retrieval` (the retriever bank's node), :mod:`.crag_paths` with :mod:`.crag_values` (the graph module
over CRAG's API), :mod:`.answer` (the generator, the final output) and :mod:`.critic` (validator, commentor).
"""

from kgagents.nodes.agent_g.agent import agent, describe_action, last_text_batch
from kgagents.nodes.agent_g.answer import final_answer_of, finish, generator, output_curve, references_text
from kgagents.nodes.agent_g.context import CRAG_DOMAINS, IDK, ROLE, AgentGContext, Task, agent_g_context_of
from kgagents.nodes.agent_g.critic import commentor, default_error, route_verdict, validator
from kgagents.nodes.agent_g.pages import html_text, initialise, page_text, page_texts
from kgagents.nodes.agent_g.replies import AgentDecision, CommentorReply, EntityChoice, parse_entities
from kgagents.nodes.agent_g.retrieval import candidate_types, retriever_bank, vss_query
from kgagents.nodes.agent_g.state import Action, AgentGInput, AgentGState, Iteration, Page, merge_iterations

__all__ = ["CRAG_DOMAINS", "IDK", "ROLE", "Action", "AgentDecision", "AgentGContext", "AgentGInput",
           "AgentGState", "CommentorReply", "EntityChoice", "Iteration", "Page", "Task", "agent",
           "agent_g_context_of", "candidate_types", "commentor", "default_error", "describe_action",
           "final_answer_of", "finish", "generator", "html_text", "initialise", "last_text_batch",
           "merge_iterations", "output_curve", "page_text", "page_texts", "parse_entities", "references_text",
           "retriever_bank", "route_verdict", "validator", "vss_query"]
