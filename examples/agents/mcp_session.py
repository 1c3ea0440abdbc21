"""A scripted agent session with ``xlaprof mcp`` over stdio, on the bundled sample runs.

What a coding agent's MCP client does, step by step, with the MCP Python SDK's own client:
start ``xlaprof mcp --root sample_traces``, list its tools, and call them the way an agent
answering "why is my training slow?" would. docs/agents.md shows this script's output.

    python examples/agents/mcp_session.py            # needs: pip install 'xlaprof[mcp]'

Long answers are shortened for reading (a list past ``KEEP_ITEMS`` items, a string past
``KEEP_CHARS`` characters), and say so; the server sends them whole.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"
KEEP_ITEMS = 3
KEEP_CHARS = 240
WIDTH = 100

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_inputs", {"under": "runs", "limit": 2}),
    ("analyze", {"path": "runs/recompile_varying_batch", "max_findings": 1}),
    ("explain_finding", {"kind": "recompilation"}),
    ("steps", {"path": "runs/host_sync_item", "limit": 2}),
    ("compare_runs", {"before": "runs/unrolled_layers", "after": "runs/scanned_layers"}),
    ("check_budgets", {"paths": ["runs/host_sync_item"], "max_host_syncs_per_step": 0}),
    ("analyze", {"path": "/etc/passwd"}),
]


def shortened(value: Any) -> Any:
    """``value`` with long lists and strings cut, saying how much was left out."""
    if isinstance(value, dict):
        return {k: shortened(v) for k, v in value.items()}
    if isinstance(value, list):
        kept = [shortened(v) for v in value[:KEEP_ITEMS]]
        return kept + ([f"... {len(value) - KEEP_ITEMS} more"] if len(value) > KEEP_ITEMS else [])
    if isinstance(value, str) and len(value) > KEEP_CHARS:
        return value[:KEEP_CHARS] + f"... ({len(value)} characters)"
    return value


def pretty(value: Any, indent: str = "") -> str:
    """JSON, one line per item where the whole would not fit in ``WIDTH`` characters."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(indent) + len(flat) <= WIDTH or not isinstance(value, dict | list) or not value:
        return flat
    inner = indent + "  "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {pretty(v, inner).lstrip()}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    items = [inner + pretty(v, inner).lstrip() for v in value]
    return "[\n" + ",\n".join(items) + f"\n{indent}]"


async def session() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "xlaprof", "mcp", "--root", str(SAMPLES)],
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        cwd=str(REPO),
    )
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        print("tools:", ", ".join(tool.name for tool in tools))
        for name, arguments in CALLS:
            print(f"\n>>> {name}({json.dumps(arguments)})")
            result = await client.call_tool(name, arguments)
            shown = shortened(result.structured_content)
            print(("error: " if result.is_error else "") + pretty(shown))


if __name__ == "__main__":
    anyio.run(session)
