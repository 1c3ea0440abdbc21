"""Terminal rendering of an analysis: a summary table and the findings, most severe first."""

from __future__ import annotations

from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from xlaprof import escape
from xlaprof.findings import Coverage, Finding, KindCoverage, Severity
from xlaprof.model.parts import SourceInfo
from xlaprof.model.result import UNATTRIBUTED, AnalysisResult, PartResult, RunComparison, StepStory
from xlaprof.model.warmup import first_steady_of
from xlaprof.parse.units import NOT_MEASURED, format_bytes, format_seconds, missing
from xlaprof.report.base import RenderOptions
from xlaprof.report.devices import device_words
from xlaprof.report.words import BOUND_WORDS, PART_WORDS

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
# Evidence worth a line of its own; the rest is one compact line (all of it is in --json).
_HEADLINE_EVIDENCE = (
    ("what_changed", "what changed"),
    ("layer_stack", "layer stack"),
    ("loop", "loop"),
    ("source_line", "source line"),
    ("bench_command", "measure the fix"),
    ("bench_commands", "measure the fixes"),
)
_HEADLINE_KEYS = {key for key, _ in _HEADLINE_EVIDENCE}
_VERBOSE_ONLY = {"graph_hashes", "inputs", "first_difference", "block_source_lines"}
# Evidence past this many characters is left to --json, whole items at a time: a key or a
# number is never cut.
_MAX_EVIDENCE_CHARS = 300


NOT_CAPTURED = "not captured"


def evidence_line(items: list[str], limit: int = _MAX_EVIDENCE_CHARS) -> str:
    """``key=value`` items joined, whole items only up to ``limit`` characters, then a count."""
    shown: list[str] = []
    length = 0
    for item in items:
        if shown and length + len(item) + 2 > limit:
            rest = len(items) - len(shown)
            return "; ".join(shown) + f"; … {rest} more in --json"
        shown.append(item)
        length += len(item) + 2
    return "; ".join(shown)


def _fmt(value: Any) -> str:
    if missing(value):
        return NOT_MEASURED
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        shown = ", ".join(_fmt(v) for v in value[:8])
        return f"[{shown}{', …' if len(value) > 8 else ''}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in list(value.items())[:8]) + "}"
    return str(value)


# The width of output that is not a terminal (a file, a pipe): wide enough that no line is
# wrapped, so text that tools read (grep, an agent, CI logs) keeps one line per line.
UNWRAPPED_WIDTH = 100_000


def console_for(out: TextIO, options: RenderOptions) -> Console:
    """The console to write ``out`` with: ``options.width`` where given, else a terminal's own
    width, else (a file or a pipe) ``options.file_width`` where set, else no wrapping."""
    width = options.width
    if width is None and not (hasattr(out, "isatty") and out.isatty()):
        width = options.file_width or UNWRAPPED_WIDTH
    return escape.safe_console(file=out, width=width)


def _rule(console: Console, name: str) -> None:
    """A part's heading line: rich's rule at a terminal, a short plain one elsewhere."""
    if console.width < UNWRAPPED_WIDTH:
        console.rule(Text(name))
    else:
        console.print(Text(f"── {name} ──"))


def write_analysis(result: AnalysisResult, out: TextIO, options: RenderOptions) -> None:
    """Each part's summary, step timeline and findings, for a person at a terminal."""
    console = console_for(out, options)
    for part in result.parts:
        if len(result.parts) > 1:
            _rule(console, escape.terminal(part.part.name))
        _render_part(console, part, options.verbose)


def write_comparison(comparison: RunComparison, out: TextIO, options: RenderOptions) -> None:
    """``xlaprof diff``: the figures side by side, then the findings that went and came."""
    console = console_for(out, options)
    comparison_table(
        console,
        comparison.table,
        escape.terminal(f"xlaprof diff {comparison.before} {comparison.after}"),
    )
    for title in comparison.gone:
        console.print(Text.assemble(("gone: ", "green"), escape.terminal(title)))
    for title in comparison.came:
        console.print(Text.assemble(("new: ", "red"), escape.terminal(title)))
    if not comparison.gone and not comparison.came:
        console.print("findings: the same in both runs")


def _render_part(console: Console, result: PartResult, verbose: bool) -> None:
    """One part: where it came from, the story of its steps, the tables, then the findings."""
    sources = _header(console, result)
    _story(console, result.story, result.host_view is not None)
    _counts(console, result)
    if result.timeline is not None and len(result.timeline):
        _timeline(console, result, 2 if result.counts is None else result.counts.warmup_steps)
    if result.stragglers is not None and len(result.stragglers):
        line = stragglers_line(_summary(result, "stragglers"))
        if line is not None:
            console.print(line, highlight=False)
            console.print()
    elif result.host_skew is not None and len(result.host_skew):
        _skew(console, _summary(result, "host_skew"))
    if result.devices is not None and result.host_activity is None:
        from xlaprof.report.devices import render_console

        render_console(console, result.devices)
    from xlaprof.report import host

    host.render_console(console, result)
    _findings(console, result)
    _coverage(console, result.analyzers, verbose)
    _notes(console, sources, verbose)


def _header(console: Console, result: PartResult) -> list[SourceInfo]:
    """The part's first line(s): the run, the capture or the files read; the sources whose
    notes and unreadable lines are still to be said."""
    part = result.part
    run = part.run_summary
    lead = ("xlaprof analyze ", "bold")
    if result.read_from is not None:  # the file read first; the input it was made from after
        console.print(
            Text.assemble(lead, escape.terminal(result.read_from), SAVED_WORDS), highlight=False
        )
        lead = (MADE_FROM, "")
    if run is not None:
        console.print(
            Text.assemble(
                lead,
                escape.terminal(run.path),
                f"  (run: {run.steps_recorded} steps, ended {run.status}"
                + (f", exit code {run.exit_code}" if run.exit_code is not None else "")
                + (f", {run.device_kind} x{run.device_count}" if run.device_kind else "")
                + ")",
            )
        )
        for warning in run.warnings:
            console.print(Text(f"note: {escape.terminal(warning)}", style="yellow"))
        return []
    if result.trace_only and result.devices is not None:  # a capture: what it holds
        capture = escape.terminal(device_words(result.devices).capture)
        console.print(Text.assemble(lead, capture))
        return []
    for source in part.sources:
        what = (
            "a torch.compile structured trace (TORCH_TRACE)"
            if source.kinds == ["torch_trace"]
            else f"{', '.join(source.kinds)}; {source.reports} metrics report(s), "
            f"{source.debug_events} debug event(s)"
        )
        path = escape.terminal(source.path)
        console.print(Text.assemble(lead, path, f"  ({what})"))
    return part.sources


# How the header says that a result was read back from a saved document, not measured.
SAVED_WORDS = "  (a saved result: nothing was measured again)"
MADE_FROM = "  made from "


def story_lines(story: StepStory | None, host_table: bool = False) -> list[str]:
    """The story a report opens with, as plain lines (the console and HTML both show them):
    how many steps warmed up and what that cost, where the median steady step's time went
    (its measured parts, then what is unattributed), what bounds the steady steps, whether
    the trace window held a compile, and the one change worth most and how it was ranked.
    ``host_table``: the part has a host table (a capture without device planes), which the
    story points to where the step model measured no part."""
    if story is None or not story.steps:
        return []
    lines = []
    warm = f"{story.warmup_steps} warm-up step(s)"
    if story.warmup_compile_s:
        warm += f" ({format_seconds(story.warmup_compile_s)} compiling)"
    if story.median_step is None:
        lines.append(
            f"{story.steps} step(s): {warm}, no steady step (after warm-up, compiling "
            "nothing) to say where a step's time goes."
        )
    else:
        lines.extend(_median_step_lines(story, warm))
        if host_table and not any(v for k, v in story.parts.items() if k != UNATTRIBUTED):
            lines.append(
                "  the step model's parts need the lazy-tensor runtime's events, which this "
                "capture lacks: the host table below splits each step by what the host did"
            )
    if story.later_compile_steps:
        steps = ", ".join(str(s) for s in story.later_compile_steps[:8])
        more = ", …" if len(story.later_compile_steps) > 8 else ""
        lines.append(
            f"Compiled again after warm-up in step(s) {steps}{more}"
            + (f" ({format_seconds(story.later_compile_s)})" if story.later_compile_s else "")
        )
    if story.traced_compile_steps and not host_table:  # (a host table has no device tables)
        compiled = ", ".join(str(s) for s in story.traced_compile_steps[:8])
        lines.append(
            f"The trace window (step(s) {_span(story.traced_steps)}) holds a compile in step(s) "
            f"{compiled}: its device tables below include compiling, not only steady steps."
        )
    finding = story.worth_most
    if finding is not None:
        where = f" at {finding.location.described()}" if finding.location is not None else ""
        lines.append(f"Worth most: [{finding.kind.value}] {finding.title}{where}")
        if story.worth_most_basis:
            lines.append(f"  why this one: {story.worth_most_basis}")
    return lines


def _median_step_lines(story: StepStory, warm: str) -> list[str]:
    """The median steady step: its measured parts, largest first, each with its share; the
    unattributed rest, said as such; and its largest measured part."""
    traced = ", traced" if story.median_source == "trace" else ""
    lines = [
        f"{story.steps} steps: {warm}, {story.steady_steps} steady. The median steady step "
        f"(step {story.median_step}{traced}) took {format_seconds(story.median_wall_s)}:"
    ]
    wall = story.median_wall_s or 0.0
    measured = sorted(
        (
            (name, seconds)
            for name, seconds in story.parts.items()
            if seconds and name != UNATTRIBUTED
        ),
        key=lambda item: -item[1],
    )
    shown = [
        f"{PART_WORDS.get(name, name)} {format_seconds(seconds)}"
        + (f" ({seconds / wall:.0%})" if wall else "")
        for name, seconds in measured
    ]
    # the run-queue wait qualifies the host's wall time where Linux measures it; a source
    # without it (a trace, another system) is not short of a part of the step's work
    not_measured = [
        PART_WORDS[name]
        for name, seconds in story.parts.items()
        if seconds is None and name != "cpu_wait"
    ]
    if shown:
        lines.append("  measured: " + ", ".join(shown))
    rest = story.unattributed_s
    if rest and wall and rest >= 0.005 * wall:
        lines.append(
            f"  unattributed: {format_seconds(rest)} ({rest / wall:.0%}): time no measured "
            "part covers; not a cause"
            + (f" (not measured here: {', '.join(not_measured)})" if not_measured else "")
        )
    elif not_measured:
        lines.append(f"  not measured: {', '.join(not_measured)}")
    busy = story.host_xla_busy_s
    if busy:  # a document saved by an older xlaprof
        lines.append(
            f"  the host CPU ran XLA ops for {format_seconds(busy)} in it (the timeline's "
            "device busy): the capture has no device plane, so that is host work, not a wait "
            "on a device"
        )
    lines.extend(_host_lines(story))
    if story.bound is not None:
        count = story.bound_steps.get(story.bound, 0)
        line = (
            f"  Largest measured part: {BOUND_WORDS.get(story.bound, story.bound)}"
            f" (in {count} of {story.steady_steps} steady steps)"
        )
        # the median step's bound is the headline's; where more steady steps have another,
        # that is said beside it, so the headline never contradicts the steps' own counts
        most, most_count = max(story.bound_steps.items(), key=lambda kv: kv[1], default=("", 0))
        lines.append(line)
        if most != story.bound and most_count > count:
            lines.append(
                f"  In more steady steps ({most_count} of {story.steady_steps}) the largest part "
                f"is {BOUND_WORDS.get(most, most)}"
            )
    return lines


def _host_lines(story: StepStory) -> list[str]:
    """How the host's side of the median step compares with its time in the run
    (``_host_said``); how far the host ran ahead, and the run's final drain."""
    lines = []
    said = _host_said(story)
    if said:
        lines.append("  host: " + "; ".join(said))
    if story.ahead_max:
        median = story.ahead_median
        typical = f" (a median {median:g} in steady steps)" if median is not None and median else ""
        steps = "step" if story.ahead_max == 1 else "steps"
        # with executions' samples lost the count is the fewest the timeline allows
        most = "at least" if story.lost_executions else "up to"
        lines.append(
            f"  The host was {most} {story.ahead_max} {steps} ahead of the device{typical}: a "
            "step's sync returned before its graph ran, so a step's time runs until the device "
            "finished it"
        )
    if story.drain_s:
        lines.append(
            f"  After the last step's sync the device took {format_seconds(story.drain_s)} "
            "more to finish the steps still queued (in those steps' times)"
        )
    if story.untimed_steps:
        lines.append("  " + _untimed(story.untimed_steps, story.lost_executions or 0))
    return lines


def _untimed(steps: int, lost: int) -> str:
    """Why some steps past warm-up have no time (left out of the median and the verdict)."""
    which = "1 step" if steps == 1 else f"{steps} steps"
    if lost:
        runs = "1 execution" if lost == 1 else f"{lost} executions"
        why = (
            f"torch_xla's window of ExecuteTime samples dropped {runs} before xlaprof read "
            "them (a larger XLA_METRICS_SAMPLES keeps them)"
        )
    else:
        why = "their graphs were never seen completing (the run ended before the device did)"
    return f"{which} past warm-up have no time in the run, left out of the median: {why}"


def _host_said(story: StepStory) -> list[str]:
    """The host's side of the median step: when its sync returned, its CPU time, the time it
    was blocked on the device or waiting for a CPU, its transfers, and the work hidden under
    the other side's (each where measured; the small ones left out)."""
    said = []
    wall = story.median_wall_s or 0.0
    if story.host_wall_s is not None:
        said.append(f"{format_seconds(story.host_wall_s)} from the previous step's sync to its own")
    if story.host_cpu_s is not None and story.host_measure == "spans":
        said.append(
            f"the stepping thread's runtime spans {format_seconds(story.host_cpu_s)} of wall "
            "time (a capture has no CPU clock: untraced Python is not in it)"
        )
    elif story.host_cpu_s is not None:
        said.append(f"the stepping thread's CPU {format_seconds(story.host_cpu_s)}")
    if story.host_blocked_s:
        said.append(f"blocked in its sync {format_seconds(story.host_blocked_s)}")
    waited = story.host_cpu_wait_s
    if waited and waited >= 0.01 * wall:
        # the measured line above gives the part of the step's time the wait took; where it
        # is less (the rest under the device's work), both are said, so neither reads as the
        # other
        share = story.parts.get("cpu_wait")
        part = ""
        if share is not None and not share:
            part = "; all of it hidden under other parts of the step"
        elif share is not None and format_seconds(share) != format_seconds(waited):
            part = f"; {format_seconds(share)} of it in the step's time above, the rest hidden"
        said.append(
            f"waiting for a CPU {format_seconds(waited)} (other threads or processes had the "
            f"cores{part})"
        )
    if story.transfer_s and wall and story.transfer_s >= 0.01 * wall:
        said.append(
            f"in transfers and reads {format_seconds(story.transfer_s)} (a read waits for the "
            "device to finish the graph)"
        )
    if story.overlap_s:
        said.append(f"{format_seconds(story.overlap_s)} of work ran hidden under the other side's")
    return said


def _span(steps: list[int]) -> str:
    if not steps:
        return "—"
    first, last = min(steps), max(steps)
    return str(first) if first == last else f"{first}–{last}"


def cost_line(finding: Finding) -> str | None:
    """What the finding costs, where measured: per step, one-time, over the run, and how
    measured; None where nothing was measured."""
    cost = finding.cost
    if cost is None:
        return None
    said = []
    if cost.per_step_s is not None:
        said.append(f"{format_seconds(cost.per_step_s)} per step")
    if cost.one_time_s is not None:
        said.append(f"{format_seconds(cost.one_time_s)} once")
    if cost.run_s is not None:
        steps = f" in {cost.steps} step(s)" if cost.steps is not None else ""
        said.append(f"{format_seconds(cost.run_s)} over the run{steps}")
    if not said:
        return None
    return ", ".join(said) + (f" ({cost.basis})" if cost.basis else "")


def _story(console: Console, story: StepStory | None, host_table: bool) -> None:
    lines = story_lines(story, host_table)
    if not lines:
        return
    for index, line in enumerate(lines):
        style = "bold" if index == 0 or line.startswith("Worth most") else None
        console.print(Text(line, style=style or ""))
    console.print()


def _counts(console: Console, result: PartResult) -> None:
    """Steps, compilations, executions, reads and fallbacks of the whole part."""
    counts = result.counts
    if counts is None:
        return
    summary = Table(show_header=False, box=None, pad_edge=False)
    summary.add_column(style="bold")
    summary.add_column()
    # Counters come from metrics reports or per-step rows: with neither, "none" would claim
    # an absence nobody measured.
    rows = [
        ("steps", counts.steps),
        ("compilations", counts.compiles),
        ("executions", counts.executions),
        ("device→host transfers", counts.device_to_host_transfers),
        (
            "CPU fallback ops",
            ", ".join(f"{k} ×{_fmt(v)}" for k, v in counts.aten_fallbacks.items())
            or counts.fallbacks_named
            or ("none" if counts.measured else NOT_CAPTURED),
        ),
    ]
    for label, value in rows:
        summary.add_row(label, _fmt(value))
    console.print(summary)
    console.print()


def no_capture_findings(result: PartResult, where: str) -> str:
    """What a capture with no findings says: the bottleneck tables ``where`` ("above") show
    where the time went, only where they are shown; else that none could be shown."""
    from xlaprof.report.devices import shows_bottlenecks

    if result.host_activity is None and shows_bottlenecks(result.devices):
        return (
            "No findings: no bottleneck in this capture reaches a finding's threshold "
            f"(the bottleneck tables {where} show where each step's time went)."
        )
    return (
        "No findings: the capture has no device bottleneck tables to judge a bottleneck from "
        "(what could not be judged, and why, is listed below)."
    )


def _findings(console: Console, result: PartResult) -> None:
    findings = result.findings
    if not findings and result.host_activity is not None:
        console.print(
            "No findings from the host's side: no read, compile or wait in the steady steps "
            "reaches a finding's threshold; device time is not in this capture, so nothing "
            "is said of it.",
            style="green",
        )
    elif not findings and result.trace_only:
        console.print(no_capture_findings(result, "above"), style="green")
    elif not findings and _failed_compiles(result):
        console.print(
            "No findings of the kinds xlaprof diagnoses; the failed compile above is not one "
            "of them."
        )
    elif not findings:
        console.print("No findings: nothing here looks wrong.", style="green")
    for index, finding in enumerate(findings, start=1):
        _finding(console, index, finding)


def _failed_compiles(result: PartResult) -> bool:
    summary = result.compile_summary
    return summary is not None and summary.failed > 0


def _finding(console: Console, index: int, finding: Finding) -> None:
    style = _STYLE[finding.severity]
    console.print(
        Text.assemble(
            (f"{index}. {finding.severity.value.upper()} ", style),
            (f"[{finding.kind.value}] ", "bold"),
            escape.terminal(finding.title),
        )
    )
    if finding.location is not None:
        console.print(Text(f"   at {escape.terminal(finding.location.described())}", style="bold"))
    for key, label in _HEADLINE_EVIDENCE:
        if finding.evidence.get(key):
            console.print(Text(f"   {label}: {_fmt(finding.evidence[key])}"))
    items = [
        f"{k}={_fmt(v)}"
        for k, v in finding.evidence.items()
        if k not in _HEADLINE_KEYS and k not in _VERBOSE_ONLY
    ]
    console.print(Text(f"   evidence: {evidence_line(items)}", style="dim"))
    cost = cost_line(finding)
    if cost:
        console.print(Text(f"   cost: {cost}"))
    console.print(Text(f"   fix: {finding.suggestion}"))
    console.print()


def coverage_line(entries: list[KindCoverage]) -> str | None:
    """The kinds that were not measured, grouped by why, on one line (None: every kind was)."""
    reasons: dict[str, list[str]] = {}
    for entry in entries:
        if entry.status is Coverage.NOT_MEASURED:
            reasons.setdefault(entry.why or "no reason given", []).append(entry.kind.value)
    if not reasons:
        return None
    groups = [f"{', '.join(kinds)} ({why})" for why, kinds in reasons.items()]
    return "Not measured: " + "; ".join(groups)


def _coverage(console: Console, entries: list[KindCoverage], verbose: bool) -> None:
    """Which kinds were looked for: with ``verbose`` every kind's status and why, else one
    line of the kinds not measured (a kind not measured has not been shown absent)."""
    if verbose and entries:
        table = Table(title="analyzers", title_justify="left", box=None)
        for column in ("kind", "status", "why"):
            table.add_column(column)
        for entry in entries:
            table.add_row(entry.kind.value, entry.status.value.replace("_", " "), entry.why or "")
        console.print(table)
        return
    line = coverage_line(entries)
    if line is not None:
        console.print(Text(line, style="dim"))


def _notes(console: Console, sources: list[SourceInfo], verbose: bool) -> None:
    """Notes about whole inputs (line 0), then the lines that looked like report text but could
    not be read: each with ``verbose``, else a count."""
    for source in sources:
        for note in (w for w in source.warnings if w.line == 0):
            note_line = escape.terminal(f"note: {source.path}: {note.reason}")
            console.print(Text(note_line, style="yellow"))
    warnings = [(s.path, w) for s in sources for w in s.warnings if w.line != 0]
    if not warnings:
        return
    if verbose:
        for path, warning in warnings:
            console.print(
                Text(
                    escape.terminal(
                        f"warning: {path}:{warning.line}: {warning.reason}: {warning.text}"
                    )
                ),
                style="dim",
            )
    else:
        console.print(
            f"{len(warnings)} line(s) looked like report text but could not be read; "
            "--verbose lists them.",
            style="dim",
        )


_MAX_TRACED_ROWS = 6
# The step timeline's columns and their headers (public: the saved document's schema must
# require each, tests/test_document_fields.py). Headers on two lines where needed, so that no
# column is wider than its numbers.
TIMELINE_COLUMNS = (
    ("wall_s", "step\ntime"),
    ("host_wall_s", "host\nwall"),
    ("python_tracing_s", "python\n+tracing"),
    ("compile_s", "compile"),
    ("graph_build_s", "graph\nbuild"),
    ("transfer_s", "trans-\nfers"),
    ("device_wait_s", "device\nwait"),
    ("device_busy_s", "device\nbusy"),
    ("queue_s", "queue"),
)


def _ms(seconds: Any) -> str:
    return NOT_MEASURED if missing(seconds) else f"{seconds * 1e3:.2f}"


def _summary(result: PartResult, table: str) -> dict[str, Any] | None:
    """What the pipeline measured over every row of ``table`` (``summaries``), or None."""
    return result.summaries.get(table)


def _timeline(console: Console, result: PartResult, warmup: int) -> None:
    """Warm-up steps, the steady-state median, and every traced step, in milliseconds.

    A table when the terminal is wide enough for every cell in full; otherwise one wrapped
    line per row. Nothing is cut to an ellipsis: a number or a label is shown whole or not.
    A timeline the pipeline cut (``rows_kept``) names the median step and the counts the story
    measured over every step.
    """
    rows, traced_count = _timeline_rows(result, warmup)
    headers = ["step", *(label for _, label in TIMELINE_COLUMNS), "from"]
    grid = [[label, *cells, source] for label, cells, source in rows]
    widths = [
        max(*(len(part) for part in header.split("\n")), *(len(line[i]) for line in grid))
        for i, header in enumerate(headers)
    ]
    if sum(widths) + len(widths) - 1 <= console.width:
        table = Table(
            title="Step timeline (ms)",
            title_justify="left",
            box=None,
            pad_edge=False,
            collapse_padding=True,
        )
        for index, header in enumerate(headers):
            table.add_column(
                header,
                justify="left" if index in (0, len(headers) - 1) else "right",
                min_width=widths[index],
                no_wrap=True,
            )
        for label, cells, source in rows:
            table.add_row(label, *cells, source)
        console.print(table)
    else:
        console.print("Step timeline (ms)")
        names = [
            header.replace("-\n", "").replace("\n+", "+").replace("\n", " ")
            for header in headers[1:-1]
        ]
        for label, cells, source in rows:
            values = ", ".join(f"{n} {v}" for n, v in zip(names, cells, strict=True))
            console.print(Text(f"  step {label} ({source}): {values}"))
    if traced_count > _MAX_TRACED_ROWS:
        more = traced_count - _MAX_TRACED_ROWS
        cut = result.rows_kept.get("timeline")
        if cut is None:
            console.print(f"({more} more traced steps in --json)")
        else:
            console.print(
                f"({more} more traced steps; --json keeps {cut.kept:,} of the timeline's "
                f"{cut.total:,} rows, chosen as its rows_kept says)"
            )
    console.print()


def _timeline_rows(result: PartResult, warmup: int) -> tuple[list[tuple[str, list[str], str]], int]:
    """The console timeline's rows (label, cells, source): warm-up steps, the median steady
    step, the first traced steps; and how many traced steps there are after warm-up."""
    timeline: Any = result.timeline
    rows: list[tuple[str, list[str], str]] = []

    def add(label: str, row: Any, source: str) -> None:
        rows.append((label, [_ms(row[key]) for key, _ in TIMELINE_COLUMNS], source))

    # the story's warm-up: the first steps by position (``model.warmup``); a cut timeline keeps
    # them (``tables.bounded``), so it tells the same steps apart
    first = first_steady_of(timeline, warmup, "compile_s")
    for _, row in timeline[timeline["step"] < first].iterrows():
        add(str(row["step"]), row, str(row["source"]))
    steady = timeline[timeline["step"] >= first]
    traced = steady[steady["source"] == "trace"]
    traced_count = len(traced)
    # the median steady step is the story's (the pipeline picked it over every step)
    story = result.story
    median, steady_steps = None, 0
    if story is not None:
        steady_steps = story.steady_steps
        found = timeline[timeline["step"] == story.median_step]
        median = found.iloc[0] if len(found) else None
        if result.rows_kept.get("timeline") is not None:  # over every step, as it counted
            traced_count = sum(1 for step in story.traced_steps if step >= first)
    if steady_steps and median is not None:
        add(f"{int(median['step'])} (median)", median, f"of {steady_steps} steady")
    for _, row in traced.head(_MAX_TRACED_ROWS).iterrows():
        add(str(row["step"]), row, "trace")

    return rows, traced_count


def _skew(console: Console, figures: dict[str, Any] | None) -> None:
    """The host skew line: the pipeline's figures over every step (``summaries``)."""
    if figures is None:
        return
    console.print(
        f"Host skew: {figures['steps']} steps traced on {figures['hosts']} hosts; median skew "
        f"{figures['median_skew']:.0%}; worst step {figures['worst_step']}: "
        f"{figures['slowest_host']} {figures['slowest_ms']:.2f} ms vs "
        f"{figures['fastest_host']} {figures['fastest_ms']:.2f} ms"
    )
    console.print()


def _comparison_value(value: Any, unit: str) -> str:
    if missing(value):
        return NOT_MEASURED
    if unit == "s":
        return format_seconds(value)
    if unit == "B":
        return format_bytes(value)
    return f"{value:,.0f}"


def comparison_table(
    console: Console, comparison: Any, title: str, labels: tuple[str, str] = ("before", "after")
) -> None:
    """A before/after table (``analyze.compare.compare``): values, ratio, change in words."""
    table = Table(title=title, title_justify="left")
    for column in ("metric", labels[0], labels[1], "after/before", "change"):
        table.add_column(column, justify="left" if column in ("metric", "change") else "right")
    for _, row in comparison.iterrows():
        ratio = row["ratio"]
        shown = NOT_MEASURED if missing(ratio) else f"{ratio:.2f}"
        table.add_row(
            row["metric"],
            _comparison_value(row["before"], row["unit"]),
            _comparison_value(row["after"], row["unit"]),
            shown,
            row["change"],
        )
    console.print(table)


def stragglers_line(figures: dict[str, Any] | None) -> str | None:
    """One line for the console: the host that is slowest most often, and how far behind
    (``figures``: the pipeline's over every row, ``summaries``)."""
    if figures is None:
        return None
    hosts = figures["hosts"]
    if figures["slowest_host"] is None:
        return f"Stragglers: none; all {hosts} hosts took the same time in every step"
    return (
        f"Stragglers ({hosts} hosts): {figures['slowest_host']} is slowest in "
        f"{figures['slowest_rows']} of {figures['rows']} step×device rows, a median "
        f"{figures['median_behind_ms']:.2f} ms behind the median host (worst: step "
        f"{figures['worst_step']} on {figures['worst_device']}, "
        f"{figures['worst_slowest_ms']:.2f} ms vs {figures['worst_median_ms']:.2f} ms); "
        f"its extra time went to {figures['waiting_on']}"
    )
