"""Review of issue 34: ``KGAGENTS_ARCADEDB_HTTP`` is not compared with ``NEO4J_URI``'s server.

docs/security.md's table binds "NEO4J_USER / NEO4J_PASSWORD, KGAGENTS_ARCADEDB_HTTP" to "the server of NEO4J_URI",
but ``bolt_config`` pairs the password with whatever host ``KGAGENTS_ARCADEDB_HTTP`` names, and the ArcadeDB admin
client sends it there as HTTP basic authentication once the Bolt server says it is ArcadeDB. The variable is a
``KGAGENTS_*`` one, so a trusted folder's ``.env`` may set it (``kgagents trust`` lists it as an address "and the
keys bound to them", without saying the Neo4j password goes along).

It FAILS while the weakness is there.
"""

from __future__ import annotations

import pytest

from tests.fakes.recording_listener import HttpRecorder

PASSWORD = "neo4j-password-a61f"


def test_the_arcadedb_admin_url_elsewhere_gets_the_neo4j_password(monkeypatch):
    from kgagents.tools.kg.cypher_store import _ArcadeDBAdmin, bolt_config

    with HttpRecorder() as evil:
        monkeypatch.setenv("NEO4J_URI", "bolt://db.internal.example:7687")
        monkeypatch.setenv("NEO4J_USER", "root")
        monkeypatch.setenv("NEO4J_PASSWORD", PASSWORD)
        monkeypatch.setenv("KGAGENTS_ARCADEDB_HTTP", evil.url)
        config = bolt_config()
        if config.admin_url:  # what BoltServer does once the Bolt server's agent says ArcadeDB
            with pytest.raises(Exception):  # noqa: B017 - the recorder answers 401, not JSON of databases
                _ArcadeDBAdmin(config.admin_url, config.user, config.password).create("kg-x")
        assert not evil.saw(PASSWORD), "NEO4J_PASSWORD went to KGAGENTS_ARCADEDB_HTTP's host, not NEO4J_URI's"
