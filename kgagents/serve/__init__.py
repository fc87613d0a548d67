"""Serving kgagents with LangGraph's server (``langgraph dev``): who may call it, and what a caller may ask for.

:mod:`kgagents.serve.callers` reads the callers' tokens and the allowed origins; :mod:`kgagents.serve.auth` is the
auth handler ``langgraph.json`` names. What a served run accepts from its caller is decided beside the workflows'
context fields and checked again inside the graph (:mod:`kgagents.nodes.served`). docs/security.md, "A served
kgagents", says what the operator of a shared server configures.
"""
