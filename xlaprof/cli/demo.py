"""``xlaprof demo``: profile a bundled example on the CPU runtime and print the diagnosis."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import click

from xlaprof.errors import InputNotFound

EXAMPLES = ("recompile_varying_batch", "host_sync_item", "cpu_fallback", "healthy_loop")


def _examples_dir() -> Path:
    directory = Path(__file__).resolve().parents[2] / "examples"
    if not (directory / f"{EXAMPLES[0]}.py").exists():
        raise InputNotFound(
            f"{directory}: the bundled examples are not here (the demo runs from a source "
            "checkout of xlaprof)"
        )
    return directory


@click.command()
@click.option(
    "--example",
    type=click.Choice(EXAMPLES),
    default=EXAMPLES[0],
    show_default=True,
    help="Which bundled example to profile.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="Run folder (default: runs/demo-<time>).",
)
def demo(example: str, out: Path | None) -> None:
    """Profile a bundled example training script on the CPU PJRT device, then diagnose it."""
    script = _examples_dir() / f"{example}.py"
    out = out or Path("runs") / time.strftime(f"demo-{example}-%Y%m%d-%H%M%S")
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU")}
    click.echo(f"$ xlaprof run --out {out} --trace-steps 4:6 -- python {script.name}", err=True)
    command = [sys.executable, "-m", "xlaprof", "run", "-q", "--out", str(out)]
    command += ["--trace-steps", "4:6", "--", sys.executable, str(script)]
    subprocess.run(command, env=env, check=False)
    click.echo(f"$ xlaprof analyze {out}", err=True)
    from xlaprof.cli.analyze import analyze

    analyze.main([str(out)], standalone_mode=False)
