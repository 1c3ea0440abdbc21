"""``xlaprof run [options] -- python train.py args...``: profile an unmodified script."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

from xlaprof.errors import CommandNotFound


def _window(_ctx: click.Context, _param: click.Parameter, value: str | None):
    if value is None:
        return None
    from xlaprof.capture.hook import parse_steps_window

    try:
        parse_steps_window(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    return value


@click.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder for the run (one subfolder per process). Default: xlaprof-runs/<time>.",
)
@click.option(
    "--trace-steps",
    callback=_window,
    metavar="A:B",
    help="Capture an xplane trace of steps A..B-1 (stopped after their device work).",
)
@click.option("--max-steps", type=click.IntRange(min=1), help="Stop the script after N steps.")
@click.option(
    "--debug-level",
    type=click.IntRange(0, 2),
    default=2,
    show_default=True,
    help="PT_XLA_DEBUG_LEVEL to record (2: compilations and executions; 0: off).",
)
@click.option(
    "--server-port",
    type=click.IntRange(1, 65535),
    help="Start a profiler server in the job, for `xlaprof capture` from elsewhere.",
)
@click.option(
    "--graphs/--no-graphs",
    default=True,
    show_default=True,
    help="Keep each compiled graph's HLO with source lines (an HLO dump, and IR debug on only "
    "while compiles happen; its cost is measured by benchmarks/overhead.py, see "
    "docs/user-guide.md).",
)
@click.option("-q", "--quiet", is_flag=True, help="Do not print where the run was written.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    out: Path | None,
    trace_steps: str | None,
    max_steps: int | None,
    debug_level: int,
    server_port: int | None,
    graphs: bool,
    quiet: bool,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND (a Python training job) and profile every step it takes.

    Steps are the script's torch_xla.sync() / xm.mark_step() calls (or xlaprof.step marks).
    The script's arguments, stdin, stdout, stderr and exit code pass through unchanged.

    Example: xlaprof run --out runs/a --trace-steps 5:8 -- python train.py --lr 0.1
    """
    from xlaprof.capture import hook as runhook
    from xlaprof.rundir.reader import find_runs, read_info
    from xlaprof.rundir.schema import RunInfo
    from xlaprof.rundir.writer import write_info

    package = Path(__file__).resolve().parent.parent

    if out is None:
        out = Path("xlaprof-runs") / time.strftime("run-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    bootstrap = package / "capture" / "_bootstrap"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(bootstrap), env.get("PYTHONPATH", "")) if p)
    env[runhook.ENV_OUT] = str(out.resolve())
    env[runhook.ENV_DEBUG_LEVEL] = str(debug_level)
    env["XLAPROF_PACKAGE_PARENT"] = str(package.parent)
    if trace_steps:
        env[runhook.ENV_TRACE_STEPS] = trace_steps
    if max_steps:
        env[runhook.ENV_MAX_STEPS] = str(max_steps)
    if server_port:
        env[runhook.ENV_SERVER_PORT] = str(server_port)
    env.pop("XLAPROF_SERVER_CLAIMED", None)
    env[runhook.ENV_GRAPHS] = "1" if graphs else "0"
    if graphs:
        # torch_xla reads these when it is imported: they must be set before Python starts.
        env["XLA_IR_DEBUG"] = "1"
        env["XLA_HLO_DEBUG"] = "1"
    started = time.time()
    try:
        child = subprocess.Popen(list(command), env=env)
    except (FileNotFoundError, PermissionError) as error:
        raise CommandNotFound(f"{command[0]}: cannot be started ({error.strerror})") from None

    # Ctrl-C in a terminal reaches the script directly (same process group); a SIGTERM sent to
    # xlaprof (a scheduler stopping the job) is passed on so the script can end its run cleanly.
    previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    previous_term = signal.signal(signal.SIGTERM, lambda signum, _f: child.send_signal(signum))
    try:
        returncode = child.wait()
    finally:
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)

    runs = []
    for directory in find_runs(out):
        info: RunInfo = read_info(directory)
        if info.started is None or info.started < started - 1:
            continue  # an earlier run into the same folder
        runs.append(directory)
        if info.pid == child.pid:
            _record_exit(info, returncode)
            write_info(directory, info)
        elif info.status == "running":
            info.status = "killed"
            info.detail = "the process ended without finishing its run"
            write_info(directory, info)
    if not quiet:
        if runs:
            click.echo(
                f"xlaprof: {len(runs)} process run(s) written to {out}; "
                f"analyze with: xlaprof analyze {out}",
                err=True,
            )
        else:
            click.echo(
                f"xlaprof: no run recorded in {out}: the command never imported torch_xla "
                "(is it a Python script using PyTorch/XLA?)",
                err=True,
            )
    sys.exit(returncode if returncode >= 0 else 128 - returncode)


def _record_exit(info, returncode: int) -> None:  # type: ignore[no-untyped-def]
    """Fill in how the process ended, as only its parent can see it."""
    if returncode < 0:
        signame = signal.Signals(-returncode).name
        if info.status in ("running", "ok"):
            info.status = "killed" if info.status == "running" else "signal"
            info.detail = f"ended by {signame}"
        info.exit_code = 128 - returncode
        return
    info.exit_code = returncode
    if info.status == "running":
        info.status = "killed"
        info.detail = "the process ended without finishing its run"
    elif info.status == "ok" and returncode != 0:
        info.status = "exit"
        info.detail = f"exit code {returncode}"
