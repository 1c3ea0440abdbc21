"""One measured variant in a fresh process: ``python -m xlaprof.fixes.worker ...``.

Builds the user's model from TARGET, applies the variant (nothing, scan, remat, a compile
cache), runs warm-up plus measured steps under a profiling session (so the result is an
ordinary run directory), and saves step 0's output, loss and gradients for the numerical check.
Prints one JSON line: ``{"run": DIR}`` or ``{"error": "..."}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from xlaprof.fixes.variants import ScannedLayers

_RENAMED = "_xlaprof_layers_"
NO_STACK = "no nn.ModuleList or nn.Sequential of identical layers found; pass --layers ATTR"


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--variant", choices=("before", "scan", "remat", "cache"), required=True)
    parser.add_argument("--layers")
    parser.add_argument("--stack", help="OWNER_CLASS.ATTR, as the unrolled-loop analysis names it")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--backward", type=int, default=1)
    parser.add_argument("--out", required=True)
    parser.add_argument("--check")
    parser.add_argument("--cache-dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layer-pure", type=int, default=0)
    parser.add_argument(
        "--probe-scan",
        type=int,
        default=0,
        help="on the before side: refuse at the first forward a stack scan could not take",
    )
    return parser.parse_args(argv)


def _progress(what: str) -> None:
    """One progress line on stderr for the parent (fixes/bench.py passes it on)."""
    sys.stderr.write(f"xlaprof-progress {what}\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    args = _arguments(sys.argv[1:] if argv is None else argv)
    # Graph source lines need these before torch_xla is imported.
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    os.environ["XLA_IR_DEBUG"] = "1"
    os.environ["XLA_HLO_DEBUG"] = "1"
    try:
        run_dir, notes = _run(args)
    except Exception as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}".splitlines()[0][:500]}))
        return 3
    print(json.dumps({"run": run_dir, "notes": notes}))
    return 0


def _run(args: argparse.Namespace) -> tuple[str, list[str]]:
    import torch
    import torch_xla

    from xlaprof.capture.session import Session
    from xlaprof.fixes.target import build

    if args.variant == "cache":
        import torch_xla.runtime as xr

        xr.initialize_cache(args.cache_dir)
    # Before the model touches the device: the session's HLO dump flag is read then.
    session = Session(args.out, sample_hz=0, command=[args.target, args.variant]).start()
    torch.manual_seed(args.seed)
    setup = build(args.target)
    device = torch_xla.device()
    model = setup.model.to(device)
    batch = setup.batch.to(device)
    layers, scanned = _apply_variant(args, model)
    total = args.warmup + args.steps
    _progress(f"model built; {total} steps to run ({args.warmup} warm-up)")
    try:
        for step in range(total):
            model.zero_grad(set_to_none=True)
            output = model(batch)
            loss = setup.loss_fn(output)
            if args.backward:
                loss.backward()
            torch_xla.sync()
            if step == 0 and args.check:
                _save_check(args.check, model, output, loss)
            _progress(f"step {step + 1} of {total} done")
    except BaseException as error:
        session.finish("exception", detail=f"{type(error).__name__}: {error}")
        raise
    session.finish("ok")
    notes = [f"scanned: {layers}"] if scanned is not None else []
    if scanned is not None and scanned.dropped:
        notes.append(
            f"each layer of {layers} returns a tuple of {scanned.dropped + 1}: the scan passes "
            f"its first element on and drops the other {scanned.dropped} per-layer output(s) "
            "(the stand-in returns None in their place)"
        )
    return str(session.directory), notes


def _apply_variant(
    args: argparse.Namespace, model: torch.nn.Module
) -> tuple[str | None, ScannedLayers | None]:
    """The layer stack the variant works on (``--layers``, the stack ``--stack`` names, else
    the first homogeneous one for scan and remat), and the variant applied to ``model``: the
    scan's stand-in for the stack, if it scanned. The before side with ``--probe-scan``
    refuses at once a model with no stack scan could take, or a stack it could not carry."""
    from xlaprof.errors import FixFailed
    from xlaprof.fixes.variants import (
        apply_remat,
        apply_scan,
        check_scannable,
        homogeneous_stacks,
    )

    layers: str | None = args.layers
    if layers is None and args.stack:
        layers = _stack_path(model, args.stack)
    if args.variant in ("scan", "remat"):
        if layers is None:
            stacks = homogeneous_stacks(model)
            if not stacks:
                raise FixFailed(NO_STACK)
            layers = stacks[0]
        if args.variant == "scan":
            return layers, apply_scan(model, layers, pure=bool(args.layer_pure))
        apply_remat(model, layers)
        return layers, None
    if args.variant == "before" and args.probe_scan:
        # Without --layers the scan side can only take a homogeneous stack (the one the
        # before run's unrolled-loop analysis names is one of them): none, and the scan
        # cannot apply, said before any step runs
        probed = layers or next(iter(homogeneous_stacks(model)), None)
        if probed is None:
            raise FixFailed(NO_STACK)
        check_scannable(model, probed)
    return layers, None


def _stack_path(model: torch.nn.Module, stack: str) -> str | None:
    """``Stack.blocks`` -> the dotted path of that ModuleList/Sequential inside ``model``."""
    import torch

    owner, _, attribute = stack.rpartition(".")
    for name, module in model.named_modules():
        child = getattr(module, attribute, None)
        stack_types = (torch.nn.ModuleList, torch.nn.Sequential)
        if type(module).__name__ == owner and isinstance(child, stack_types):
            return f"{name}.{attribute}" if name else attribute
    return None


def _save_check(path: str, model: torch.nn.Module, output: object, loss: torch.Tensor) -> None:
    import torch

    grads = {
        name.replace(_RENAMED, ""): p.grad.detach().cpu()
        for name, p in model.named_parameters()
        if p.grad is not None
    }
    first = _first_tensor(output)
    saved = torch.zeros(0) if first is None else first.detach().cpu()
    torch.save({"output": saved, "loss": loss.detach().cpu(), "grads": grads}, path)


def _first_tensor(output: object) -> torch.Tensor | None:
    """The model's output tensor: itself, or the first tensor of a tuple or a mapping (the
    ``logits`` of a transformers ``ModelOutput``)."""
    import torch

    if isinstance(output, torch.Tensor):
        return output
    values = output.values() if hasattr(output, "values") else output
    if isinstance(values, str) or not isinstance(values, Iterable):
        return None
    for value in values:
        found = _first_tensor(value)
        if found is not None:
            return found
    return None


if __name__ == "__main__":
    sys.exit(main())
