"""Regenerate sample_traces/ from the bundled examples on the CPU PJRT runtime.

For each example it writes:
  <name>.log        stdout+stderr of the job with PT_XLA_DEBUG_LEVEL=2 and a final
                    metrics_report(), as a user's job log would hold them;
  <name>.fallbacks  the fallback tracker's records (XLA_FNTRACKER_FILE);
  runs/<name>/      a run directory written by `xlaprof run` (once that exists).
And ci_check/{base,slow}/: examples/ci_check.py under `xlaprof run --max-steps 6`, as docs/ci.md
runs it, as it is and with each batch arriving 1 s later (CI_CHECK_LOADER_DELAY_S).

Usage: python sample_traces/regenerate.py [--runs] [NAME ...]   (needs the runtime extra)
  --runs: the run directories only (runs/, ci_check/, step_model/), leaving the job logs and
          fallback records as they are: what a change to xlaprof's capture side changes
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
NAMES = (
    "healthy_loop",
    "recompile_varying_batch",
    "host_sync_item",
    "cpu_fallback",
    "tracing_bound_tiny_ops",
    "data_dependent_shape",
    "unrolled_layers",
    "scanned_layers",
)
# Runs the example as __main__, then prints the report the way users add it at the end.
BOOTSTRAP = (
    "import runpy, sys; sys.argv = [sys.argv[1]] + sys.argv[2:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__'); "
    "import torch_xla.debug.metrics as met; print(met.metrics_report())"
)


def regenerate(name: str, runs_only: bool = False) -> None:
    if not runs_only:
        regenerate_log(name)
    regenerate_run(name)


def regenerate_log(name: str) -> None:
    """<name>.log and <name>.fallbacks: the job as a user's log holds it, no xlaprof."""
    script = EXAMPLES / f"{name}.py"
    fallbacks = HERE / f"{name}.fallbacks"
    fallbacks.unlink(missing_ok=True)
    env = dict(os.environ)
    env.update(
        PJRT_DEVICE="CPU",
        PT_XLA_DEBUG_LEVEL="2",
        XLA_FNTRACKER_FILE=str(fallbacks),
        PYTHONPATH=str(EXAMPLES),
    )
    with (HERE / f"{name}.log").open("w") as log:
        subprocess.run(
            [sys.executable, "-c", BOOTSTRAP, str(script)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            check=True,
            cwd=HERE.parent,
        )
    if fallbacks.exists() and fallbacks.stat().st_size == 0:
        fallbacks.unlink()


def regenerate_run(name: str) -> None:
    """runs/<name>/: the example under `xlaprof run --trace-steps 4:6`."""
    script = EXAMPLES / f"{name}.py"
    runs = HERE / "runs"
    runs.mkdir(exist_ok=True)
    target = runs / name
    xlaprof = [sys.executable, "-m", "xlaprof"]
    if subprocess.run([*xlaprof, "run", "--help"], capture_output=True).returncode == 0:
        import shutil

        shutil.rmtree(target, ignore_errors=True)
        subprocess.run(
            [
                *xlaprof,
                "run",
                "-q",
                "--out",
                str(target),
                "--trace-steps",
                "4:6",
                "--",
                *[sys.executable, str(script)],
            ],
            env={**os.environ, "PJRT_DEVICE": "CPU"},
            check=True,
            cwd=HERE.parent,
            stdout=subprocess.DEVNULL,
        )
    print(f"regenerated {name}")


# examples/ci_check.py's two recorded runs: the step-time budget is a ratio of durations, so its
# tests judge these runs, never runs this machine makes (and times) during the tests.
CI_CHECK = {"base": "0", "slow": "1.0"}


def regenerate_ci_check() -> None:
    import shutil

    for name, delay in CI_CHECK.items():
        target = HERE / "ci_check" / name
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "xlaprof", "run", "-q", "--max-steps", "6", "--out",
             str(target), "--", sys.executable, str(EXAMPLES / "ci_check.py")],
            env={**os.environ, "PJRT_DEVICE": "CPU", "CI_CHECK_LOADER_DELAY_S": delay},
            check=True,
            cwd=HERE.parent,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
    print("regenerated ci_check")


# step_model/: a device-bound loop that reads its loss every step, and the tracing-bound loop,
# each under `xlaprof run --trace-steps 3:10` (seven traced steps, five of them steady once a
# capture's first and last are left out): the step model and the tracing-bound verdict from a
# capture alone are judged on these, never on runs timed during the tests.
STEP_MODEL = ("device_bound_logging", "tracing_bound_tiny_ops")


def regenerate_step_model() -> None:
    import shutil

    for name in STEP_MODEL:
        target = HERE / "step_model" / name
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "xlaprof", "run", "-q", "--trace-steps", "3:10", "--out",
             str(target), "--", sys.executable, str(EXAMPLES / f"{name}.py")],
            env={**os.environ, "PJRT_DEVICE": "CPU"},
            check=True,
            cwd=HERE.parent,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
    print("regenerated step_model")


def main() -> None:
    names = [a for a in sys.argv[1:] if a != "--runs"]
    runs_only = "--runs" in sys.argv[1:]
    for name in names or [*NAMES, "ci_check", "step_model"]:
        if name == "ci_check":
            regenerate_ci_check()
        elif name == "step_model":
            regenerate_step_model()
        else:
            regenerate(name, runs_only)


if __name__ == "__main__":
    main()
