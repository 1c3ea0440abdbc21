"""``xlaprof bench scan|remat|offload|cache TARGET``: try a fix on your model, measured."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from xlaprof.errors import OffloadNotMeasured

_TARGET_HELP = "TARGET is path/to/module.py:factory or package.module:factory"


def _options(function):  # type: ignore[no-untyped-def]
    for option in reversed(
        [
            click.argument("target"),
            click.option("--steps", default=5, show_default=True, type=click.IntRange(1)),
            click.option("--warmup", default=2, show_default=True, type=click.IntRange(1)),
            click.option("--backward/--no-backward", default=True, show_default=True),
            click.option(
                "--repeats",
                default=1,
                show_default=True,
                type=click.IntRange(1, 20),
                help="scan/remat: run each side this many times (fresh processes); medians.",
            ),
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


def _show(result, as_json: bool) -> None:  # type: ignore[no-untyped-def]
    import json

    from rich.console import Console

    from xlaprof.report.console import comparison_table

    if as_json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2, default=str) + "\n")
        return
    console = Console(highlight=False)
    labels = {"cache": ("first run", "second run")}.get(result.kind, ("before", result.kind))
    comparison_table(
        console, result.comparison, f"xlaprof bench {result.kind} {result.target}", labels
    )
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

    result = bench_fix(
        kind,
        target,
        _out(out, kind),
        layers=layers,
        steps=steps,
        warmup=warmup,
        backward=backward,
        layer_pure=layer_pure,
        repeats=repeats,
    )
    _show(result, as_json)
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
def scan(target, steps, warmup, backward, repeats, out, as_json, layers, layer_pure) -> None:  # type: ignore[no-untyped-def]
    """Run TARGET as written and with its layer stack through scan_layers.

    Reports compile time, compilations, graph size, step time, tracing time and a numerical
    check of outputs and gradients; exits non-zero when they disagree."""
    _fix("scan", target, steps, warmup, backward, out, as_json, layers, layer_pure, repeats)


scan.help = (scan.help or "") + "\n\n" + _TARGET_HELP


@bench.command()
@_options
@click.option(
    "--layers", metavar="ATTR", help="The nn.ModuleList to rematerialize (default: found)."
)
def remat(target, steps, warmup, backward, repeats, out, as_json, layers) -> None:  # type: ignore[no-untyped-def]
    """Run TARGET as written and with each layer rematerialized (torch_xla checkpoint)."""
    _fix("remat", target, steps, warmup, backward, out, as_json, layers, False, repeats)


@bench.command()
@_options
def offload(target, steps, warmup, backward, repeats, out, as_json) -> None:  # type: ignore[no-untyped-def]
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
@_options
def cache(target, steps, warmup, backward, repeats, out, as_json) -> None:  # type: ignore[no-untyped-def]
    """Run TARGET twice with a persistent compilation cache; compare the second to the first."""
    from xlaprof.fixes.bench import bench_cache

    result = bench_cache(target, _out(out, "cache"), steps=steps, warmup=warmup, backward=backward)
    _show(result, as_json)
