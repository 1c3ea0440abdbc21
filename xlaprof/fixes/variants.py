"""The fixes, applied to a live model without touching the user's source files."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from xlaprof.errors import TargetError


def homogeneous_stacks(model: Any) -> list[str]:
    """Attribute paths of ModuleLists whose (two or more) children share one class."""
    import torch

    found = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) >= 2:
            classes = {type(child) for child in module}
            if len(classes) == 1:
                found.append(name)
    return found


def _resolve(model: Any, path: str) -> tuple[Any, str]:
    owner = model
    *parents, last = path.split(".")
    for part in parents:
        owner = getattr(owner, part)
    if not hasattr(owner, last):
        raise TargetError(f"the model has no attribute {path!r}")
    return owner, last


class ScannedLayers:
    """Stands in for a ModuleList inside the user's own loop.

    ``for blk in self.blocks: x = blk(x)`` iterates once over a callable that runs
    ``scan_layers`` over all the original layers, so the user's forward runs unchanged.
    """

    def __init__(self, layers: Any, pure: bool = False) -> None:
        self.layers = layers
        self.pure = pure

    def __iter__(self) -> Iterator[Callable[[Any], Any]]:
        from torch_xla.experimental.scan_layers import scan_layers

        yield lambda x: scan_layers(self.layers, x, is_layer_pure=self.pure)

    def __len__(self) -> int:
        return 1

    def parameters(self, recurse: bool = True) -> Any:
        return self.layers.parameters(recurse)


def apply_scan(model: Any, layers: str, pure: bool = False) -> None:
    """Route ``model.<layers>`` (an nn.ModuleList) through ``scan_layers``.

    ``pure`` passes ``is_layer_pure=True``: the layer is traced once and cached, which is only
    right when each layer is a pure function of its inputs and parameters.
    """
    import torch

    owner, name = _resolve(model, layers)
    stack = getattr(owner, name)
    if not isinstance(stack, torch.nn.ModuleList):
        raise TargetError(f"{layers} is a {type(stack).__name__}, not an nn.ModuleList")
    # Keep the ModuleList registered (parameters, .to(), state_dict); only iteration changes.
    scanned = ScannedLayers(stack, pure)
    object.__setattr__(owner, "_xlaprof_scanned_" + name, scanned)
    owner._modules.pop(name)
    owner.add_module("_xlaprof_layers_" + name, stack)
    object.__setattr__(owner, name, scanned)


def _is_float_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.is_floating_point()


def apply_remat(model: Any, layers: str) -> None:
    """Recompute each layer's activations in the backward pass (torch_xla checkpoint)."""
    from torch_xla.utils.checkpoint import checkpoint

    owner, name = _resolve(model, layers)
    for layer in getattr(owner, name):
        original = layer.forward

        def forward(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            # torch_xla supports only the reentrant variant (use_reentrant=False raises), and a
            # reentrant checkpoint whose inputs need no grad gives the layer's parameters no
            # gradient: feed it an alias that requires grad (the batch itself is left alone).
            args = tuple(
                a.detach().requires_grad_() if _is_float_tensor(a) and not a.requires_grad else a
                for a in args
            )
            return checkpoint(_original, *args, **kwargs)

        layer.forward = forward
