"""CRAG's mock KG API in parts: its functions, the saved calls, an async client, the mock server.

:mod:`kgagents.tools.crag_api` gathers their public names and runs the command line. This package's face is
empty on purpose: the static-KG loader reads saved calls without loading the HTTP client or the server.
"""
