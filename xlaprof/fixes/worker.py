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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_RENAMED = "_xlaprof_layers_"


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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(sys.argv[1:] if argv is None else argv)
    # Graph source lines need these before torch_xla is imported.
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    os.environ["XLA_IR_DEBUG"] = "1"
    os.environ["XLA_HLO_DEBUG"] = "1"
    try:
        run_dir = _run(args)
    except Exception as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}".splitlines()[0][:500]}))
        return 3
    print(json.dumps({"run": run_dir}))
    return 0


def _run(args: argparse.Namespace) -> str:
    import torch
    import torch_xla

    from xlaprof.capture.session import Session, SessionOptions
    from xlaprof.fixes.target import build

    if args.variant == "cache":
        import torch_xla.runtime as xr

        xr.initialize_cache(args.cache_dir)
    # Before the model touches the device: the session's HLO dump flag is read then.
    options = SessionOptions(sample_hz=0, command=[args.target, args.variant])
    session = Session(args.out, options).start()
    torch.manual_seed(args.seed)
    setup = build(args.target)
    device = torch_xla.device()
    model = setup.model.to(device)
    batch = setup.batch.to(device)
    _apply_variant(args, model)
    try:
        for step in range(args.warmup + args.steps):
            model.zero_grad(set_to_none=True)
            output = model(batch)
            loss = setup.loss_fn(output)
            if args.backward:
                loss.backward()
            torch_xla.sync()
            if step == 0 and args.check:
                _save_check(args.check, model, output, loss)
    except BaseException as error:
        session.finish("exception", detail=f"{type(error).__name__}: {error}")
        raise
    session.finish("ok")
    return str(session.directory)


def _apply_variant(args: argparse.Namespace, model: torch.nn.Module) -> None:
    """Rewrite ``model`` as the variant asks (scan or remat over its layer stack: the one
    ``--layers`` or ``--stack`` names, else the first stack of identical layers found)."""
    from xlaprof.fixes.variants import apply_remat, apply_scan, homogeneous_stacks

    layers = args.layers
    if layers is None and args.stack:
        layers = _stack_path(model, args.stack)
    if args.variant in ("scan", "remat") and layers is None:
        stacks = homogeneous_stacks(model)
        if not stacks:
            raise ValueError("no nn.ModuleList of identical layers found; pass --layers ATTR")
        layers = stacks[0]
    if args.variant == "scan":
        apply_scan(model, layers, pure=bool(args.layer_pure))
    elif args.variant == "remat":
        apply_remat(model, layers)


def _stack_path(model: torch.nn.Module, stack: str) -> str | None:
    """``Stack.blocks`` -> the dotted path of that ModuleList inside ``model``."""
    import torch

    owner, _, attribute = stack.rpartition(".")
    for name, module in model.named_modules():
        child = getattr(module, attribute, None)
        if type(module).__name__ == owner and isinstance(child, torch.nn.ModuleList):
            return f"{name}.{attribute}" if name else attribute
    return None


def _save_check(
    path: str, model: torch.nn.Module, output: torch.Tensor, loss: torch.Tensor
) -> None:
    import torch

    grads = {
        name.replace(_RENAMED, ""): p.grad.detach().cpu()
        for name, p in model.named_parameters()
        if p.grad is not None
    }
    torch.save({"output": output.detach().cpu(), "loss": loss.detach().cpu(), "grads": grads}, path)


if __name__ == "__main__":
    sys.exit(main())
