"""``xlaprof mcp --root DIR``: serve the analysis to coding agents over MCP (stdio)."""

from __future__ import annotations

import os
from pathlib import Path

import click


@click.command()
@click.option(
    "--root",
    "roots",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="A folder the server may read (repeatable): run directories, captures, logs, and the "
    "source files findings quote. Nothing outside these folders is read.",
)
@click.option(
    "--allow-run",
    is_flag=True,
    help="Offer run_script (`xlaprof run` on a script under the roots) and bench_fix "
    "(`xlaprof bench`): the agent can then run code. Off by default.",
)
@click.option(
    "--max-run-steps",
    default=50,
    show_default=True,
    type=click.IntRange(min=1),
    help="With --allow-run: the most steps a script or benchmark may run.",
)
@click.option(
    "--run-timeout",
    default=600.0,
    show_default=True,
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    help="With --allow-run: the longest a script or benchmark may run.",
)
def mcp(roots: tuple[Path, ...], allow_run: bool, max_run_steps: int, run_timeout: float) -> None:
    """Serve xlaprof's analysis over the Model Context Protocol, on stdin/stdout.

    A coding agent (Claude Code, VS Code, Cursor, ...) starts this command and calls its tools:
    list what is under the roots, analyze a run or capture, page through per-step and per-op
    tables, compare two runs, check budgets, explain a finding. Needs the MCP SDK:
    pip install 'xlaprof[mcp]'. See docs/agents.md.

    \b
    Example (a client's configuration runs this):
      xlaprof mcp --root ~/project/runs --root ~/project/src
    """
    from xlaprof.errors import ExtraMissing

    try:
        from xlaprof.mcp.server import serve
    except ImportError as error:
        if error.name not in ("mcp", "pydantic", "anyio") and not (error.name or "").startswith(
            ("mcp.", "pydantic.", "anyio.")
        ):
            raise
        raise ExtraMissing(
            f"xlaprof mcp needs the MCP SDK ({error.name} is not installed): "
            "pip install 'xlaprof[mcp]'"
        ) from None
    from xlaprof.mcp.roots import Roots
    from xlaprof.mcp.tools import Settings
    from xlaprof.model.request import PodSettings

    settings = Settings(
        allow_run=allow_run,
        max_run_steps=max_run_steps,
        run_timeout_s=run_timeout,
        pod=PodSettings.of(os.environ),  # read once, where the server starts
    )
    serve(Roots(roots), settings)
