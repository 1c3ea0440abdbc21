"""``xlaprof mcp``: the analysis as tools a coding agent calls, over the Model Context Protocol.

The server (``server.py``, on the official MCP Python SDK, the ``mcp`` extra) exposes the tools
of ``tools.py``: list what lies under the allowed folders, analyze one input, page through its
per-step and per-op tables, compare two runs, check budgets, explain a finding kind and, only
when the server was started with ``--allow-run``, run a script or a fix benchmark. Every number
comes from ``xlaprof.pipeline`` through the ``--json`` documents of ``xlaprof.report`` (the same
code that prints ``xlaprof analyze --json``); the tools only choose and page.

``roots.py`` is the sandbox: a path is read only when it resolves inside a folder given with
``--root``, and a folder is read only when no link in it leads out of those folders. It needs
nothing but the standard library, so it is tested without the SDK.
"""
