"""The MCP server: ``tools.Tools`` on the official Python SDK's ``MCPServer``, over stdio.

Each tool method is registered through ``_registered``, which keeps its signature (the input
schema, with each argument's description) and declares its model as the output schema. A call
runs in a worker thread, one at a time, so a long analysis never stalls the protocol (pings,
cancellation). Its answer is the model, as structured content and as the same JSON in a text
block (what a client without structured content shows the model).

An ``XlaprofError`` becomes a tool error (``isError``) whose text is the CLI's one line with
its exit code and class, and whose structured content is ``{"error": {"message", "exit_code",
"class"}}``: the agent reads why and can act (another path, another process). Anything else is
a bug: ``InternalError``, exit code 70, as the CLI says it.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel

from xlaprof.errors import XlaprofError
from xlaprof.mcp.roots import Roots
from xlaprof.mcp.tools import Settings, Tools

logger = logging.getLogger(__name__)

INTERNAL_ERROR_EXIT = 70  # as the CLI's (xlaprof.cli.INTERNAL_ERROR_EXIT)
INSTRUCTIONS = """\
xlaprof diagnoses slow PyTorch/XLA training from its outputs: run directories written by
`xlaprof run`, profiler captures (.xplane.pb, *trace.json.gz), metrics reports and PT_XLA_DEBUG
logs. Start with list_inputs, then analyze a path: its findings say what is wrong, at which
line of the user's code, with the evidence and the fix. steps pages through per-step tables
(where each step's time went), device_ops through device time per op; compare_runs compares a
run before and after a change, check_budgets gates a run on limits, explain_finding says what
a finding kind reads and how to fix it. Seconds throughout; null means not measured.
Only paths under the server's allowed folders can be read."""
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
RUNS_CODE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)


def build_server(roots: Roots, settings: Settings | None = None) -> MCPServer:
    """The server with every tool ``Tools(roots, settings)`` offers."""
    from importlib.metadata import version

    tools = Tools(roots, settings)
    server = MCPServer(
        "xlaprof",
        title="xlaprof: PyTorch/XLA performance diagnosis",
        instructions=INSTRUCTIONS,
        version=version("xlaprof"),
        log_level="WARNING",
    )
    for method in tools.tools():
        runs_code = method.__name__ in ("run_script", "bench_fix")
        server.add_tool(
            _registered(method, tools, runs_code),
            name=method.__name__,
            description=inspect.cleandoc(method.__doc__ or ""),
            annotations=RUNS_CODE if runs_code else READ_ONLY,
        )
    return server


def serve(roots: Roots, settings: Settings | None = None) -> None:
    """Serve over stdin/stdout until the client closes them."""
    build_server(roots, settings).run("stdio")


def _registered(method: Callable[..., BaseModel], tools: Tools, runs_code: bool) -> Any:
    """``method`` as an async tool: run in a worker thread (under the tools' lock unless it
    runs code, which takes the lock itself only to analyze), its model or error as a result."""
    signature = inspect.signature(method, eval_str=True)
    model = signature.return_annotation

    async def tool(**arguments: Any) -> CallToolResult:
        def call() -> BaseModel:
            if runs_code:
                return method(**arguments)
            with tools.held():
                return method(**arguments)

        try:
            value = await anyio.to_thread.run_sync(call)
        except XlaprofError as error:
            return error_result(str(error), error.exit_code, type(error).__name__)
        except Exception as error:  # a bug: said as the CLI says it, logged with its traceback
            logger.exception("tool %s failed", method.__name__)
            return error_result(
                f"internal error: {type(error).__name__}: {error} (please report it)",
                INTERNAL_ERROR_EXIT,
                "InternalError",
            )
        data = value.model_dump(mode="json", by_alias=True)
        return CallToolResult(content=[_text(data)], structured_content=data)

    functools.update_wrapper(tool, method)
    # A function's __wrapped__ and __signature__ are not in its type (a def is a callable).
    # The SDK reads the signature set here, not the method's.
    del tool.__wrapped__  # type: ignore[attr-defined]
    tool.__signature__ = signature.replace(  # type: ignore[attr-defined]
        return_annotation=Annotated[CallToolResult, model]
    )
    return tool


def error_result(message: str, exit_code: int, name: str) -> CallToolResult:
    """A tool error: the CLI's line (``xlaprof: error: ...``) with the exit code and class it
    would give, as text and as ``{"error": {...}}``."""
    error = {"message": message, "exit_code": exit_code, "class": name}
    text = f"xlaprof: error: {message} (exit code {exit_code}, {name})"
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content={"error": error},
        is_error=True,
    )


def _text(data: dict[str, Any]) -> TextContent:
    return TextContent(type="text", text=json.dumps(data, separators=(",", ":")))
