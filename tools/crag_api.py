"""CRAG's mock knowledge-graph API: its functions, an async client, and a local server of saved answers.

CRAG (Meta's Comprehensive RAG benchmark) serves the knowledge graphs of its five domains through a web
service, the "mock KG API": one ``POST`` endpoint per function, ``{server}/{domain}/{function}`` (sports also
names the sport: ``/sports/nba/get_games_on_date``), a JSON body (``{"query": ...}`` for one-argument
functions) and the answer as ``{"result": ...}``. The names CRAG's Python wrapper gives the functions
(``music_get_members``, ``finance_get_price_history``, ...) are the *relations* Agent-G chooses from in CRAG
mode (:func:`relation_types`).

The package :mod:`kgagents.tools.crag` holds each part in its own module; this module gathers their public
names and runs the command line (``python -m kgagents.tools.crag_api``):

- :data:`FUNCTIONS` (:mod:`~kgagents.tools.crag.functions`): every function of the wrapper, with its
  arguments, endpoint and payload keys;
- :class:`CragAPI` (:mod:`~kgagents.tools.crag.client`): ``await api.call("music_get_members", "Maroon 5")``
  → the ``result`` value, or a :class:`CragAPIError` that says what went wrong (server down, HTTP error,
  malformed body, unknown function, wrong arguments), with bounded timeouts;
- :class:`CragMockServer` (:mod:`~kgagents.tools.crag.server`, the saved calls in
  :mod:`~kgagents.tools.crag.calls`) / ``python -m kgagents.tools.crag_api serve``: CRAG's endpoints served
  from saved calls (``{"calls": [{"call": "api.fn(args)", "output_repr_truncated": "<repr>"}]}``, by default
  the 40 calls that ship with kgagents in ``evals/data/crag/``). A saved call answers its saved ``result`` (a
  cut output recovered as far as it parses); names match case-insensitively; a call that was not saved
  answers what CRAG's API answers for an entity it does not know (:attr:`Function.empty`: ``null`` for a
  lookup, ``[]`` for a search or a list, ``0`` for a count, ``[null, null]`` for a pair). The ``x-crag-mock``
  header says which (``saved``, ``saved-truncated``, ``not-saved``).

The real service (CRAG's ``mock_api/server.py`` with its data) listens on ``http://127.0.0.1:8000`` by
default; its address is given as ``CRAG_SERVER`` (the wrapper's variable) or, for Agent-G, the
``crag_api_url`` setting.
"""

from kgagents.tools.crag.calls import (
    CALLS_FILE,
    SavedCall,
    default_calls_file,
    jsonable,
    load_calls,
    parse_repr,
)
from kgagents.tools.crag.client import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_TIMEOUT_S, ENV_VAR, CragAPI, api_url
from kgagents.tools.crag.functions import (
    BILLBOARD_ATTRIBUTES,
    DOMAINS,
    FUNCTIONS,
    CragAPIError,
    Function,
    Param,
    call_key,
    domain_functions,
    fold,
    function,
    relation_types,
)
from kgagents.tools.crag.server import CragMockServer, main, mock_app

__all__ = ["BILLBOARD_ATTRIBUTES", "CALLS_FILE", "DEFAULT_CONNECT_TIMEOUT_S", "DEFAULT_TIMEOUT_S", "DOMAINS",
           "ENV_VAR", "FUNCTIONS", "CragAPI", "CragAPIError", "CragMockServer", "Function", "Param",
           "SavedCall", "api_url", "call_key", "default_calls_file", "domain_functions", "fold", "function",
           "jsonable", "load_calls", "main", "mock_app", "parse_repr", "relation_types"]

if __name__ == "__main__":
    raise SystemExit(main())
