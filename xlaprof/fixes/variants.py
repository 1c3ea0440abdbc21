"""The fixes, applied to a live model without touching the user's source files.

``apply_scan`` puts a stand-in (``ScannedLayers``) where the model holds its layer stack. The
model's own code then runs unchanged: a ``for layer in self.layers`` loop iterates once over a
callable, and a ``Sequential`` called as ``self.blocks(x)`` is that callable. The callable runs
``scan_layers`` over the original layers, each wrapped to take the call the model made: the
first positional argument is the state passed from layer to layer; every other floating tensor
(a mask, position embeddings, positional or keyword) travels unchanged in scan's carry; other
tensors (integer position ids) become a per-layer buffer of the wrapper, since scan
differentiates its carry; plain values (``None``, ``False``, numbers) are fixed. The wrappers
are kept while the calls keep their shape, so ``is_layer_pure`` traces the layer once. A layer
returning a tuple passes its
first element on; the other elements (per-layer extras such as attention probabilities) are
dropped, and the stand-in returns ``None`` in their place. A call that cannot be carried (a
Python object such as a key-value cache handed to every layer) is refused with one line saying
so, before anything compiles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xlaprof.errors import FixFailed, TargetError

# Values that are the same for every layer and can be fixed in the wrapper, not carried.
_PLAIN = (type(None), bool, int, float, str)


def homogeneous_stacks(model: Any) -> list[str]:
    """Attribute paths of ModuleLists/Sequentials whose (two or more) children share one class."""
    import torch

    found = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList | torch.nn.Sequential) and len(module) >= 2:
            classes = {type(child) for child in module}
            if len(classes) == 1 and name:
                found.append(name)
    return found


def _resolve(model: Any, path: str) -> tuple[Any, str]:
    owner = model
    *parents, last = path.split(".")
    for part in parents:
        owner = getattr(owner, part, None)
        if owner is None:
            raise TargetError(f"the model has no attribute {path!r}")
    if not hasattr(owner, last):
        raise TargetError(f"the model has no attribute {path!r}")
    return owner, last


def _kind(value: Any) -> str:
    """A value's kind in words: ``tensor``, ``None``, ``bool``, ``2 tensors``, a class name."""
    import torch

    if isinstance(value, torch.Tensor):
        return "tensor"
    if value is None:
        return "None"
    if isinstance(value, tuple | list) and all(isinstance(v, torch.Tensor) for v in value):
        return f"{len(value)} tensors"
    return type(value).__name__


class _Slot:
    """Where one argument of the layer's call comes from.

    ``carry``: scan's carry, at ``index`` (floating tensors: they may need gradients, and the
    carry is what scan differentiates). ``buffer``: a per-layer buffer of the wrapper, at
    ``index`` (other tensors, e.g. integer position ids: scan_layers stacks buffers and hands
    each layer its copy, where the carry could not hold them). ``fixed``: ``value`` itself (a
    plain value, the same for every layer). ``tuple``: ``items``, each a slot.
    """

    __slots__ = ("how", "index", "items", "value")

    def __init__(
        self, how: str, index: int = 0, value: Any = None, items: tuple[_Slot, ...] = ()
    ) -> None:
        self.how, self.index, self.value, self.items = how, index, value, items

    def key(self) -> tuple[Any, ...]:
        """What makes two calls' slots the same (fixed values by their repr)."""
        if self.how == "tuple":
            return ("tuple", tuple(item.key() for item in self.items))
        if self.how == "fixed":
            return ("fixed", type(self.value).__name__, repr(self.value))
        return (self.how, self.index)

    def get(self, carry: tuple[Any, ...], buffers: list[Any]) -> Any:
        if self.how == "carry":
            return carry[self.index]
        if self.how == "buffer":
            return buffers[self.index]
        if self.how == "tuple":
            return tuple(item.get(carry, buffers) for item in self.items)
        return self.value


@dataclass
class CarryPlan:
    """One call of a layer split into what scan carries, what each layer gets, what is fixed."""

    carry: list[Any]
    buffers: list[Any]
    positional: list[_Slot]
    keywords: dict[str, _Slot]

    def key(self) -> tuple[Any, ...]:
        """Calls with equal keys can share one set of wrappers (only tensors differ)."""
        return (
            tuple(s.key() for s in self.positional),
            tuple((k, s.key()) for k, s in self.keywords.items()),
            len(self.buffers),
        )


def carry_plan(args: tuple[Any, ...], kwargs: dict[str, Any]) -> CarryPlan:
    """Split one call of a layer into scan's carry (the state first), buffers and fixed values.

    Raises ``FixFailed`` naming the argument that cannot be passed and why.
    """
    import torch

    if not args or not isinstance(args[0], torch.Tensor) or not args[0].is_floating_point():
        first = "missing" if not args else f"a {_kind(args[0])}"
        raise FixFailed(
            f"the layers' first argument is {first}, not a floating-point tensor: scan_layers "
            "passes the state from layer to layer as the first argument"
        )
    plan = CarryPlan([], [], [], {})

    def slot(name: str, value: Any) -> _Slot:
        if isinstance(value, torch.Tensor):
            if value.is_floating_point() or value.is_complex():
                plan.carry.append(value)
                return _Slot("carry", len(plan.carry) - 1)
            plan.buffers.append(value)
            return _Slot("buffer", len(plan.buffers) - 1)
        if isinstance(value, _PLAIN):
            return _Slot("fixed", value=value)
        if isinstance(value, tuple | list):
            return _Slot("tuple", items=tuple(slot(name, v) for v in value))
        raise FixFailed(
            f"the layers receive {name}={type(value).__name__}, a Python object every layer "
            "shares: scan_layers passes only tensors and plain values to its layers"
            + (
                " (a key-value cache: build the model with use_cache=False for training)"
                if "cache" in name.lower() or "Cache" in type(value).__name__
                else ""
            )
        )

    plan.positional = [slot(f"argument {i + 1}", a) for i, a in enumerate(args)]
    plan.keywords = {k: slot(k, v) for k, v in kwargs.items()}
    return plan


class _Outputs:
    """What the layer returned while scan traced it (shared by every copy of the wrapper)."""

    def __init__(self) -> None:
        self.length: int | None = None  # None: a tensor; n: a tuple of n

    def __deepcopy__(self, memo: Any) -> _Outputs:  # scan_layers deep-copies its first layer
        return self


def _state_of(result: Any, state_in: Any) -> Any:
    """The layer's new state: its output, or its tuple's first element; refused otherwise."""
    import torch

    state = result[0] if isinstance(result, tuple | list) and result else result
    if not isinstance(state, torch.Tensor) or state.shape != state_in.shape:
        got = (
            f"{_kind(state)} of shape {tuple(state.shape)}"
            if hasattr(state, "shape")
            else (f"a {_kind(state)}")
        )
        raise FixFailed(
            f"the layers return {got} for an input of shape {tuple(state_in.shape)}: "
            "scan_layers needs each layer's output (or its tuple's first element) to be the "
            "next layer's input"
        )
    return state


def _wrapper(layer: Any, plan: CarryPlan, outputs: _Outputs):  # type: ignore[no-untyped-def]
    """One layer taking the carry positionally and returning it with the new state first."""
    import torch

    class CarryArguments(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = layer
            for number, tensor in enumerate(plan.buffers):
                self.register_buffer(f"argument_{number}", tensor, persistent=False)

        def forward(self, *carry: Any) -> Any:
            buffers = [getattr(self, f"argument_{n}") for n in range(len(plan.buffers))]
            args = [s.get(carry, buffers) for s in plan.positional]
            kwargs = {k: s.get(carry, buffers) for k, s in plan.keywords.items()}
            result = self.layer(*args, **kwargs)
            outputs.length = len(result) if isinstance(result, tuple | list) else None
            state = _state_of(result, carry[0])
            return (state, *carry[1:]) if len(carry) > 1 else state

    return CarryArguments()


class ScannedLayers:
    """Stands in for a layer stack (ModuleList or Sequential) inside the user's own model.

    Iterating it yields one callable, and calling it runs that callable: either way the user's
    forward runs ``scan_layers`` over all the original layers once.
    """

    def __init__(self, layers: Any, pure: bool = False, name: str = "the stack") -> None:
        self.layers = layers
        self.pure = pure
        self.name = name
        self.dropped: int | None = None  # per-layer extras dropped from each layer's tuple
        # The wrappers of the last call's shape, reused while calls keep it: scan_layers
        # caches a pure layer's trace by its first layer's identity (is_layer_pure).
        self._wrapped: tuple[tuple[Any, ...], Any, _Outputs] | None = None

    def __iter__(self):  # type: ignore[no-untyped-def]
        yield self

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: Any) -> Any:
        # transformers iterates `self.layers[: config.num_hidden_layers]`: the whole stack
        if isinstance(index, slice) and range(len(self.layers))[index] == range(len(self.layers)):
            return self
        raise FixFailed(
            f"{self.name}: the model takes [{index!r}] of the stack, not the whole stack in "
            "order: scan_layers runs every layer"
        )

    def parameters(self, recurse: bool = True):  # type: ignore[no-untyped-def]
        return self.layers.parameters(recurse)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch
        from torch_xla.experimental.scan_layers import scan_layers

        try:
            plan = carry_plan(args, kwargs)
        except FixFailed as error:
            raise FixFailed(f"{self.name}: {error}") from None
        key = plan.key()
        if self._wrapped is not None and self._wrapped[0] == key:
            _key, units, outputs = self._wrapped
            for unit in units:  # this call's integer tensors
                for number, tensor in enumerate(plan.buffers):
                    setattr(unit, f"argument_{number}", tensor)
        else:
            outputs = _Outputs()
            units = torch.nn.ModuleList(_wrapper(layer, plan, outputs) for layer in self.layers)
            self._wrapped = (key, units, outputs)
        carry = plan.carry
        final = scan_layers(
            units, tuple(carry) if len(carry) > 1 else carry[0], is_layer_pure=self.pure
        )
        state = final[0] if len(carry) > 1 else final
        if outputs.length is None:
            return state
        self.dropped = outputs.length - 1
        return (state, *[None] * (outputs.length - 1))


def check_scannable(model: Any, layers: str) -> Any:
    """Refuse, at the stack's first call, a call ``ScannedLayers`` could not carry.

    Returns the hook handle: the check runs during the first forward's lazy trace, before
    anything compiles, so a refusal costs seconds, not a before run.
    """
    import torch

    owner, name = _resolve(model, layers)
    stack = getattr(owner, name)
    if not isinstance(stack, torch.nn.ModuleList | torch.nn.Sequential) or not len(stack):
        raise TargetError(f"{layers} is a {type(stack).__name__}, not a ModuleList/Sequential")

    def hook(_module: Any, args: Any, kwargs: Any, result: Any) -> None:
        handle.remove()
        try:
            carry_plan(tuple(args), dict(kwargs))
            _state_of(result, args[0])
        except FixFailed as error:
            raise FixFailed(f"{layers}: {error}") from None

    handle = stack[0].register_forward_hook(hook, with_kwargs=True)
    return handle


def apply_scan(model: Any, layers: str, pure: bool = False) -> ScannedLayers:
    """Route ``model.<layers>`` (an nn.ModuleList or nn.Sequential) through ``scan_layers``.

    ``pure`` passes ``is_layer_pure=True``: the layer is traced once and cached, which is only
    right when each layer is a pure function of its inputs and parameters.
    """
    import torch

    owner, name = _resolve(model, layers)
    stack = getattr(owner, name)
    if not isinstance(stack, torch.nn.ModuleList | torch.nn.Sequential):
        raise TargetError(
            f"{layers} is a {type(stack).__name__}, not an nn.ModuleList or nn.Sequential"
        )
    # Keep the stack registered (parameters, .to(), state_dict); only its use changes.
    scanned = ScannedLayers(stack, pure, layers)
    owner._modules.pop(name)
    owner.add_module("_xlaprof_layers_" + name, stack)
    object.__setattr__(owner, name, scanned)
    return scanned


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
