"""What a recompilation finding advises, by what changed: shared by the sources it is found from
(compilation events in ``sites``, torch.compile's reasons in ``dynamo``, counts here in
``__init__``), with the library's own remedy where the cause lives in a library."""

from __future__ import annotations

import itertools
import re

from xlaprof.analyzers.recompilation.growth import Growth
from xlaprof.analyzers.shared.graph_diff import Explanation, InputChange
from xlaprof.analyzers.shared.sourcecode import (
    call_source,
    enclosing_class,
    enclosing_loop,
    loop_body,
    source_line,
)
from xlaprof.findings import Location
from xlaprof.model.sources import SourceFiles

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
        "A shape depends on the data (nonzero, one-argument torch.where, boolean indexing, "
        "masked_select, unique): each new count is a new graph. Keep shapes fixed: multiply by "
        "the mask or use torch.where(mask, x, 0) instead of selecting rows, and reduce with the "
        "mask as a weight."
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
    "baked_value": (
        "torch_xla passes a Python number to the graph as device data, except a value equal to "
        "0 or 1 in the tensor's dtype (after rounding), which it bakes into the graph as a "
        "constant: the step where the number reaches 0 or 1 compiles a new graph. Keep the "
        "number away from 0 and 1 (a floor on a schedule), or pass it as a device tensor."
    ),
    "constant": (
        "A Python number passed to an op (a shift, a size, an index) is baked into the graph as "
        "a constant, so each new value compiles a new graph. Keep it fixed, or pass it as a "
        "device tensor (torch.tensor(value, device=...)) and use an op that takes a tensor."
    ),
    "attribute": (
        "A Python number used as a slice bound or size is baked into the graph, so each new "
        "value compiles a new graph. Index with a device tensor instead (index_select, "
        "torch.gather or narrow with a tensor of positions), slice on the host before "
        "`.to(device)`, or keep the bounds fixed."
    ),
    "sizes": (
        "A size made from a Python number (torch.arange(n), a slice length, a view) changes "
        "between steps while the inputs stay the same: keep it fixed (pad to a maximum length) "
        "or compute it from a fixed-size tensor and a mask."
    ),
    "parameters": (
        "The graph takes a different set of inputs than the graph it replaced: a tensor "
        "created or dropped on some steps only, or two inputs that happen to be the same "
        "value. Keep the same tensors flowing into the step every time."
    ),
    "structure": (
        "The graph's ops change between steps. Look at the line named: a Python `if` on a "
        "tensor value, a Python number that changes every step, or a code path taken only "
        "sometimes. Move the branch into the graph (torch.where) or make the value a tensor."
    ),
}
# Fix texts for causes inside a library, where the user's remedy is a setting of the library.
# transformers' MoE experts (experts_implementation="eager") route tokens with
# torch.where(mask) and index each expert's tokens: examples/realcode/hf_mixtral_moe.py
# measured 31 compiles in 3 steps, and hf_mixtral_batched.py 2 in all with "batched_mm".
_TRANSFORMERS_EXPERTS = (
    " This is transformers' experts loop ({where}): load the model with "
    'experts_implementation="batched_mm", which runs every expert on fixed shapes (measured on '
    'Mixtral: 2 compilations in all instead of new graphs every step), instead of "eager".'
)
# torch.optim's Adam/AdamW compute two Python numbers that reach 1.0 in float32: the decoupled
# weight decay factor (1 - lr * weight_decay), with lr * weight_decay below 2**-25 (about 3e-8),
# and the bias corrections (1 - beta ** step) late in training. examples/realcode/
# hf_bert_cosine_lr.py measured the first: a cosine schedule's last step recompiles, and
# XLA_NO_SPECIAL_SCALARS=1 does not stop it (the value 1.0 then shares a cached device scalar
# with another input instead).
_WEIGHT_DECAY = (
    " Here it is the optimizer's decoupled weight decay `1 - lr * weight_decay` ({where}): at "
    "a tiny learning rate (lr * weight_decay below about 3e-8, which a schedule decaying to 0 "
    "reaches at its end) it is 1.0 in float32. Keep lr * weight_decay at or above 6e-8 until "
    "the last step (a floor on the schedule: a minimum learning rate of 6e-8 / weight_decay), "
    "or end the schedule before it reaches ~0. XLA_NO_SPECIAL_SCALARS=1 does not prevent this "
    "recompilation (measured)."
)
_BIAS_CORRECTION = (
    " Here it is the optimizer's bias correction `1 - beta ** step` ({where}), which is 1.0 in "
    "float32 once beta ** step is below about 3e-8: one recompile late in training, a "
    "one-time cost."
)
_OPTIMIZER = (
    " It is in torch.optim ({where}): the numbers there that reach 1.0 in float32 are AdamW's "
    "decoupled weight decay `1 - lr * weight_decay` at a tiny learning rate (keep lr * "
    "weight_decay at or above 6e-8 until the last step: a floor on the schedule, or end it "
    "before ~0; XLA_NO_SPECIAL_SCALARS=1 does not prevent it, measured) and the bias "
    "corrections `1 - beta ** step` late in training (one recompile, a one-time cost)."
)
_GROWN = (
    "An input is rebuilt by a reassignment in the loop (line {line}) and grows every step, so "
    "every step traces graphs of a new shape and compiles them. Allocate it once at its final "
    "size and write each step's values into it at a position index (a fixed shape, with a mask "
    "over the part filled so far), or keep a static KV cache (transformers' StaticCache)."
)
_SHORT_BATCH = (
    "The loop yields batches whose first dimension changes ({sizes}): the data set's size is "
    "not a multiple of the batch size, so the last batch is short and compiles a graph of its "
    "own (once per shape; again wherever it is traced anew). Pass drop_last=True to the "
    "DataLoader, or pad the last batch to the full size (and mask the padded rows out of the "
    "loss)."
)


_TRAINER_ACCUMULATOR = (
    "Trainer's evaluation loop keeps each batch's outputs for compute_metrics and, with no "
    "eval_accumulation_steps, concatenates them on the device ({where}): a device-side "
    "accumulator that grows by one batch every step ({sizes}), so each evaluation batch traces "
    "a concatenation of a new size and compiles a new graph. The input shapes are not the "
    "cause, so padding, bucketing and drop_last do not help. Set eval_accumulation_steps=1 in "
    "TrainingArguments (Trainer then moves the accumulated outputs to the host after each "
    "batch), or batch_eval_metrics=True with a compute_metrics that accumulates itself."
)
_ACCUMULATOR = (
    "A tensor kept across steps grows by the same amount every step ({sizes}, at {where}): "
    "outputs concatenated onto an accumulator on the device, so each step traces a "
    "concatenation of a new size and compiles a new graph. The input shapes are not the "
    "cause, so padding and bucketing do not help. Keep the per-step outputs in a Python list "
    "and concatenate once at the end, or move each to the host (.cpu() after the step's "
    "sync) before accumulating; the library that accumulates may have an option for it."
)
# At least this many sizes, each the one before plus the same step, make an accumulator.
ACCUMULATOR_SIZES = 3


# Data-augmentation code: a transform applied to a device batch that draws its own random
# bounds (an erased box, a crop) bakes them into the graph as constants and shapes.
_AUGMENTATION_RE = re.compile(
    r"[/\\](?:torchvision[/\\]transforms|timm[/\\]data|kornia[/\\]augmentation)[/\\]"
)
_AUGMENTATION = (
    "The changing shape is made by a data transform applied to the batch on the device: "
    "{where} (called at your line {line}{text}) draws its own random bounds and size on each "
    "call, which the graph takes as constants and shapes, so every call compiles a new graph. "
    "Keeping those values fixed or passing them as device tensors cannot work: the region's "
    "size varies too. Apply the transform on the host instead, in the DataLoader's workers "
    "before the batch moves to the device, or build a fixed-shape mask on the device (random "
    "bounds as device tensors compared against a coordinate grid, then torch.where(mask, "
    "value, images)): one shape whatever the bounds."
)


def augmentation_change(explanation: Explanation | None) -> InputChange | None:
    """The input of ``explanation`` whose changing shape is first used inside a data-augmentation
    library's transform (torchvision.transforms, timm.data, kornia.augmentation), or None."""
    if explanation is None or explanation.kind != "input_shapes":
        return None
    for change in explanation.inputs:
        where = change.op_source
        if where is not None and _AUGMENTATION_RE.search(where.file):
            return change
    return None


def augmentation_text(change: InputChange) -> str:
    """The fix for a device-side augmentation's random bounds, naming the transform."""
    assert change.op_source is not None
    text = f": `{change.source_text}`" if change.source_text else ""
    line = str(change.source) if change.source is not None else "?"
    return _AUGMENTATION.format(where=_short(change.op_source), line=line, text=text)


def growing_accumulator(explanation: Explanation | None) -> InputChange | None:
    """The input of ``explanation`` whose first dimension grows by the same step each compile
    (8, 16, 24, 32 …): a device-side accumulator concatenated each step (an evaluation loop
    keeping every batch's outputs), or None."""
    if explanation is None or explanation.kind != "input_shapes":
        return None
    for change in explanation.inputs:
        sizes = list(dict.fromkeys(change.varying_dims.get(0) or []))
        if len(sizes) < ACCUMULATOR_SIZES:
            continue
        steps = {b - a for a, b in itertools.pairwise(sizes)}
        if len(steps) == 1 and min(steps) > 0 and sizes[0] == min(steps):
            return change
    return None


def accumulator_text(change: InputChange) -> str:
    """The fix for a growing accumulator, with the library's own option where known."""
    sizes = list(dict.fromkeys(change.varying_dims.get(0) or []))
    shown = " → ".join(map(str, sizes[:MAX_LISTED])) + (" → …" if len(sizes) > MAX_LISTED else "")
    where = change.op_source or change.source
    place = _short(where) if where is not None else "the step"
    if where is not None and re.search(r"[/\\]transformers[/\\]trainer", where.file):
        return _TRAINER_ACCUMULATOR.format(where=place, sizes=shown)
    return _ACCUMULATOR.format(where=place, sizes=shown)


def suggestion(
    sources: SourceFiles,
    explanation: Explanation | None,
    grown: int | None,
    batches: str | None = None,
) -> str:
    """The fix text for the cause the graphs show, with the library's own remedy where known."""
    accumulator = growing_accumulator(explanation) if grown is None and batches is None else None
    if accumulator is not None:
        return accumulator_text(accumulator)
    augmented = augmentation_change(explanation) if grown is None else None
    if augmented is not None:
        return augmentation_text(augmented)
    return _cause_suggestion(sources, explanation, grown, batches)


def _cause_suggestion(
    sources: SourceFiles,
    explanation: Explanation | None,
    grown: int | None,
    batches: str | None,
) -> str:
    if explanation is None:
        return SUGGESTION
    text = ADVICE.get(explanation.kind, SUGGESTION)
    if batches is not None:
        return _SHORT_BATCH.format(sizes=batches)
    if explanation.kind == "data_dependent":
        change = next(c for c in explanation.inputs if c.data_dependent)
        where = change.op_source
        if where is not None and _in_transformers_experts(sources, where):
            text += _TRANSFORMERS_EXPERTS.format(where=_short(where))
    elif explanation.kind == "input_shapes" and grown is not None:
        text = _GROWN.format(line=grown)
    elif explanation.kind == "baked_value" and explanation.first_difference:
        where = Location.parse(str(explanation.first_difference.get("op_source") or ""))
        if where is not None and re.search(r"[/\\]torch[/\\]optim[/\\]", where.file):
            source = source_line(sources, where.file, where.line) or ""
            if "weight_decay" in source:
                text += _WEIGHT_DECAY.format(where=_short(where))
            elif "beta" in source:
                text += _BIAS_CORRECTION.format(where=_short(where))
            else:  # the library's source is not readable here
                text += _OPTIMIZER.format(where=_short(where))
    return text


def _in_transformers_experts(sources: SourceFiles, where: Location) -> bool:
    """A line in transformers' mixture-of-experts code (an experts loop)."""
    if not re.search(r"[/\\]transformers[/\\]", where.file):
        return False
    if re.search(r"(moe|mixtral|experts)", where.file, re.IGNORECASE):
        return True
    text = source_line(sources, where.file, where.line) or ""
    owner = enclosing_class(sources, where.file, where.line) or ""
    return "expert" in text.lower() or "expert" in owner.lower()


def _short(where: Location) -> str:
    """``.../site-packages/transformers/models/x.py:85`` -> ``transformers/models/x.py:85``."""
    match = re.search(r"[/\\](?:site|dist)-packages[/\\](.+)$", where.file)
    return f"{match.group(1) if match else where.file}:{where.line}"


_SYNC_PER_TOKEN = (
    "Nothing syncs inside model.generate() on XLA: each token's forward is traced onto the "
    "last, and every host read inside generate (here `{function}` at {read_at}) compiles and "
    "runs all the tokens traced so far, because a read materializes only the value it reads "
    "(the KV cache stays pending). Sync once per token with a stopping criterion:\n"
    "    class SyncPerToken(transformers.StoppingCriteria):\n"
    "        def __call__(self, input_ids, scores, **kwargs):\n"
    "            torch_xla.sync()\n"
    "            return torch.zeros(input_ids.shape[0], dtype=torch.bool, "
    "device=input_ids.device)\n\n"
    "    model.generate(..., stopping_criteria=StoppingCriteriaList([SyncPerToken()]))\n"
    "Each token then compiles graphs of one token's work instead of all tokens so far "
    "(measured on examples/realcode/hf_generate_dynamic_cache.py, 6 new tokens: the largest "
    "graph 1,716 -> 330 ops, all compiled ops 8,334 -> 3,461, 20 -> 21 compiles). "
)
_GENERATE_LENGTHS = (
    "generate itself still grows input_ids by one token a step (its torch.cat), so each new "
    "length compiles its own graphs, whatever the cache{static}; for one set of graphs reused "
    "every token, decode in a loop of your own over a buffer allocated at its final length with "
    "transformers' StaticCache, and sync once per token."
)
_SYNC_PER_ITERATION = (
    "Nothing syncs inside the loop{loop}: every read here compiles and runs everything traced "
    "since the start, because a read materializes only the value it reads and the state the "
    "loop carries (weights updated in place, a cache) stays pending, one iteration more at "
    "each read. Add torch_xla.sync() once per iteration, as the last statement of the loop "
    "body{after}: each iteration then runs one graph of one size, compiled once and reused."
)


def growth_suggestion(sources: SourceFiles, growth: Growth, where: Location | None) -> str:
    """The fix for graphs that grow: a sync per token inside generate (and a static cache where
    the call has none), else a sync per iteration of the user's loop around the read."""
    if growth.in_generate:
        text = _SYNC_PER_TOKEN.format(
            function=growth.function or "a read", read_at=_short_text(growth.read_at)
        )
        call = call_source(sources, where.file, where.line) if where is not None else None
        static = call is not None and "cache_implementation" in call and "static" in call
        return text + _GENERATE_LENGTHS.format(
            static=" (the static cache this call uses included)" if static else ""
        )
    loop = enclosing_loop(sources, where.file, where.line) if where is not None else None
    body = loop_body(sources, where.file, loop) if where is not None and loop is not None else None
    return _SYNC_PER_ITERATION.format(
        loop="" if loop is None else f" at line {loop}",
        after="" if body is None else f" (after line {body.last_line})",
    )


def _short_text(where: str) -> str:
    match = re.search(r"[/\\](?:site|dist)-packages[/\\](.+)$", where)
    return match.group(1) if match else where
