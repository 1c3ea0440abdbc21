"""The ``xlaprof`` command: one module per subcommand, registered in ``COMMANDS``.

Subcommand modules are imported only when that subcommand runs, so ``xlaprof --help`` stays
fast (no pandas, plotly or torch at start-up). Every ``XlaprofError`` becomes one line on
stderr and its own exit code; unexpected errors print one line too (``XLAPROF_DEBUG=1`` shows the
traceback and turns on debug logging, which says what was skipped and why).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any

import click

from xlaprof.errors import XlaprofError
from xlaprof.escape import terminal

# name -> (module, attribute, one-line help shown by `xlaprof --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "analyze": ("xlaprof.cli.analyze", "analyze", "Diagnose metrics reports, debug logs, runs."),
    "run": ("xlaprof.cli.run", "run", "Profile an unmodified script: xlaprof run -- python x.py"),
    "demo": ("xlaprof.cli.demo", "demo", "Profile a bundled example on the CPU and diagnose it."),
    "capture": ("xlaprof.cli.capture", "capture", "Capture a trace from a live job's server(s)."),
    "view": ("xlaprof.cli.view", "view", "Open a run's traces in the XProf/TensorBoard UI."),
    "report": ("xlaprof.cli.report", "report", "Write a self-contained HTML report."),
    "bench": ("xlaprof.cli.bench", "bench", "Try a fix (scan, remat, offload, cache), measured."),
    "diff": ("xlaprof.cli.diff", "diff", "Compare two runs: ratios, findings gone and new."),
    "check": ("xlaprof.cli.check", "check", "Gate a run on budgets, for CI (exit 1 if over)."),
    "mcp": ("xlaprof.cli.mcp", "mcp", "Serve the analysis to coding agents (MCP, stdio)."),
}

INTERNAL_ERROR_EXIT = 70
INTERRUPTED_EXIT = 130


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        command = getattr(module, entry[1])
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except XlaprofError as error:
            click.echo(f"xlaprof: error: {terminal(error)}", err=True)
            ctx.exit(error.exit_code)
        except KeyboardInterrupt:
            click.echo("xlaprof: interrupted", err=True)
            ctx.exit(INTERRUPTED_EXIT)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (`xlaprof analyze ... | head`): not an error of ours.
            sys.stderr.close()
            ctx.exit(0)
        except Exception as error:
            if os.environ.get("XLAPROF_DEBUG"):
                raise
            click.echo(
                f"xlaprof: internal error: {type(error).__name__}: {terminal(error)} "
                "(set XLAPROF_DEBUG=1 for the traceback, and please report it)",
                err=True,
            )
            ctx.exit(INTERNAL_ERROR_EXIT)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="xlaprof")
def main() -> None:
    """xlaprof: find out why a PyTorch/XLA training step is slow, and what to do about it."""
    if os.environ.get("XLAPROF_DEBUG"):
        logging.basicConfig(level=logging.DEBUG, format="xlaprof: %(name)s: %(message)s")
