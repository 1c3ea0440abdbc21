"""torch.compile recompilations, from dynamo's own reasons: one finding per cause (the compiled
function and what its guard found changed)."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict

from xlaprof.analyzers.recompilation.advice import ADVICE, MAX_LISTED
from xlaprof.analyzers.shared.sourcecode import argument_origin
from xlaprof.findings import Finding, Kind, Location, Severity
from xlaprof.model.input import AnalysisInput
from xlaprof.model.sources import SourceFiles
from xlaprof.parse.dynamo_log import DynamoRecord


def from_dynamo(data: AnalysisInput) -> tuple[list[Finding], set[Location]]:
    """torch.compile recompilations, one finding per cause (the compiled function and what its
    guard found changed), and the user lines that call compiled functions.

    XLA compilations made while dynamo compiles are synced from the line that calls the
    compiled function; those lines are returned so the lazy-tensor path does not report the
    same cause a second time.
    """
    calls: set[Location] = set()
    compiles_at: dict[Location, list[DynamoRecord]] = defaultdict(list)
    for record in data.dynamo:
        if record.kind == "compile" and record.user_frames:
            call = Location.parse(record.user_frames[0])
            if call is not None:
                calls.add(call)
                compiles_at[call].append(record)
    # One cause: one call of a compiled function and one kind of guard failure. A graph break
    # splits a function into several that dynamo compiles apiece (``forward`` and
    # ``torch_dynamo_resume_in_forward_at_9``), and all recompile for the one changed input.
    causes: dict[tuple[str | None, str], list[DynamoRecord]] = defaultdict(list)
    for record in data.dynamo:
        if record.kind == "recompile":
            where = record.user_frames[-1] if record.user_frames else record.code
            guard = re.sub(r"tensor '[^']*'", "tensor", record.cause or "")
            causes[(where, guard)].append(record)
    xla_steps: dict[int | None, int] = defaultdict(int)
    for event in data.debug.compilations():
        xla_steps[event.step] += 1
    findings = [
        _finding(data.sources, records, compiles_at, xla_steps) for records in causes.values()
    ]
    return findings, calls


def _finding(
    sources: SourceFiles,
    records: list[DynamoRecord],
    compiles_at: dict[Location, list[DynamoRecord]],
    xla_steps: dict[int | None, int],
) -> Finding:
    """The finding of one cause: its recompiles (``records``), the dynamo compiles at its call
    and the XLA compilations per step."""
    first = records[0]
    everything = records
    code, cause = first.code, first.cause
    # The call site from the record with the most frames: TORCH_TRACE logs of one function
    # give some compiles a shorter stack than others (dynamo's own frame skipping).
    deepest = max(records, key=lambda r: len(r.user_frames))
    records = [r for r in records if r.function == first.function] or records
    call = Location.parse(deepest.user_frames[0]) if deepest.user_frames else None
    mismatches = [m for m in (r.mismatch for r in records) if m is not None]
    sizes = [mismatches[0].expected, *(m.actual for m in mismatches)] if mismatches else []
    dynamo_compiles = compiles_at.get(call, []) if call is not None else []
    steps = sorted({r.step for r in records if r.step is not None})
    evidence: dict[str, object] = {
        "compiled_function": f"{first.function} ({code})" if first.function else code,
        "recompiles": len(records),
        # every compiled function this cause recompiled (a graph break's split-off ones too)
        "dynamo_recompiles": len(everything),
        "guard_failure": cause,
        "dynamo_reasons": [r.reason for r in records[:MAX_LISTED]],
        "recompile_steps": steps[: MAX_LISTED * 4],
        "dynamo_compiles_at_call": len(dynamo_compiles),
        "xla_compilations_in_those_steps": sum(xla_steps[s] for s in steps),
    }
    if call is not None:
        evidence["call_site"] = str(call)
    location = Location.parse(first.site) if first.site else call
    how = "your call of the compiled function"
    if location is not call:
        how = "the line dynamo names in its guard"
    if mismatches:
        evidence["sizes_seen"] = sizes
        evidence["dimension"] = mismatches[0].dim
        evidence["input"] = mismatches[0].tensor
        assigned = _assignment(sources, call, mismatches[0].tensor)
        if assigned is not None:
            location = assigned
            how = "the assignment of the argument whose size changed"
    what = (
        f"{mismatches[0].tensor} dim {mismatches[0].dim} took sizes "
        + " → ".join(map(str, dict.fromkeys(sizes)))
        if mismatches
        else _changed(first.guard)
    )
    return Finding(
        kind=Kind.RECOMPILATION,
        severity=Severity.WARNING,
        title=(
            f"torch.compile recompiled {first.function or 'a function'} "
            f"{len(records)} times: {what}"
        ),
        evidence=evidence,
        location=None if location is None else dataclasses.replace(location, what=how),
        suggestion=ADVICE["dynamo_shapes" if mismatches else "dynamo"],
    )


def _assignment(sources: SourceFiles, call: Location | None, tensor: str) -> Location | None:
    """The line that last assigned the argument ``tensor`` (``args[0]``) of the call at
    ``call``, before it."""
    if call is None:
        return None
    index = _argument_index(tensor)
    line = argument_origin(sources, call.file, call.line, index if index is not None else 0)
    return None if line is None else Location(call.file, line)


def _argument_index(tensor: str) -> int | None:
    """``args[0]`` -> 0; a parameter name (``x``, ``L['x']``) -> None."""
    match = re.match(r"args\[(\d+)\]", tensor)
    return int(match.group(1)) if match else None


def _changed(guard: str | None) -> str:
    """What a guard failure says changed: a Python value the function was specialized on, a
    dtype, or dynamo's words."""
    if not guard:
        return "a guard failed"
    if "dtype" in guard:
        return f"a dtype changed ({guard})"
    match = re.fullmatch(r"(?:L\[')?([\w.]+)(?:'\])? == (.+)", guard)
    if match is not None:
        return (
            f"the Python value {match.group(1)} changed (compiled for {match.group(2)}; "
            "dynamo specializes on it)"
        )
    return guard
