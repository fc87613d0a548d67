"""Web tools of the surfer agent: HTTP fetching with limits, SerpApi search, a text browser, Wikipedia and the
Wayback Machine. The surfer agent itself (``ask_search_agent``) is a graph: see ``graphs/surfer.py``."""
