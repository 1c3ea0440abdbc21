"""The ``--json`` document's one schema (``xlaprof.analysis/1``, document version 4), written
and read through the same models.

``xlaprof analyze --json`` checks the document it writes against ``AnalysisDocument``
before writing it where ``$XLAPROF_SELF_CHECK`` is set (the test suite's runs), and a saved
document is read back (``xlaprof.inputs.saved``) only once it passes
``read_document``, so a file someone sent cannot reach the renderers with what the writer
never makes: nesting deeper than ``MAX_DEPTH``, strings, lists or tables past their bounds, a
cell of a type its column does not hold, a column type outside ``DTYPES`` (pandas would
allocate whatever a type string asks for), numbers past a float or not finite, or figures
that cannot be (a step's parts adding to more than the step, a share over 100%).

Pydantic validates the typed parts; the walk in ``read_document`` bounds the rest (the
contract's raw ``reports``, ``debug_events``, ``trace`` and finding evidence), which no
renderer reads cell by cell. Documents of version 1 (no ``document_version``) read the same;
a later version is refused with a line saying so.
"""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from xlaprof.errors import SavedDocumentInvalid
from xlaprof.findings import Coverage, Kind, Severity
from xlaprof.model.document_id import DOCUMENT_VERSION

# Bounds of a saved document: far above what the writer makes (its tables are cut to
# MAX_STEP_ROWS and its lists to a few hundred entries), small enough that a renderer given one
# at the bound still answers in seconds.
MAX_DEPTH = 32
MAX_STRING = 1_000_000
MAX_NAME = 4_096
MAX_LIST = 1_000_000
MAX_TABLE_ROWS = 200_000
MAX_COLUMNS = 512
MAX_TABLES = 64
MAX_PROCESSES = 4_096
# A JSON integer no column or count of the writer's exceeds (int64 and uint64 fit).
MAX_INT = 2**64
# A step's parts may add to more than its wall time by rounding only.
_PARTS_SLACK = 1e-6

# The column types ``frame_to_json`` writes (pandas' names); any other is refused.
DTYPES = frozenset(
    {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "Int8",
        "Int16",
        "Int32",
        "Int64",
        "UInt8",
        "UInt16",
        "UInt32",
        "UInt64",
        "float32",
        "float64",
        "Float32",
        "Float64",
        "bool",
        "boolean",
        "object",
        "str",
        "string",
        "category",
    }
)
_NUMERIC = re.compile(r"^(u?int|U?Int|float|Float)\d+$")

Text = Annotated[StrictStr, Field(max_length=MAX_STRING)]
Name = Annotated[StrictStr, Field(max_length=MAX_NAME)]
Count = Annotated[StrictInt, Field(ge=0, le=MAX_INT)]
Integer = Annotated[StrictInt, Field(ge=-MAX_INT, le=MAX_INT)]
Number = Annotated[StrictFloat | StrictInt, Field(allow_inf_nan=False)]
Seconds = Annotated[StrictFloat | StrictInt, Field(ge=0, allow_inf_nan=False)]
Share = Annotated[StrictFloat | StrictInt, Field(ge=0, le=1, allow_inf_nan=False)]
Cell = StrictBool | Integer | Annotated[StrictFloat, Field(allow_inf_nan=False)] | Text | None
Figure = Number | Text | None | list[Number | Text | None]


def _same_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A device table's rows, each with the first row's columns in its order (the renderers
    lay the table out by them)."""
    if rows:
        columns = list(rows[0])
        for number, row in enumerate(rows):
            if list(row) != columns:
                raise ValueError(f"row {number} has other columns than the first row")
    return rows


# A device table's cell: a number, a name, or a row's largest parts with their shares.
ViewCell = Cell | Annotated[list[tuple[Name, Number]], Field(max_length=MAX_COLUMNS)]
Rows = Annotated[
    list[dict[Name, ViewCell]], Field(max_length=MAX_TABLE_ROWS), AfterValidator(_same_columns)
]


class _Closed(BaseModel):
    """A part of the document whose keys are all known: another key is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class _Open(BaseModel):
    """A part of the contract that later versions may add keys to (bounded by the walk)."""

    model_config = ConfigDict(extra="allow", frozen=True)


class TableDoc(_Closed):
    """A table as ``frame_to_json`` writes it: each column's name and pandas type, and rows of
    cells of those types (None: not measured)."""

    columns: Annotated[list[Name], Field(max_length=MAX_COLUMNS)]
    dtypes: Annotated[list[Name], Field(max_length=MAX_COLUMNS)]
    rows: Annotated[list[list[Cell]], Field(max_length=MAX_TABLE_ROWS)]

    @model_validator(mode="after")
    def _cells_fit(self) -> TableDoc:
        if len(self.dtypes) != len(self.columns):
            raise ValueError(f"{len(self.columns)} columns but {len(self.dtypes)} types")
        unknown = sorted(set(self.dtypes) - DTYPES)
        if unknown:
            raise ValueError(f"column type {unknown[0][:40]!r} is not one xlaprof writes")
        width = len(self.columns)
        for number, row in enumerate(self.rows):
            if len(row) != width:
                raise ValueError(f"row {number} has {len(row)} cells for {width} columns")
            for dtype, cell in zip(self.dtypes, row, strict=True):
                if not _fits(dtype, cell):
                    raise ValueError(f"row {number}: a {type(cell).__name__} in a {dtype} column")
        _possible_steps(self.columns, self.rows)
        return self


def _possible_steps(columns: list[str], rows: list[list[Cell]]) -> None:
    """Refuse a step table's row whose parts (``part_*_s``) are negative or add up to more
    than the step's time (``wall_s``), or whose shares (``*_share``) are outside 0..1."""
    at = {name: index for index, name in enumerate(columns)}
    parts = [i for name, i in at.items() if name.startswith("part_") and name.endswith("_s")]
    shares = [i for name, i in at.items() if name.endswith("_share")]
    wall = at.get("wall_s")
    for number, row in enumerate(rows):
        for index in shares:
            share = row[index]
            if isinstance(share, int | float) and not 0 <= share <= 1:
                raise ValueError(f"row {number}: {columns[index]} {share:g} is not a share")
        values = [v for v in (row[i] for i in parts) if isinstance(v, int | float)]
        if any(v < 0 for v in values):
            raise ValueError(f"row {number}: a part of the step below zero")
        step = None if wall is None else row[wall]
        if isinstance(step, int | float) and sum(values) > step * (1 + _PARTS_SLACK) + 1e-9:
            raise ValueError(
                f"row {number}: the step's parts add up to {sum(values):.6g} s, more than "
                f"the step ({step:.6g} s)"
            )


def _fits(dtype: str, cell: object) -> bool:
    """Whether ``cell`` is a value a ``dtype`` column holds (None: not measured, any column):
    a whole number within an integer column's range, a number in a float column, a bool in a
    bool column; any scalar in an object, string or category column."""
    if cell is None or not (dtype in ("bool", "boolean") or _NUMERIC.match(dtype)):
        return True  # not measured; or an object, str, string or category column
    if dtype in ("bool", "boolean"):
        return isinstance(cell, bool)
    if isinstance(cell, bool) or not isinstance(cell, int | float):
        return False
    kind = dtype.lower()
    if kind.startswith("float"):
        return True
    return _whole_in_range(kind, cell)


def _whole_in_range(kind: str, cell: float) -> bool:
    """Whether ``cell`` is a whole number an integer column of ``kind`` (``int64``,
    ``uint8``, ...) holds."""
    if isinstance(cell, float) and not cell.is_integer():
        return False
    bits = int(kind.removeprefix("u").removeprefix("int"))
    low, high = (
        (0, 2**bits - 1) if kind.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    )
    return bool(low <= cell <= high)


class LocationDoc(_Closed):
    file: Text
    line: Count
    what: Text = ""


class CostDoc(_Closed):
    per_step_s: Seconds | None = None
    one_time_s: Seconds | None = None
    run_s: Seconds | None = None
    steps: Count | None = None
    basis: Text = ""


class FindingDoc(_Closed):
    kind: Kind
    severity: Severity
    title: Text
    location: LocationDoc | None = None
    evidence: dict[Name, Any] = Field(default_factory=dict)
    suggestion: Text = ""
    cost: CostDoc | None = None


class CoverageDoc(_Closed):
    kind: Kind
    status: Coverage
    why: Text | None = None


class WarningDoc(_Closed):
    line: Integer
    text: Text
    reason: Text


class SourceDoc(_Closed):
    path: Text
    kinds: Annotated[list[Name], Field(max_length=64)]
    reports: Count
    debug_events: Count
    warnings: Annotated[list[WarningDoc], Field(max_length=MAX_LIST)]


class SummaryDoc(_Closed):
    compiles: Count | None = None
    executions: Count | None = None
    device_to_host_transfers: Count | None = None
    aten_fallbacks: dict[Name, Count | None] = Field(default_factory=dict)
    steps: Count | None = None


class RunDoc(_Closed):
    path: Text
    schema_: Integer = Field(alias="schema")
    status: Name
    exit_code: Integer | None
    detail: Text | None
    steps_recorded: Count
    device_kind: Name | None
    device_count: Count | None
    rank: Integer | None
    torch_xla_version: Name | None
    traces: Annotated[list[Text], Field(max_length=MAX_LIST)]
    warnings: Annotated[list[Text], Field(max_length=MAX_LIST)]


class StoryDoc(_Closed):
    """The step model's summary (``StepStory``): seconds at least 0, shares at most 1, and a
    median step's parts that add up to no more than the step."""

    steps: Count
    warmup_steps: Count
    steady_steps: Count
    warmup_compile_s: Seconds | None = None
    later_compile_steps: list[Integer] = Field(default_factory=list, max_length=MAX_LIST)
    later_compile_s: Seconds | None = None
    median_step: Integer | None = None
    median_wall_s: Seconds | None = None
    parts: dict[Name, Seconds | None] = Field(default_factory=dict)
    device_busy_s: Seconds | None = None
    bound: Name | None = None
    bound_share: Share | None = None
    bound_steps: dict[Name, Count] = Field(default_factory=dict)
    worth_most: FindingDoc | None = None
    worth_most_answer: Text | None = None
    median_source: Name | None = None
    unattributed_s: Seconds | None = None
    part_sources: dict[Name, Text] = Field(default_factory=dict)
    traced_steps: list[Integer] = Field(default_factory=list, max_length=MAX_LIST)
    traced_compile_steps: list[Integer] = Field(default_factory=list, max_length=MAX_LIST)
    worth_most_basis: Text | None = None
    host_xla_busy_s: Seconds | None = None
    host_wall_s: Seconds | None = None
    host_cpu_s: Seconds | None = None
    host_measure: Name | None = None
    host_blocked_s: Seconds | None = None
    host_cpu_wait_s: Seconds | None = None
    transfer_s: Seconds | None = None
    overlap_s: Seconds | None = None
    queue_s: Seconds | None = None
    ahead_max: Count | None = None
    ahead_median: Seconds | None = None
    drain_s: Seconds | None = None
    untimed_steps: Count | None = None
    lost_executions: Count | None = None

    @model_validator(mode="after")
    def _possible(self) -> StoryDoc:
        if self.steady_steps > self.steps:
            raise ValueError(f"{self.steady_steps} steady steps of {self.steps}")
        wall = self.median_wall_s
        if wall is not None:
            parts = {k: v for k, v in self.parts.items() if v is not None}
            total = sum(parts.values())
            if total > wall * (1 + _PARTS_SLACK) + 1e-9:
                raise ValueError(
                    f"the median step's parts add up to {total:.6g} s, more than the step "
                    f"({wall:.6g} s)"
                )
        return self


class CountsDoc(_Closed):
    steps: Count | None
    compiles: Count | None
    executions: Count | None
    device_to_host_transfers: Count | None
    aten_fallbacks: dict[Name, Count | None]
    fallbacks_named: Text
    measured: StrictBool
    warmup_steps: Count


class TracedStepsDoc(_Closed):
    bound: Name
    steps: Count
    known: Count
    lazy: StrictBool
    median_busy_s: Seconds | None
    median_tracing_s: Seconds | None
    median_idle_s: Seconds | None

    @model_validator(mode="after")
    def _possible(self) -> TracedStepsDoc:
        if self.steps > self.known:
            raise ValueError(f"{self.steps} steps of {self.known} with a bound")
        return self


class DeviceViewDoc(_Closed):
    """The device section: its rows as numbers (a document of version 2 or older: as text)
    and what its notes say as facts (version 3 or older: its notes as text, ``where`` to
    ``verdict``); a duty cycle over 100% cannot be and is refused."""

    session: Text | None
    warnings: Annotated[list[Text], Field(max_length=MAX_LIST)]
    devices: Rows
    steps: Rows
    ops: Rows
    bottleneck_devices: Rows
    bottlenecks: Rows
    lines: Rows
    tracing: Rows
    tracing_hidden: Count
    hosts: Count = 0
    host: Name | None = None
    sessions: Annotated[list[Name], Field(max_length=MAX_LIST)] = Field(default_factory=list)
    capture_file: Text | None = None
    capture_files: Count = 0
    events: Count = 0
    device_count: Count = 0
    host_cpu: StrictBool = False
    device_kinds: Annotated[list[tuple[Name, Count]], Field(max_length=MAX_LIST)] = Field(
        default_factory=list
    )
    step_fallback: Literal["module executions", "whole capture"] | None = None
    autotune_kernels: Count | None = None
    autotune_s: Seconds | None = None
    autotune_steps: Annotated[list[Integer], Field(max_length=9)] = Field(default_factory=list)
    bottleneck_hidden: Count = 0
    line_coverage: Share | None = None
    tracing_lazy: StrictBool = False
    traced: TracedStepsDoc | None = None
    # version 3 or older: the notes as text
    where: Text | None = None
    meta: Text | None = None
    capture: Text | None = None
    device_types: Text | None = None
    step_note: Text | None = None
    autotune_note: Text | None = None
    bottleneck_note: Text | None = None
    line_note: Text | None = None
    tracing_title: Text | None = None
    verdict: Text | None = None

    @model_validator(mode="after")
    def _possible(self) -> DeviceViewDoc:
        for table in (
            self.devices,
            self.steps,
            self.ops,
            self.bottleneck_devices,
            self.bottlenecks,
            self.lines,
            self.tracing,
        ):
            if not table or all(isinstance(v, str) for v in table[0].values()):
                continue  # rows saved as text (version 2 or older): shown as they are
            for number, row in enumerate(table):
                for key, value in row.items():
                    if not _view_cell_fits(key, value):
                        raise ValueError(
                            f"device row {number}: {key[:40]!r} holds a {type(value).__name__}"
                        )
        for row in self.devices:
            value = row.get("duty")
            duty = _percent(value) if isinstance(value, str) else _hundredfold(value)
            if duty is not None and duty > 100.0 + 1e-6:
                name = str(row.get("device", "?"))[:40]
                raise ValueError(f"device {name!r} busy {duty:g}% of its span")
        return self


# The device view's columns by what they hold (``tables.device.view``): whole numbers, other
# numbers, and a row's largest parts; every other column holds a name. None: not measured. A
# table of text (a document of version 2 or older) holds text in every column.
_VIEW_COUNTS = frozenset({"occurrences", "steps", "step", "line", "slowest_step"})
_VIEW_NUMBERS = frozenset({"duty", "share", "flops_per_s", "bytes_per_s"})
_VIEW_PARTS = frozenset({"categories", "split"})


def _view_cell_fits(key: str, value: object) -> bool:
    """Whether a device row's ``value`` is of the kind its column ``key`` holds."""
    if value is None:
        return True  # not measured
    if isinstance(value, bool):
        return False
    if key in _VIEW_PARTS:
        return isinstance(value, list)
    if key in _VIEW_COUNTS:
        return isinstance(value, int)
    if key in _VIEW_NUMBERS or key.endswith("_s"):
        return isinstance(value, int | float)
    return isinstance(value, str)


def _hundredfold(share: object) -> float | None:
    """A share of one as a percentage (None for anything but a number)."""
    if isinstance(share, int | float) and not isinstance(share, bool):
        return float(share) * 100.0
    return None


def _percent(text: str | None) -> float | None:
    """A cell such as ``10.1%`` as a number (None for another text)."""
    if text is None or not text.endswith("%"):
        return None
    try:
        return float(text[:-1])
    except ValueError:
        return None


class HostViewDoc(_Closed):
    source: Text
    device_planes: StrictBool
    measured: list[Name] = Field(max_length=MAX_COLUMNS)
    warmup_steps: list[Integer] = Field(max_length=MAX_LIST)
    steady_steps: list[Integer] = Field(max_length=MAX_LIST)
    median_step: Integer | None
    hottest: dict[Name, dict[Text, Seconds]]


class CompileSummaryDoc(_Closed):
    rank: Integer | None
    ranks: Count
    compiles: Count
    recompiles: Count
    graph_breaks: Count
    seconds: Seconds | None
    cache_hits: Count | None
    cache_misses: Count | None
    failed: Count
    failed_kinds: list[Name] = Field(max_length=MAX_LIST)


class HostActivityDoc(_Closed):
    source: Text
    device_planes: StrictBool


class StepCountDoc(_Closed):
    step: Integer
    compiles: Count
    compile_s: Seconds
    reads: Count
    scalar_reads: Count
    fallback_calls: Count


class CheckDoc(_Closed):
    steps: Annotated[list[StepCountDoc], Field(max_length=MAX_TABLE_ROWS)]
    has_reports: StrictBool
    report_compile_s: Seconds | None
    logged_compilations: Count
    graph_hashes: Count
    all_hashed: StrictBool
    run_path: Text | None
    run_status: Name | None


# The columns each renderer reads of its table (the figures' ``PartResult.frames``, written as
# ``frame:NAME``, and the timeline): a table with rows but without them cannot be shown.
RENDERED_COLUMNS = {
    "frame:device_steps": {"device", "step", "busy_s", "idle_s"},
    "frame:device_ops": {"name", "total_s", "occurrences", "devices"},
    "frame:host_steps": {"host", "device", "step", "wall_ms"},
    "frame:compiles": {"step", "cause", "location", "graph_hash"},
    "frame:regions": {"name", "seconds"},
    "frame:steps": {"step"},
    # the step timeline: the console's columns, its "from" (source) and what the step model
    # reads of an older document's rows (``inputs.saved``)
    "timeline": {
        "step",
        "source",
        "wall_s",
        "host_wall_s",
        "python_tracing_s",
        "compile_s",
        "graph_build_s",
        "transfer_s",
        "device_wait_s",
        "device_busy_s",
        "queue_s",
    },
}


class SteadyDoc(_Closed):
    """The steady step (``SteadyStep``): how many, the warm-up, the median one and its row's
    figures (seconds, and how many steps ahead the host was)."""

    steps: Count
    warmup_steps: Count
    median_step: Integer
    median_s: Annotated[dict[Name, Number | None], Field(max_length=MAX_COLUMNS)]
    bound: Name | None = None


class ViewDoc(_Closed):
    """What the renderers read beyond the contract's keys (``PartResult.view_json``)."""

    name: Name | None = None
    trace_path: Text | None = None
    trace_only: StrictBool = False
    counts: CountsDoc | None = None
    devices: DeviceViewDoc | None = None
    figures: dict[Name, Figure] = Field(default_factory=dict)
    tables: Annotated[dict[Name, TableDoc], Field(max_length=MAX_TABLES)] = Field(
        default_factory=dict
    )
    host_activity: HostActivityDoc | None = None
    host_view: HostViewDoc | None = None
    compile_summary: CompileSummaryDoc | None = None
    check: CheckDoc | None = None
    steady: SteadyDoc | None = None
    processes: list[Name] = Field(default_factory=list, max_length=MAX_PROCESSES)
    notes: list[Text] = Field(default_factory=list, max_length=MAX_LIST)
    # set where this document was itself written from a saved one: the file then read
    read_from: Text | None = None

    @model_validator(mode="after")
    def _host_tables(self) -> ViewDoc:
        if self.host_activity is not None and not {"host_activity", "host_hot"} <= set(self.tables):
            raise ValueError("host_activity without its host_activity and host_hot tables")
        for name, needed in RENDERED_COLUMNS.items():
            table = self.tables.get(name)
            if table is not None and table.rows and not needed <= set(table.columns):
                missing = ", ".join(sorted(needed - set(table.columns)))
                raise ValueError(f"table {name} has rows but not its column(s) {missing}")
        return self


class KeptRowsDoc(_Closed):
    total: Count
    kept: Count
    first_step: Integer | None
    last_step: Integer | None
    chosen: Text
    summary: dict[Name, Any] | None = None

    @model_validator(mode="after")
    def _possible(self) -> KeptRowsDoc:
        if self.kept > self.total:
            raise ValueError(f"{self.kept} rows kept of {self.total}")
        return self


class PartDocument(_Open):
    """One part's document (the whole document of one part, or one of ``processes``)."""

    schema_: Literal["xlaprof.analysis/1"] = Field(alias="schema")
    document_version: Annotated[StrictInt, Field(ge=1, le=DOCUMENT_VERSION)] | None = None
    sources: Annotated[list[SourceDoc], Field(max_length=MAX_LIST)]
    reports: Annotated[list[dict[Name, Any]], Field(max_length=MAX_LIST)]
    debug_events: Annotated[list[dict[Name, Any]], Field(max_length=MAX_LIST)]
    summary: SummaryDoc
    findings: Annotated[list[FindingDoc], Field(max_length=MAX_LIST)]
    analyzers: Annotated[list[CoverageDoc], Field(max_length=256)] = Field(default_factory=list)
    view: ViewDoc | None = None
    run: RunDoc | None = None
    story: StoryDoc | None = None
    rows_kept: dict[Name, KeptRowsDoc] | None = None
    summaries: dict[Name, dict[Name, Any] | None] | None = None


class AnalysisDocument(PartDocument):
    """The whole ``--json`` document: one part's, or several processes' merged."""

    processes: Annotated[list[PartDocument], Field(max_length=MAX_PROCESSES)] | None = None


def _bounded(document: object, where: str) -> None:
    """Refuse nesting past ``MAX_DEPTH``, numbers past ``MAX_INT`` or not finite, and strings
    or lists past their bounds, anywhere in ``document`` (iteratively: no recursion)."""
    stack: list[tuple[object, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SavedDocumentInvalid(f"{where}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            too_long = [key for key in value if len(key) > MAX_NAME]
            if too_long:
                raise SavedDocumentInvalid(f"{where}: a key of {len(too_long[0])} characters")
            items: list[object] = list(value.values())
        elif isinstance(value, list):
            items = value
        else:
            _scalar(value, where)
            continue
        if len(items) > MAX_LIST:
            raise SavedDocumentInvalid(f"{where}: a list or object of {len(items)} items")
        for item in items:
            if isinstance(item, dict | list):
                stack.append((item, depth + 1))
            else:
                _scalar(item, where)


def _scalar(value: object, where: str) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        if abs(value) > MAX_INT:
            digits = str(value)[:20]
            raise SavedDocumentInvalid(f"{where}: an integer past any column's ({digits}…)")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise SavedDocumentInvalid(f"{where}: a number that is not finite")
    elif isinstance(value, str) and len(value) > MAX_STRING:
        raise SavedDocumentInvalid(f"{where}: a string of {len(value)} characters")


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def parse_document(raw: bytes, where: str) -> dict[str, Any]:
    """The JSON object in ``raw``, bounded (``_bounded``) and valid against
    ``AnalysisDocument``; ``SavedDocumentInvalid`` (one line, its own exit code) otherwise."""
    try:
        # digits past 4300 are refused by the int parser itself (Python's int_max_str_digits)
        document = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise SavedDocumentInvalid(f"{where}: nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise SavedDocumentInvalid(f"{where}: not JSON ({_first_line(str(error))})") from None
    if not isinstance(document, dict):
        raise SavedDocumentInvalid(f"{where}: not a JSON object")
    version = document.get("document_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > DOCUMENT_VERSION:
        raise SavedDocumentInvalid(
            f"{where}: document version {version} was written by a later xlaprof (this one "
            f"reads up to {DOCUMENT_VERSION}); upgrade, or analyze the run again"
        )
    _bounded(document, where)
    check_document(document, where)
    return document


def check_document(document: dict[str, Any], where: str) -> None:
    """Raise ``SavedDocumentInvalid`` unless ``document`` fits ``AnalysisDocument`` (the writer
    checks its own output with this too)."""
    try:
        AnalysisDocument.model_validate(document)
    except ValidationError as error:
        raise SavedDocumentInvalid(f"{where}: {_problem(error)}") from None


def _problem(error: ValidationError) -> str:
    """The first of a validation error's problems, in one line: where and what."""
    first = error.errors(include_url=False, include_input=False)[0]
    path = ".".join(str(p) for p in first["loc"]) or "the document"
    more = error.error_count() - 1
    tail = f" (and {more} more)" if more else ""
    return _first_line(f"{path}: {first['msg']}{tail}")[:300]


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else text
