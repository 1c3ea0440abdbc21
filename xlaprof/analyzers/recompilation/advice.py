"""What a recompilation finding advises, by what changed: shared by the sources it is found from
(compilation events in ``sites``, torch.compile's reasons in ``dynamo``, counts here in
``__init__``)."""

from __future__ import annotations

SUGGESTION = (
    "Keep tensor shapes static between steps: pad or bucket variable dimensions to a few fixed "
    "sizes, use drop_last=True in the DataLoader, and avoid Python branches on tensor values. "
    "Each distinct input shape or graph is compiled anew."
)
# The most steps, hashes or reasons listed in a finding's evidence (steps: four times this).
MAX_LISTED = 8

ADVICE = {
    "input_shapes": (
        "An input's shape changes between steps. Pad or bucket that dimension to a few fixed "
        "sizes (for a batch dimension: drop_last=True in the DataLoader, or pad the last "
        "batch), or mark it dynamic (torch._dynamo.mark_dynamic) when compiling with "
        "torch.compile(backend='openxla')."
    ),
    "data_dependent": (
        "A shape depends on the data (nonzero, boolean masking, unique): each new count is a "
        "new graph. Keep shapes fixed: multiply by the mask or use torch.where(mask, x, 0) "
        "instead of selecting rows, and reduce with the mask as a weight."
    ),
    "dynamo_shapes": (
        "torch.compile guards on each input's sizes: every new size compiles again (with the "
        "openxla backend, XLA compiles each size too). Pad or bucket that dimension to a few "
        "fixed sizes (drop_last=True for a DataLoader's short last batch), or mark it dynamic "
        "before the first call with torch._dynamo.mark_dynamic(x, dim)."
    ),
    "dynamo": (
        "A guard of the compiled function failed, so dynamo compiled it again: keep the value "
        "the guard names fixed between calls, or make it a tensor input."
    ),
    "constant": (
        "A Python number passed to an op (a shift, a size, an index, a slice bound) is baked "
        "into the graph as a constant, so each new value compiles a new graph. Keep it fixed, "
        "or pass it as a device tensor (torch.tensor(value, device=...)) and use an op that "
        "takes a tensor (torch.gather / index_select instead of a Python-int roll or slice)."
    ),
    "structure": (
        "The graph's structure changes between steps with the same inputs. Look at the line "
        "named: a Python `if` on a tensor value, a Python number that changes every step, or "
        "a code path taken only sometimes. Move the branch into the graph (torch.where) or "
        "make the value a tensor."
    ),
}
