"""Terminal rendering of an analysis: a summary table and the findings, most severe first."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from xlaprof.findings import Finding, Severity
from xlaprof.loading import Part

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_MAX_EVIDENCE_CHARS = 300


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        shown = ", ".join(_fmt(v) for v in value[:8])
        return f"[{shown}{', …' if len(value) > 8 else ''}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in list(value.items())[:8]) + "}"
    return str(value)


def render(console: Console, part: Part, findings: list[Finding], verbose: bool = False) -> None:
    """Print the summary and findings for a person at a terminal."""
    data, sources = part.data, part.sources
    run = part.extra.get("run")
    if run is not None:
        console.print(
            Text.assemble(
                ("xlaprof analyze ", "bold"),
                run["path"],
                f"  (run: {run['steps_recorded']} steps, ended {run['status']}"
                + (f", exit code {run['exit_code']}" if run["exit_code"] is not None else "")
                + (f", {run['device_kind']} x{run['device_count']}" if run["device_kind"] else "")
                + ")",
            )
        )
        for warning in run["warnings"]:
            console.print(Text(f"note: {warning}", style="yellow"))
        sources = []
    for source in sources:
        console.print(
            Text.assemble(
                ("xlaprof analyze ", "bold"),
                source.path,
                f"  ({', '.join(source.kinds)}; {source.reports} metrics report(s), "
                f"{source.debug_events} debug event(s))",
            )
        )
    summary = Table(show_header=False, box=None, pad_edge=False)
    summary.add_column(style="bold")
    summary.add_column()
    fallbacks = data.aten_fallbacks()
    rows = [
        ("steps", data.step_count()),
        ("compilations", data.compiles()),
        ("executions", data.executions()),
        ("device→host transfers", data.device_to_host_transfers()),
        ("CPU fallback ops", ", ".join(f"{k} ×{_fmt(v)}" for k, v in fallbacks.items()) or "none"),
    ]
    for label, value in rows:
        summary.add_row(label, _fmt(value))
    console.print(summary)
    console.print()
    if not findings:
        console.print("[green]No findings: nothing here looks wrong.[/green]")
    for index, finding in enumerate(findings, start=1):
        style = _STYLE[finding.severity]
        console.print(
            Text.assemble(
                (f"{index}. {finding.severity.value.upper()} ", style),
                (f"[{finding.kind.value}] ", "bold"),
                finding.title,
            )
        )
        if finding.location is not None:
            console.print(Text(f"   at {finding.location}", style="bold"))
        evidence = "; ".join(f"{k}={_fmt(v)}" for k, v in finding.evidence.items())
        if len(evidence) > _MAX_EVIDENCE_CHARS:
            evidence = evidence[:_MAX_EVIDENCE_CHARS] + "…"
        console.print(Text(f"   evidence: {evidence}", style="dim"))
        console.print(Text(f"   fix: {finding.suggestion}"))
        console.print()
    warnings = [(s.path, w) for s in sources for w in s.warnings]
    if warnings:
        if verbose:
            for path, warning in warnings:
                console.print(
                    Text(f"warning: {path}:{warning.line}: {warning.reason}: {warning.text}"),
                    style="dim",
                )
        else:
            console.print(
                f"[dim]{len(warnings)} line(s) looked like report text but could not be read; "
                "--verbose lists them.[/dim]"
            )
