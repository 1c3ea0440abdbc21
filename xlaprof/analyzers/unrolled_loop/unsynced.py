"""A loop of the user's own that never syncs: its iterations traced into one graph.

Inference and sampling scripts often have no step at all: a diffusion sampling loop (a UNet and
a scheduler step per timestep) runs to the end and reads the image once, so the lazy trace holds
every iteration and compiles them together, as one graph run once. Such a run has no step
boundary, hence no module tree (capture/modules.py records one from the second step on) and no
graph run twice: the loop is named from the ops' Python stacks (the HloProto's stack frame
index), whose user frames lie in the loop's body, and located at its header.

The fix follows what the body does (``sourcecode.loop_body``): where the loop variable reaches
Python (a library call that indexes host tables with it, a branch), each iteration traces
differently, so scan, which traces the body once, is no drop-in and a sync per iteration is the
fix (one iteration's graph, compiled once and reused). Where the body is pure tensor work,
``torch_xla.experimental.scan`` traces it once.
"""

from __future__ import annotations

import re
from collections import Counter

from xlaprof.analyzers.shared.sourcecode import enclosing_loop, loop_body
from xlaprof.analyzers.unrolled_loop.repeats import Repeat
from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.model.sources import SourceFiles
from xlaprof.parse.frames import is_library_file
from xlaprof.parse.hlo import Instruction

# Library frames that only dispatch a call (nn.Module.__call__): the callee below them names it.
_DISPATCH = ("/torch/nn/modules/module.py", "/torch/utils/_contextlib.py")


def stack_lines(block: list[Instruction]) -> Counter[tuple[str, int]]:
    """The user's lines the block's ops were traced from, by their Python stacks (the innermost
    user frame of each op), for blocks whose own source lines are all in libraries."""
    lines: Counter[tuple[str, int]] = Counter()
    for instruction in block:
        if instruction.user_file and instruction.user_line:
            lines[(instruction.user_file, instruction.user_line)] += 1
    return lines


def _short(file: str) -> str:
    inside = re.search(r"(?:site|dist)-packages/(.+)$", file)
    return inside.group(1) if inside else file


def library_calls(block: list[Instruction]) -> list[str]:
    """The library functions the loop body calls (``diffusers/schedulers/scheduling_ddpm.py:
    step``): in each op's stack, the first frame below the user's that does more than dispatch
    a module call, by the share of ops under it."""
    calls: Counter[str] = Counter()
    for instruction in block:
        stack = instruction.stack or ()
        user = next(
            (k for k, f in enumerate(stack) if f.file and not is_library_file(f.file)), None
        )
        if user is None:
            continue
        for frame in reversed(stack[:user]):
            if frame.file and not frame.file.endswith(_DISPATCH):
                calls[f"{_short(frame.file)}:{frame.function}"] += 1
                break
    return [name for name, _count in calls.most_common(4)]


def finding(
    sources: SourceFiles,
    block: list[Instruction],
    primary: Repeat,
    copies: str,
    evidence: dict[str, object],
) -> Finding | None:
    """The unrolled-loop finding for a user loop found by its ops' stacks, or None where the
    block's user lines lie in no loop of readable source."""
    lines = stack_lines(block)
    if not lines:
        return None
    (file, line), _count = lines.most_common(1)[0]
    loop_line = enclosing_loop(sources, file, line)
    body = None if loop_line is None else loop_body(sources, file, loop_line)
    if loop_line is None or body is None or body.calls_variable:
        return None  # no loop of the user's, or a loop over layers (a layer stack's finding)
    calls = library_calls(block)
    evidence["block_source_lines"] = [f"{f}:{n}" for (f, n), _ in lines.most_common(6)]
    evidence["loop"] = f"{file}:{loop_line}"
    evidence["syncs_in_loop"] = 0
    if calls:
        evidence["library_calls"] = calls
    evidence["loop_variable_to_host"] = list(body.host_uses)
    header = f" (`{body.header}`)" if body.header else ""
    where = f"{file}:{loop_line}"
    if body.host_uses:
        evidence["fix_kind"] = "sync_per_iteration"
        into = f" (into {', '.join(calls)})" if calls else ""
        suggestion = (
            f"Nothing syncs inside the loop at {where}, so all its iterations are traced into "
            f"one graph ({primary.repeats} identical copies found), compiled and run once; more "
            "iterations make a larger graph and a longer compile. The body hands the loop's "
            f"value to Python each iteration ({'; '.join(body.host_uses)}){into}: each "
            "iteration traces with its own host value (a table indexed with it, a branch on "
            "it), so scan, which traces the body once, is no drop-in. Sync once per "
            f"iteration: add torch_xla.sync() as the last statement of the loop body (after "
            f"line {body.last_line}), as diffusers' own pipelines do on XLA (xm.mark_step() "
            "in the denoising loop). Each iteration then runs one graph of one copy, compiled "
            "at its first iteration and reused (a branch on the value, such as no noise at "
            "the last step, compiles its own graph once)."
        )
    else:
        evidence["fix_kind"] = "scan"
        use = "is not used" if body.variable is None else "only indexes tensors or is unused"
        suggestion = (
            f"Nothing syncs inside the loop at {where}, so all its iterations are traced into "
            f"one graph ({primary.repeats} identical copies found), compiled and run once. The "
            f"body is tensor work (the loop variable {use}): run it with "
            "torch_xla.experimental.scan.scan(step, init, xs), which traces and compiles one "
            "iteration and loops on the device; or sync once per iteration (torch_xla.sync() "
            f"after line {body.last_line}) so one iteration's graph is compiled once and reused."
        )
    return Finding(
        kind=Kind.UNROLLED_LOOP,
        severity=Severity.WARNING,
        title=(
            f"Unrolled loop that never syncs: the loop at line {loop_line}{header} traced as "
            f"{copies}"
        ),
        evidence=evidence,
        location=Location(
            file, loop_line, "the loop whose iterations are all traced into one graph"
        ),
        suggestion=suggestion,
    )
