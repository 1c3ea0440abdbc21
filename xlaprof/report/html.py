"""The self-contained HTML report: findings with evidence and fixes, and the figures.

One file that works offline: plotly.js is inlined once (no CDN), figures follow as divs. Every
string that comes from a trace, a log or the user's code is escaped. The report presents what
``xlaprof.pipeline.analyze`` computed; it computes nothing itself.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

from xlaprof.escape import html_text, plotly_figure
from xlaprof.parse.units import NOT_MEASURED
from xlaprof.report.base import RenderOptions
from xlaprof.report.devices import device_words

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from xlaprof.model.parts import RunSummary
    from xlaprof.model.result import AnalysisResult, PartResult

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; } .meta { color: #555; margin-bottom: 1.5rem; }
table.kv td { padding: 0.15rem 0.8rem 0.15rem 0; vertical-align: top; }
.finding { border-left: 6px solid #999; padding: 0.6rem 1rem; margin: 1rem 0;
  background: #fafafa; }
.finding.error { border-color: #d62728; } .finding.warning { border-color: #ff9f1c; }
.finding.info { border-color: #1f77b4; } .sev { font-weight: bold; text-transform: uppercase; }
.kind { font-family: monospace; background: #eee; padding: 0 0.3rem; }
.where { font-family: monospace; }
pre.fix { white-space: pre-wrap; background: #f0f7f0; padding: 0.5rem; }
details { margin-top: 0.4rem; } .figure { margin: 1.5rem 0; }
.none { color: #2a7; font-weight: bold; }
.story { background: #f4f7fb; border-left: 6px solid #1f77b4; padding: 0.4rem 1rem; }
table.data { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
table.data th, table.data td { padding: 0.2rem 0.6rem; border-bottom: 1px solid #ddd;
  text-align: right; } table.data th:first-child, table.data td:first-child { text-align: left;
  font-family: monospace; word-break: break-all; } .warn { color: #b35900; }
"""


def _value(value: Any) -> str:
    if value is None:
        return NOT_MEASURED
    if isinstance(value, dict | list):
        return json.dumps(value, indent=1, default=str)
    return str(value)


def _finding(row: Any) -> str:
    evidence = "".join(
        f"<tr><td>{html_text(str(k))}</td><td><code>{html_text(_value(v))}</code></td></tr>"
        for k, v in row["evidence"].items()
    )
    # A DataFrame holds a missing location as NaN (a float), not None.
    location = row["location"] if isinstance(row["location"], str) else ""
    what = row.get("location_is")
    if location and isinstance(what, str) and what:
        location = f"{location} ({what})"  # as Location.described() says it
    where = f'<div class="where">at {html_text(location)}</div>' if location else ""
    cost = _cost(row.get("cost"))
    if cost:
        where += f'<div class="where">cost: {html_text(cost)}</div>'
    return (
        f'<div class="finding {html_text(row["severity"])}">'
        f'<span class="sev">{html_text(row["severity"])}</span> '
        f'<span class="kind">{html_text(row["kind"])}</span> {html_text(row["title"])}'
        f'{where}<pre class="fix">{html_text(row["suggestion"])}</pre>'
        f'<details><summary>evidence</summary><table class="kv">{evidence}</table></details></div>'
    )


def _cost(cost: Any) -> str | None:
    """A finding's measured cost in words (``Finding.cost``), or None."""
    from xlaprof.parse.units import format_seconds

    if not isinstance(cost, dict):
        return None
    said = []
    if cost.get("per_step_s") is not None:
        said.append(f"{format_seconds(cost['per_step_s'])} per step")
    if cost.get("one_time_s") is not None:
        said.append(f"{format_seconds(cost['one_time_s'])} once")
    if cost.get("run_s") is not None:
        said.append(f"{format_seconds(cost['run_s'])} over the run")
    if not said:
        return None
    basis = cost.get("basis")
    return ", ".join(said) + (f" ({basis})" if basis else "")


def _figure(figure: go.Figure, element_id: str, with_library: bool) -> str:
    html: str = plotly_figure(figure).to_html(
        full_html=False,
        include_plotlyjs=with_library,
        div_id=element_id,
        config={"displaylogo": False, "responsive": True},
    )
    return html


def _device_line(run: RunSummary | None, result: PartResult) -> str:
    """``TPU x4`` from the run, else ``4 x TPU v6 Lite`` from the trace's device planes."""
    if run is not None and run.device_kind:
        return f"{run.device_kind} x{run.device_count or NOT_MEASURED}"
    types = None if result.devices is None else device_words(result.devices).device_types
    return types or NOT_MEASURED


def _status(run: RunSummary | None) -> str:
    if run is None:
        return NOT_MEASURED
    exit_code = NOT_MEASURED if run.exit_code is None else run.exit_code
    return f"{run.status} (exit code {exit_code})"


def _story(result: PartResult) -> str:
    """The story the page opens with: the console's lines (``console.story_lines``)."""
    from xlaprof.report.console import story_lines

    lines = story_lines(result.story, result.host_view is not None)
    if not lines:
        return ""
    items = "".join(f"<li>{html_text(line.strip())}</li>" for line in lines)
    return f'<div class="story"><h2>Where a step goes</h2><ul>{items}</ul></div>'


def _coverage(result: PartResult) -> str:
    """The kinds not measured, and why, as the console says them under its findings
    (``console.coverage_line``): "No findings" is not that a kind was looked for."""
    from xlaprof.report.console import coverage_line

    line = coverage_line(result.analyzers)
    return "" if line is None else f'<p class="meta">{html_text(line)}</p>'


def write_analysis(result: AnalysisResult, out: TextIO, options: RenderOptions) -> None:
    """The report page of the first part (``xlaprof report`` picks it with --process)."""
    out.write(page(result.parts[0]))


def page(result: PartResult) -> str:
    """The whole self-contained report page of one analyzed part."""
    from xlaprof.report.figures import result_figures

    part = result.part
    counts = result.counts
    run = part.run_summary
    title = f"xlaprof report: {part.name}"
    saved = []
    if result.read_from is not None:  # the file read, then the input it was made from
        saved = [("read", f"{result.read_from} (a saved result: nothing was measured again)")]
    meta = [
        *saved,
        ("made from" if saved else "source", ", ".join(s.path for s in part.sources)),
        (
            "status",
            "- (exit code -)" if run is None else f"{run.status} (exit code {run.exit_code})",
        ),
        ("steps", None if counts is None else counts.steps),
        ("compilations", None if counts is None else counts.compiles),
        ("executions", None if counts is None else counts.executions),
        ("device→host transfers", None if counts is None else counts.device_to_host_transfers),
        ("device", _device_line(run, result)),
        ("torch_xla", (run.torch_xla_version if run is not None else None) or NOT_MEASURED),
        *(("note", note) for note in (run.warnings if run is not None else [])),
        *(("note", w.reason) for s in part.sources for w in s.warnings if w.line == 0),
    ]
    summary = "".join(
        f"<tr><td>{html_text(k)}</td><td>{html_text(_value(v))}</td></tr>" for k, v in meta
    )
    findings = result.findings_frame()
    if findings.empty and result.trace_only:
        from xlaprof.report.console import no_capture_findings

        body_findings = f'<p class="none">{html_text(no_capture_findings(result, "below"))}</p>'
    elif findings.empty:
        body_findings = '<p class="none">No findings: nothing here looks wrong.</p>'
    else:
        body_findings = "".join(_finding(row) for _, row in findings.iterrows())
    body_findings += _coverage(result)
    figures = result_figures(result)
    body_devices = ""
    if result.devices is not None:
        from xlaprof.report.devices import render_html

        body_devices = f"<h2>Devices</h2>{render_html(result.devices)}"
    from xlaprof.report.host import render_html as host_html

    body_devices += host_html(result)
    body_figures = "".join(
        f'<div class="figure">{_figure(figure, f"fig-{name}", index == 0)}</div>'
        for index, (name, figure) in enumerate(figures)
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html_text(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html_text(title)}</h1>{_story(result)}"
        f'<div class="meta"><table class="kv">{summary}</table></div>'
        f"<h2>Findings ({len(findings)})</h2>{body_findings}"
        f"{body_devices}"
        f"<h2>Figures</h2>{body_figures}"
        '<p class="meta">Generated by xlaprof. Self-contained: works offline.</p>'
        "</body></html>"
    )
