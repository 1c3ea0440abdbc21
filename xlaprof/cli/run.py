"""``xlaprof run [options] -- python train.py args...``: profile an unmodified script."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import click

from xlaprof.capture.metrics import METRICS_SAMPLES
from xlaprof.capture.sampler import DEFAULT_SAMPLE_HZ
from xlaprof.cli import INTERRUPTED_EXIT
from xlaprof.errors import CommandNotFound, RunDirError
from xlaprof.rundir.schema import LAUNCH_ENV

# Set in the job's environment; each run directory records it (run.json "env").
ENV_LAUNCH = LAUNCH_ENV


def _window(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
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
@click.option(
    "--sample-hz",
    type=click.FloatRange(min=0, max=1000),
    default=DEFAULT_SAMPLE_HZ,
    show_default=True,
    help="How often the host sampler records the training thread's source line (0: off). Each "
    "sample briefly takes the GIL from that thread (~0.1 ms measured on a 2-core VM).",
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
    sample_hz: float,
    quiet: bool,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND (a Python training job) and profile every step it takes.

    Steps are the script's torch_xla.sync() / xm.mark_step() calls (or xlaprof.step marks).
    The script's arguments, stdin, stdout, stderr and exit code pass through unchanged.

    Example: xlaprof run --out runs/a --trace-steps 5:8 -- python train.py --lr 0.1
    """
    if out is None:
        out = Path("xlaprof-runs") / time.strftime("run-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    earlier = _earlier_runs(out)
    # Runs of this launch carry its id (run.json records XLAPROF_* variables), so runs another
    # `xlaprof run` writes into the same --out at the same time are never touched here.
    launch = uuid.uuid4().hex
    env = job_environment(
        out, launch, trace_steps, max_steps, debug_level, server_port, graphs, sample_hz
    )
    with SignalForwarder() as forwarder:
        try:
            child = subprocess.Popen(list(command), env=env)
        except (FileNotFoundError, PermissionError) as error:
            raise CommandNotFound(f"{command[0]}: cannot be started ({error.strerror})") from None
        returncode = forwarder.wait(child)
    runs, statuses, nested = _finish_runs(out, launch, child.pid, returncode)
    code = exit_code(returncode, statuses, forwarder.interrupted)
    if not quiet:
        _say_where(out, runs, nested, returncode, code, forwarder.interrupted)
        if runs and earlier:
            click.echo(
                f"xlaprof: {out} also holds {len(earlier)} process folder(s) of earlier runs "
                f"({', '.join(p.name for p in earlier[:4])}{', ...' if len(earlier) > 4 else ''}"
                "): this run is a new one, which commands read (the latest); --process NAME "
                "reads an earlier one",
                err=True,
            )
    sys.exit(code)


def _earlier_runs(out: Path) -> list[Path]:
    """The process folders already in ``out`` before this launch (a re-run into one --out)."""
    from xlaprof.rundir.reader import find_runs

    return find_runs(out)


def job_environment(
    out: Path,
    launch: str,
    trace_steps: str | None,
    max_steps: int | None,
    debug_level: int,
    server_port: int | None,
    graphs: bool,
    sample_hz: float,
) -> dict[str, str]:
    """The job's environment: xlaprof's bootstrap on its path, and the session's settings."""
    from xlaprof.capture import hook as runhook
    from xlaprof.rundir.schema import TORCH_TRACE_DIR

    package = Path(__file__).resolve().parent.parent
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
    # torch.compile's structured trace (tlparse's input, read by xlaprof analyze), one log per
    # process, unless the job writes its own
    env.setdefault("TORCH_TRACE", str(out.resolve() / TORCH_TRACE_DIR))
    env[runhook.ENV_GRAPHS] = "1" if graphs else "0"
    env[runhook.ENV_SAMPLE_HZ] = f"{sample_hz:g}"
    # Read when torch_xla is imported, so it cannot wait for the session (capture/metrics.py).
    env.setdefault("XLA_METRICS_SAMPLES", METRICS_SAMPLES)
    _debug_frames(env, debug_level)
    if graphs:
        # torch_xla reads these when it is imported: they must be set before Python starts.
        env["XLA_IR_DEBUG"] = "1"
        env["XLA_HLO_DEBUG"] = "1"
    env[ENV_LAUNCH] = launch
    return env


def _finish_runs(
    out: Path, launch: str, pid: int, returncode: int
) -> tuple[list[Path], list[str], int]:
    """Close this launch's run directories: the job's exit recorded in its own, a process that
    ended without finishing marked killed. Their paths, their statuses, and how many are
    nested ``profile()`` runs."""
    from xlaprof.rundir.reader import Run, find_runs, read_info
    from xlaprof.rundir.writer import write_info

    runs: list[Path] = []
    statuses: list[str] = []
    nested = 0  # xlaprof.profile() runs inside this launch's sessions (same process)
    for directory in find_runs(out):
        try:
            info = read_info(directory)
        except RunDirError:
            continue  # not ours to judge (another launch's, or damaged)
        if info.env.get(ENV_LAUNCH) != launch:
            continue  # an earlier run, or another launch's into the same folder
        runs.append(directory)
        nested += info.outer_run is not None
        if info.pid == pid:
            _record_exit(info, returncode)
        elif info.status == "running":
            info.status = "killed"
            info.detail = "the process ended without finishing its run"
        else:
            statuses.append(info.status)
            continue
        # Counts as steps.jsonl has them: a killed process never wrote its final run.json.
        info.steps_recorded = Run(directory, info).steps_recorded
        statuses.append(info.status)
        write_info(directory, info)
    return runs, statuses, nested


def _say_where(
    out: Path, runs: list[Path], nested: int, returncode: int, code: int, interrupted: bool
) -> None:
    """One line on stderr: where the runs went, or why there are none."""
    if runs:
        inner = f" and {nested} nested profile() run(s)" if nested else ""
        message = (
            f"xlaprof: {len(runs) - nested} process run(s){inner} written to {out}; "
            f"analyze with: xlaprof analyze {out}"
        )
    elif interrupted or code == INTERRUPTED_EXIT:
        message = (
            f"xlaprof: interrupted before the command started a run; nothing recorded in {out}"
        )
    elif returncode < 0:
        message = (
            f"xlaprof: the command was ended by {_signal_name(-returncode)} before it started "
            f"a run; nothing recorded in {out}"
        )
    else:
        message = (
            f"xlaprof: no run recorded in {out}: the command never imported torch_xla "
            "(is it a Python script using PyTorch/XLA?)"
        )
        logs = out / "torch_trace"
        if logs.is_dir() and any(logs.iterdir()):
            message += f"; its torch.compile trace (TORCH_TRACE) is kept: xlaprof analyze {logs}"
    click.echo(message, err=True)


def exit_code(returncode: int, statuses: list[str], interrupted: bool) -> int:
    """``xlaprof run``'s exit code: the job's, and 128+N when a signal ended it.

    Python turns an uncaught KeyboardInterrupt into exit code 1 here (the run records it as
    "interrupted"): that is Ctrl-C, so 130, as a shell reports for a job ended by SIGINT.
    """
    if returncode < 0:
        return 128 - returncode
    if returncode == 1 and ("interrupted" in statuses or (interrupted and not statuses)):
        return INTERRUPTED_EXIT
    return returncode


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class SignalForwarder:
    """Pass SIGINT and SIGTERM sent to ``xlaprof run`` on to the job, once.

    Ctrl-C in a terminal goes to the whole foreground process group, the job included: that
    SIGINT comes from the kernel (``si_code`` SI_KERNEL) and is not sent again, or the job
    would see two. A signal sent by a process (``kill``, a scheduler) to xlaprof alone has
    ``si_code`` <= 0 and is forwarded. The signals are blocked and fetched with
    ``sigtimedwait``, which is what gives the ``si_code``.

    Before the job exists (``Popen`` has not returned) a signal is caught by ``_early`` and
    kept, and sent to the job as soon as it is started: a Ctrl-C while the job starts is never
    lost (it was, when such a signal found no child to send to). A terminal's Ctrl-C in the
    moment between the job's fork and ``Popen`` returning reaches the job directly too, and so
    twice; one lost was worse.
    """

    def __init__(self) -> None:
        self.interrupted = False
        self.child: subprocess.Popen[bytes] | None = None
        self._previous: dict[int, Any] = {}
        self._pending: list[int] = []  # signals caught before the job was started
        # A signal xlaprof was started ignoring (a background job's SIGINT) stays ignored, and
        # the job inherits that, as it did without xlaprof.
        self._signals = frozenset(
            number
            for number in (signal.SIGINT, signal.SIGTERM)
            if signal.getsignal(number) is not signal.SIG_IGN
        )

    def __enter__(self) -> SignalForwarder:
        # Until the mask is set (just after the child starts), a signal is forwarded by these.
        for number in self._signals:
            self._previous[number] = signal.signal(number, self._early)
        return self

    def _early(self, number: int, _frame: Any) -> None:
        self._handle(number, from_kernel=False)

    def _handle(self, number: int, from_kernel: bool) -> None:
        if number == signal.SIGINT:
            self.interrupted = True
        if self.child is None:
            self._pending.append(number)  # sent once the job is started
        elif not (from_kernel and number == signal.SIGINT):
            with contextlib.suppress(ProcessLookupError):
                self.child.send_signal(number)

    def wait(self, child: subprocess.Popen[bytes]) -> int:
        signal.pthread_sigmask(signal.SIG_BLOCK, self._signals)
        self.child = child
        try:
            for number in dict.fromkeys(self._pending):  # caught while the job was starting
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(number)
            self._pending.clear()
            while True:
                info = signal.sigtimedwait(self._signals, 0.1) if self._signals else None
                if not self._signals:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        child.wait(0.1)
                if info is not None:
                    self._handle(info.si_signo, from_kernel=info.si_code > 0)
                returncode = child.poll()
                if returncode is not None:
                    return returncode
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, self._signals)

    def __exit__(self, *_exc: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)


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


def _debug_frames(env: dict[str, str], debug_level: int) -> None:
    """Ask torch_xla for deep enough stacks to name the user's line under a library's sync or
    read (``capture.session.DEBUG_MAX_FRAMES``); a user's own setting is kept."""
    if debug_level > 0:
        from xlaprof.capture.session import DEBUG_MAX_FRAMES

        env.setdefault("PT_XLA_DEBUG_MAX_FRAME", str(DEBUG_MAX_FRAMES))
