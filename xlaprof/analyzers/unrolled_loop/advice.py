"""The fix texts of an unrolled-loop finding: how to scan a stack the user's code applies
(following how its layers are called), what can be done about one a library applies, a time
loop through ``scan``, and, where only the source names the stack, the loop's own rewrite.
"""

from __future__ import annotations

import re
from typing import Any

from xlaprof.analyzers.shared.scan_rewrite import blockers, call_in_words, carry_rewrite, simple
from xlaprof.analyzers.shared.sourcecode import LayerStack, loop_call
from xlaprof.analyzers.unrolled_loop.modules import ModuleMatch
from xlaprof.model.sources import SourceFiles


def model_path(name: str | None) -> str | None:
    """The stack's attribute path from the model the user calls (``model.layers``)."""
    if not name or name == "<root>":
        return None
    return re.sub(r"^<root\d+>\.?", "", name) or None


def package_of(applied: dict[str, Any] | None) -> str:
    """The library a stack's loop lives in: ``transformers``, ``timm`` (else "a library")."""
    if applied is None:
        return "a library"
    module = str(applied.get("module") or "")
    if module and module != "__main__":
        return module.split(".")[0]
    file = str(applied.get("file") or "")
    inside = re.search(r"(?:site|dist)-packages/([^/]+)", file)
    return inside.group(1) if inside else "a library"


def _short_file(file: str) -> str:
    """A library file from its package folder on (``timm/models/vision_transformer.py``)."""
    inside = re.search(r"(?:site|dist)-packages/(.+)$", file)
    return inside.group(1) if inside else file


def user_text(
    sources: SourceFiles, match: ModuleMatch, name: str, unit: str, scannable: bool
) -> str:
    """How to scan a stack the user's own code applies, following how its layers are called."""
    where = match.location
    if not scannable:
        return (
            f"Group each repeating unit ({unit}) into one nn.Module, hold the {match.units} "
            "units in an nn.ModuleList and run them with "
            "torch_xla.experimental.scan_layers.scan_layers(layers, x) instead of calling the "
            f"stack at {where}.\n"
        )
    signature = match.signature
    loop = match.location.line if match.location is not None else None
    source = loop_call(sources, match.location.file, loop) if match.location and loop else None
    if signature is None or simple(signature):
        state = source.args[0] if source is not None and source.args else "x"
        return (
            f"Replace the loop at {where} with:\n"
            "    from torch_xla.experimental.scan_layers import scan_layers\n"
            f"    {state} = scan_layers({name}, {state})   # the loop's input and output\n"
        )
    rewrite = carry_rewrite(signature, source, name, unit, match.owner_class, loop)
    words = call_in_words(signature)
    if rewrite is None:
        problems = blockers(signature)
        why = (
            "; ".join(problems)
            if problems
            else ("an integer tensor or a value computed in the loop is passed to each layer")
        )
        return (
            f"Here {words}: scan_layers(layers, x) passes one carry from layer to layer and "
            f"cannot take this call as it stands ({why}). Pass only tensors (the state first, "
            "the rest unchanged) and return them all, then run the layers with "
            "torch_xla.experimental.scan_layers.scan_layers; `xlaprof bench scan` shows "
            "whether it applies.\n"
        )
    code, dropped = rewrite
    extras = (
        f"Each layer's other outputs ({', '.join(dropped)}) are dropped: scan keeps only the "
        "carry, so only the last layer's state comes out. "
        if dropped
        else ""
    )
    return (
        f"Here {words}, and scan_layers(layers, carry) calls layer(*carry) and needs the whole "
        f"carry back, so `{name}` cannot be scanned as it stands: wrap each layer to carry its "
        f"other arguments unchanged.\n{code}{extras}"
    )


def library_text(match: ModuleMatch, name: str, unit: str, evidence: dict[str, object]) -> str:
    """The loop is a library's: say whose and where, and what the user can do from their code."""
    applied = match.applied_by or {}
    package = package_of(applied)
    file = str(applied.get("file") or "")
    line = applied.get("line")
    loop_line = applied.get("loop_line") or line
    function = applied.get("function") or "its forward"
    loop_at = f"{_short_file(file)}:{loop_line}" if file and loop_line else "its own code"
    evidence["stack_in_library"] = f"{package}: {function} ({loop_at})"
    if file and loop_line:
        evidence["loop"] = f"{file}:{loop_line}"
    whose = f"{package}'" if package.endswith("s") else f"{package}'s"
    is_call = match.container == "Sequential"
    where = "calls the stack" if is_call else "loops over the layers"
    said = (
        f"The loop over these {match.units} {unit} is {whose}, not yours: {function} "
        f"{where} at {loop_at}, and your line {match.location} only calls the model, so there "
        "is no loop of yours to replace. "
    )
    signature = match.signature or {}
    problems = blockers(signature) if signature else []
    if is_call and signature and simple(signature):
        return said + (
            f"Its layers take one tensor and return one, and {package} calls the stack as a "
            "whole, so you can swap it on your model object, without changing the library:\n"
            "    from torch import nn\n"
            "    from torch_xla.experimental.scan_layers import scan_layers\n\n"
            "    class ScannedStack(nn.Module):\n"
            "        def __init__(self, layers):\n"
            "            super().__init__()\n"
            "            self.layers = nn.ModuleList(layers)\n\n"
            "        def forward(self, x):\n"
            "            return scan_layers(self.layers, x)\n\n"
            f"    {name} = ScannedStack({name})   # after building the model, before the "
            "optimizer\n"
            f"Its state-dict keys gain `.layers` ({name.removeprefix('model.')}.0. becomes "
            f"{name.removeprefix('model.')}.layers.0.): load checkpoints before the swap. "
            f"Code of {whose} that iterates or indexes the stack (feature extraction, "
            "gradient checkpointing) needs the original.\n"
        )
    words = call_in_words(signature) if signature else "the layers' call was not recorded"
    blocked = (
        f" Of that, {'; '.join(problems)}: scan cannot carry it, so set it aside first."
        if problems
        else ""
    )
    return said + (
        f"What you can do: leave it (the unrolled graph compiles once per input shape and is "
        "reused; the persistent compilation cache, torch_xla.runtime.initialize_cache(DIR), "
        f"keeps it across runs), or override {function} in a subclass of {match.owner_class} "
        "so that it runs the layers with torch_xla.experimental.scan_layers.scan_layers, each "
        f"wrapped to take and return the tensors {package} passes it: {words}.{blocked} "
        f"`xlaprof bench scan` applies that wrapping to a live model (--layers "
        f"{model_path(match.name) or 'PATH'}) and measures it, without editing {package}.\n"
    )


CAVEATS = (
    "XLA then compiles one layer instead of {repeats}. Caveats (torch_xla docs): the "
    "layers must be homogeneous (same structure, parameter shapes and computation); no "
    "custom Pallas kernels inside them; pass is_layer_pure=True when each layer is a pure "
    "function of its inputs and parameters, so the layer is traced once and cached. "
    "Measure before and after on your model (`xlaprof bench scan`, as the evidence says): on "
    "some backends the scanned step runs slower even as compilation gets faster."
)


def time_loop_text(match: ModuleMatch, sketch: str | None) -> str:
    """How to run a time loop on the device: ``scan`` over the steps, with a sketch from the
    user's loop where one could be written."""
    return (
        "Run the loop on the device with torch_xla.experimental.scan.scan(fn, init, xs): "
        "fn(carry, x_t) -> (carry, y_t) is traced and compiled once, xs are sliced along "
        "dim 0."
        + (f" A sketch from your loop:\n{sketch}\n" if sketch else " ")
        + f"XLA then compiles one step of the loop instead of {match.units}. fn must be "
        "traceable by AOTAutograd (no Python branches on tensor values, no .item()) and "
        "may not close over tensors, so the module's parameters travel in the carry "
        "(torch.func.functional_call); measure compile time and step time before and after."
    )


def accumulation_text(loop: str, backward_line: int, units: int) -> str:
    """The fix for a loop whose body runs ``backward()`` with no sync (gradient accumulation
    traced into one graph): scan cannot hold a backward pass, so not scan."""
    return (
        f"The loop at {loop} calls backward() in its body (line {backward_line}): gradient "
        f"accumulation with no sync inside, so all {units} micro-batches' forward and backward "
        "passes are traced into one graph. Scan cannot run it (the function scan traces cannot "
        "contain a backward pass). Either sync once per micro-batch (torch_xla.sync() right "
        "after the backward call: the micro-batch's graph, compiled once (the first "
        "micro-batch's, which creates the gradients, once more) and run "
        f"{units} times a step, the gradients kept on the device between them), or run the "
        "micro-batches in one XLA loop with torch_xla's gradient-accumulation helper "
        "(torch_xla.experimental.gradient_accumulation.gradient_accumulation(train_step, "
        "iterable_tensors, model)), which compiles the body once."
    )


def host_loop_text(loop: str, read_line: int, units: int) -> str:
    """The fix for a loop that reads a value on the host each iteration and never syncs (an
    episode handing each sampled action to an environment): each read runs everything traced
    since the last sync, so the graphs grow with the iteration; scan cannot hold a loop whose
    body needs its values on the host."""
    return (
        f"The loop at {loop} reads a device value on the host in its body (line {read_line}) "
        "and nothing syncs inside it, so each read runs everything traced since the loop "
        f"began: {units} iterations traced as one growing program, a new and larger graph at "
        "each iteration (random sampling adds its RNG state to it too). Scan cannot run it: "
        "the body needs its value on the host. Sync once per iteration (torch_xla.sync() at "
        "the end of the loop's body, or right after the read): each iteration is then the "
        "same small graph, compiled once and reused, and the values kept for later "
        "(log-probabilities for the backward) stay on the device."
    )


def source_suggestion(sources: SourceFiles, stack: LayerStack | None, repeats: int) -> str:
    """The fix where only the source names the stack (no module tree): the loop's own call
    decides between ``x = scan_layers(...)`` and carrying its other arguments."""
    source = (
        loop_call(sources, stack.file, stack.loop_line)
        if stack is not None and stack.loop_line is not None
        else None
    )
    if stack is not None and stack.loop_line is not None:
        target = f"self.{stack.attribute}"
        where = f"In {stack.owner_class}.{stack.owner_method}, replace the loop at "
        where += f"{stack.file}:{stack.loop_line}"
        if source is None or (
            len(source.args) == 1 and not source.keywords and len(source.targets) <= 1
        ):
            state = source.args[0] if source is not None else "x"
            how = (
                f"{where} with:\n"
                "    from torch_xla.experimental.scan_layers import scan_layers\n"
                f"    {state} = scan_layers({target}, {state})   # the loop's input and output\n"
            )
        else:
            how = (
                f"{where}: its layers are called with more than the state or return a tuple "
                f"(line {source.line}), and scan_layers(layers, carry) calls layer(*carry) and "
                "needs the whole carry back. Wrap each layer in a module whose forward takes "
                "the tensors it is passed, calls the layer, and returns its new state with the "
                "other tensors unchanged; then run scan_layers over the wrappers with that "
                "tuple as the carry (other outputs of each layer are dropped).\n"
            )
    else:
        how = (
            "Run the repeated layers with torch_xla.experimental.scan_layers.scan_layers(layers, "
            "x), or a non-module loop with torch_xla.experimental.scan.scan(fn, init, xs).\n"
        )
    return how + CAVEATS.format(repeats=repeats)
