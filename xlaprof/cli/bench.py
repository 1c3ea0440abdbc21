"""``xlaprof bench scan|remat|offload|cache TARGET``: try a fix on your model, measured."""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import click

from xlaprof.errors import OffloadNotMeasured

if TYPE_CHECKING:
    from xlaprof.fixes.bench import BenchResult

_Command = TypeVar("_Command", bound=Callable[..., Any])


@overload
def _options(function: _Command, *, repeats: bool = True) -> _Command: ...


@overload
def _options(function: None = None, *, repeats: bool = True) -> Callable[[_Command], _Command]: ...


def _options(
    function: _Command | None = None, *, repeats: bool = True
) -> _Command | Callable[[_Command], _Command]:
    """The options every bench subcommand takes (``--repeats`` only where it is used)."""
    if function is None:
        return lambda f: _options(f, repeats=repeats)
    options = [
        click.argument("target"),
        click.option(
            "--steps",
            default=5,
            show_default=True,
            type=click.IntRange(1),
            help="Measured steps per run, after the warm-up steps.",
        ),
        click.option(
            "--warmup",
            default=2,
            show_default=True,
            type=click.IntRange(1),
            help="Steps run first and not measured (they compile).",
        ),
        click.option(
            "--backward/--no-backward",
            default=True,
            show_default=True,
            help="Run the backward pass too (loss.backward() each step).",
        ),
    ]
    if repeats:
        options.append(
            click.option(
                "--repeats",
                default=1,
                show_default=True,
                type=click.IntRange(1, 20),
                help="Run each side this many times (fresh processes) and compare medians.",
            )
        )
    for option in reversed(
        [
            *options,
            click.option(
                "--out",
                type=click.Path(path_type=Path, file_okay=False),
                help="Where the run directories go (default runs/bench-<kind>-<time>).",
            ),
            click.option("--json", "as_json", is_flag=True, help="Print one JSON document."),
        ]
    ):
        function = option(function)
    return function


def _out(out: Path | None, kind: str) -> Path:
    return out or Path("runs") / time.strftime(f"bench-{kind}-%Y%m%d-%H%M%S")


def _check_target(target: str) -> None:
    """Refuse a TARGET that cannot name a factory before any process starts (exit 17); a
    saved result (``xlaprof analyze --json``) is refused in one line saying why."""
    from xlaprof.errors import TargetError
    from xlaprof.pipeline import is_saved_result

    if Path(target).is_file() and is_saved_result(Path(target)):
        raise TargetError(
            f"{target}: a saved result cannot be a side of a benchmark: bench runs both sides "
            "fresh on one model and compares their outputs and gradients, which a saved result "
            "does not hold; compare saved results with xlaprof diff BEFORE.json AFTER.json"
        )
    module_part, sep, name = target.rpartition(":")
    if not sep or not module_part or not name.isidentifier():
        raise TargetError(f"{target}: expected module.py:factory or package.module:factory")
    if module_part.endswith(".py") and not Path(module_part).is_file():
        raise TargetError(f"{module_part}: no such file")


@contextlib.contextmanager
def _cleaned_on_failure(out: Path) -> Iterator[Path]:
    """Remove the bench folder if this try created it and failed before any result.

    A failed try must not leave ``runs/bench-*/before/`` behind each time; a folder the user
    named that existed before is never touched.
    """
    from xlaprof.errors import FixFailed, TargetError

    created = None  # the outermost folder of ``out`` that this try creates
    for folder in (out, *out.parents):
        if folder.exists():
            break
        created = folder
    try:
        yield out
    except (TargetError, FixFailed):
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise


def _show(result: BenchResult, as_json: bool, options: str = "") -> None:
    import json

    from xlaprof import escape
    from xlaprof.report.console import comparison_table

    if as_json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2, default=str) + "\n")
        return
    console = escape.safe_console()
    labels = {"cache": ("first run", "second run")}.get(result.kind, ("before", result.kind))
    title = f"xlaprof bench {result.kind} {result.target}{options}"
    comparison_table(console, result.comparison, title, labels)
    if result.numerics is not None:
        state = "agree" if result.numerics["ok"] else "DISAGREE"
        console.print(
            f"outputs and gradients {state} (max abs diff {result.numerics['max_abs_diff']:.3g}, "
            f"rtol {result.numerics['rtol']}, atol {result.numerics['atol']}, "
            f"{result.numerics['gradients_compared']} gradients)"
        )
    for note in result.notes:
        console.print(note)
    console.print(f"runs: {result.before.run_dir}  {result.after.run_dir}")


def _progress(kind: str) -> Callable[[str], None]:
    """Progress on stderr (which side runs, steps done): a bench takes minutes, never silent."""

    def say(line: str) -> None:
        click.echo(f"xlaprof bench {kind}: {line}", err=True)

    return say


@click.group()
def bench() -> None:
    """Try a fix on your own model in fresh processes and compare before/after."""


def _fix(
    kind: str,
    target: str,
    steps: int,
    warmup: int,
    backward: bool,
    out: Path | None,
    as_json: bool,
    layers: str | None,
    layer_pure: bool = False,
    repeats: int = 1,
) -> None:
    from xlaprof.errors import NumericsMismatch
    from xlaprof.fixes.bench import bench_fix

    _check_target(target)
    with _cleaned_on_failure(_out(out, kind)) as folder:
        result = bench_fix(
            kind,
            target,
            folder,
            layers=layers,
            steps=steps,
            warmup=warmup,
            backward=backward,
            layer_pure=layer_pure,
            repeats=repeats,
            progress=_progress(kind),
        )
    # The header echoes the options that change what was measured.
    echoed = "".join(
        flag
        for flag, on in (
            (f" --layers {layers}", layers),
            (" --layer-pure", layer_pure),
            (" --no-backward", not backward),
            (f" --repeats {repeats}", repeats > 1),
        )
        if on
    )
    _show(result, as_json, echoed)
    if result.numerics is not None and not result.numerics["ok"]:
        why = {
            "scan": "the layers are not interchangeable (not homogeneous), so scan_layers does "
            "not apply to them",
            "remat": "rematerialization should not change results: check for randomness "
            "(dropout) or state inside the layers",
        }[kind]
        problems = "; ".join(result.numerics["problems"][:2])
        raise NumericsMismatch(f"{target}: {kind} changes the results ({problems}): {why}")


@bench.command()
@_options
@click.option("--layers", metavar="ATTR", help="The nn.ModuleList to scan (default: found).")
@click.option(
    "--layer-pure",
    is_flag=True,
    help="Pass is_layer_pure=True (trace the layer once; only for pure layers).",
)
def scan(
    target: str,
    steps: int,
    warmup: int,
    backward: bool,
    repeats: int,
    out: Path | None,
    as_json: bool,
    layers: str | None,
    layer_pure: bool,
) -> None:
    """Run TARGET as written and with its layer stack through scan_layers.

    Reports compile time, compilations, graph size, step time, tracing time and a numerical
    check of outputs and gradients; exits non-zero when they disagree.

    TARGET is path/to/module.py:factory or package.module:factory.
    """
    _fix("scan", target, steps, warmup, backward, out, as_json, layers, layer_pure, repeats)


@bench.command()
@_options
@click.option(
    "--layers", metavar="ATTR", help="The nn.ModuleList to rematerialize (default: found)."
)
def remat(
    target: str,
    steps: int,
    warmup: int,
    backward: bool,
    repeats: int,
    out: Path | None,
    as_json: bool,
    layers: str | None,
) -> None:
    """Run TARGET as written and with each layer rematerialized (torch_xla checkpoint)."""
    _fix("remat", target, steps, warmup, backward, out, as_json, layers, False, repeats)


@bench.command()
@_options(repeats=False)
def offload(
    target: str, steps: int, warmup: int, backward: bool, out: Path | None, as_json: bool
) -> None:
    """Host offload of activations: first probe whether the backend has host memory."""
    import json

    from xlaprof.fixes.bench import probe_offload

    supported, detail = probe_offload()
    if as_json:
        sys.stdout.write(
            json.dumps(
                {
                    "schema": "xlaprof.bench/1",
                    "kind": "offload",
                    "target": target,
                    "supported": supported,
                    "detail": detail,
                }
            )
            + "\n"
        )
    if not supported:
        click.echo(
            f"xlaprof: offload is not supported on this backend ({detail}); "
            f"try `xlaprof bench remat {target}` instead",
            err=True,
        )
        return

    raise OffloadNotMeasured(
        "this backend supports host offload, but xlaprof cannot apply it automatically yet: "
        "use scan(..., partition_fn=...) with place_to_host/place_to_device and compare with "
        "`xlaprof diff`"
    )


@bench.command()
@_options(repeats=False)
def cache(
    target: str, steps: int, warmup: int, backward: bool, out: Path | None, as_json: bool
) -> None:
    """Run TARGET twice with a persistent compilation cache; compare the second to the first."""
    from xlaprof.fixes.bench import bench_cache

    _check_target(target)
    with _cleaned_on_failure(_out(out, "cache")) as folder:
        result = bench_cache(
            target,
            folder,
            steps=steps,
            warmup=warmup,
            backward=backward,
            progress=_progress("cache"),
        )
    _show(result, as_json)
