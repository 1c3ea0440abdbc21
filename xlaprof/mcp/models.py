"""What each tool returns, as typed models: their JSON schemas are the tools' output schemas.

The fields are the keys of the ``--json`` documents (docs/json-format.md), taken as the
documents have them: a model only declares and describes them, it converts no number. Models
allow extra keys, so a key the analysis adds to a document (a new column, a new evidence item)
reaches the agent without a change here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Row = dict[str, Any]


class Open(BaseModel):
    """A model that keeps keys it does not declare (the documents may grow)."""

    model_config = ConfigDict(extra="allow")


# -- list_inputs --------------------------------------------------------------------------------
class InputEntry(BaseModel):
    path: str = Field(description="Absolute path: pass it to analyze and the other tools.")
    kind: Literal["run", "capture", "capture_logdir", "log", "saved_result"] = Field(
        description="run: a run directory of `xlaprof run` (or a folder of process runs); "
        "capture: a .xplane.pb or *trace.json(.gz) file; capture_logdir: a folder with "
        "plugins/profile/<session>/; log: a text file with a metrics report or PT_XLA_DEBUG "
        "output; saved_result: a document saved by `xlaprof analyze --json`, read back as "
        "it was (nothing measured again)."
    )
    size_bytes: int = Field(description="Bytes of every file in it.")
    files: int = Field(description="Files in it.")
    modified: str = Field(description="Latest change of a file in it (local time, ISO 8601).")
    processes: list[str] | None = Field(
        default=None, description="run: the process runs in it (one folder each)."
    )
    status: str | None = Field(
        default=None, description="run: how the process run(s) ended (ok, failed, killed...)."
    )
    steps: int | None = Field(
        default=None, description="run: steps recorded, summed over its processes."
    )
    contents: list[str] | None = Field(
        default=None, description="log: what it holds (metrics_report, debug_log)."
    )


class ListOutput(BaseModel):
    roots: list[str] = Field(description="The folders this server may read.")
    total: int = Field(description="Entries found.")
    offset: int
    next_offset: int | None = Field(description="Pass as offset for the next page; null: none.")
    truncated: bool = Field(
        description="The walk stopped before seeing everything: list a folder inside."
    )
    entries: list[InputEntry]


# -- analyze ------------------------------------------------------------------------------------
class Location(BaseModel):
    file: str
    line: int
    what: str = Field(
        default="", description="What the line is to the finding (the read, the loop, ...)."
    )


class FindingOut(Open):
    kind: str = Field(
        description="The finding kind: explain_finding says what it reads, its thresholds and "
        "how to fix it."
    )
    severity: Literal["info", "warning", "error"]
    title: str
    location: Location | None = Field(
        description="The user's own source line the finding is about, when known."
    )
    evidence: dict[str, Any] = Field(description="The numbers behind the finding.")
    suggestion: str = Field(description="What to do about it.")


class Summary(Open):
    compiles: int | None = Field(description="Compilations (null: not measured).")
    executions: int | None = Field(description="Graph executions.")
    device_to_host_transfers: int | None
    aten_fallbacks: dict[str, int | None] = Field(description="aten:: ops run on the CPU.")
    steps: int | None


class SourceOut(Open):
    path: str
    kinds: list[str]
    reports: int
    debug_events: int
    warnings: list[Row] = Field(description="Lines that could not be read (the first 5).")
    warnings_total: int


class TraceOverview(Open):
    path: str | None
    session: str = Field(description="The profiling session read ('' for a lone file).")
    sessions: list[str] = Field(description="Every session found; pass one as session=.")
    hosts: list[str]
    files_total: int
    warnings: list[str] = Field(description="Capture files skipped, and why.")
    devices: list[Row] = Field(
        description="Per device over the capture (first 16): kind, span_s, busy_s, idle_s, "
        "duty and seconds per op category. device_ops has them all."
    )
    devices_total: int
    top_ops: list[Row] = Field(
        description="Ops summed over devices, most total time first (first 10): name, "
        "category, devices, occurrences, total_s, self_s, flops, bytes_accessed."
    )


class AnalyzeOutput(BaseModel):
    schema_: str = Field(alias="schema", description="The --json document's schema.")
    path: str
    processes: list[str] = Field(description="The parts analyzed (process runs, or one).")
    process: str | None = Field(description="The process shown, when one was chosen.")
    notes: list[str] = Field(description="What to know about this answer.")
    summary: Summary
    findings: list[FindingOut] = Field(description="Most severe first.")
    findings_total: int = Field(description="Findings before the cut at max_findings.")
    run: Row | None = Field(
        description="A run directory: status, exit code, steps, device, warnings."
    )
    trace: TraceOverview | None = Field(description="A capture, or a run's trace window.")
    tables: dict[str, int] = Field(
        description="Rows of each per-step and per-op table: page through them with steps "
        "(timeline, device_steps, tracing, stragglers, host_steps, host_skew) and device_ops "
        "(ops, top_ops)."
    )
    sources: list[SourceOut]

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


# -- steps / device_ops -------------------------------------------------------------------------
class SteadyState(BaseModel):
    steps: int = Field(description="Steady steps: after warm-up, compiling nothing.")
    warmup_steps: int
    median_step: int | None = Field(
        default=None, description="The steady step of median wall time (its parts add up)."
    )
    median_s: dict[str, float | None] = Field(
        description="That step's seconds per timeline column (null: not measured)."
    )
    bound: str | None = Field(
        default=None,
        description="That step's largest part: compile, tracing, input, transfer, device, host.",
    )


class TableOutput(BaseModel):
    path: str
    process: str | None
    table: str
    notes: list[str]
    total: int = Field(description="Rows in the whole table (after the host/device filter).")
    offset: int
    next_offset: int | None = Field(description="Pass as offset for the next page; null: none.")
    rows: list[Row]


class StepsOutput(TableOutput):
    steady: SteadyState | None = Field(
        description="timeline: the steady state (median of steps after warm-up)."
    )
    verdict: str | None = Field(
        description="What bounds the steps, from the trace (tracing-, host- or device-bound)."
    )


class DeviceOpsOutput(TableOutput):
    devices: list[Row] = Field(
        description="Each device over the capture (filtered by host/device): span_s, busy_s, "
        "idle_s, duty and seconds per op category."
    )


# -- compare / check / explain ------------------------------------------------------------------
class CompareOutput(Open):
    schema_: str = Field(alias="schema")
    before: str
    after: str
    comparison: list[Row] = Field(
        description="One row per figure: before, after and their ratio (after / before)."
    )
    findings_disappeared: list[str]
    findings_appeared: list[str]
    notes: list[str]

    model_config = ConfigDict(extra="allow", populate_by_name=True, serialize_by_alias=True)


class CheckOutput(Open):
    schema_: str = Field(alias="schema")
    ok: bool = Field(description="Every budget of every run holds.")
    summary: str
    runs: list[Row] = Field(
        description="Per process run: its budgets, each with status (pass, fail, unmeasured, "
        "skipped), value, limit, unit, what was measured, evidence and the findings that "
        "explain a failure."
    )

    model_config = ConfigDict(extra="allow", populate_by_name=True, serialize_by_alias=True)


class ExplainOutput(BaseModel):
    kind: str
    module: str = Field(description="The analyzer's module.")
    summary: str = Field(description="The analyzer module's own description.")
    page: str | None = Field(
        description="Its page in docs/analyzers/ (markdown): what it reads, when it fires, the "
        "fix; null where the docs are not installed."
    )
    page_path: str | None
    constants: dict[str, Any] = Field(
        description="The thresholds as the analyzer has them now (units in their names)."
    )


# -- run_script / bench_fix ---------------------------------------------------------------------
class RunOutput(BaseModel):
    command: list[str]
    exit_code: int | None = Field(description="The command's exit code (null: timed out).")
    timed_out: bool
    seconds: float
    out: str = Field(description="The folder it wrote.")
    output_tail: str = Field(description="The end of its stdout and stderr.")
    analysis: AnalyzeOutput | None = Field(description="The run analyzed, when one was written.")


class BenchOutput(BaseModel):
    command: list[str]
    exit_code: int | None = Field(description="The command's exit code (null: timed out).")
    timed_out: bool
    seconds: float
    out: str
    output_tail: str
    result: Row | None = Field(
        description="`xlaprof bench ... --json`: before and after side by side, the numerical "
        "check, notes."
    )
