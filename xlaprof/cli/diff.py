"""``xlaprof diff RUN_A RUN_B``: two runs side by side, and which findings came and went."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command()
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def diff(before: Path, after: Path, as_json: bool) -> None:
    """Compare two run directories: figures as ratios, findings that appeared or disappeared."""
    import json

    from rich.console import Console

    from xlaprof.pipeline import analyze_one
    from xlaprof.tables.compare import compare, match_findings, run_summary

    (a, _, note_a), (b, _, note_b) = analyze_one(before), analyze_one(after)
    for note in (note_a, note_b):
        if note:
            click.echo(f"xlaprof: {note}", err=True)
    table = compare(run_summary(a.part.data), run_summary(b.part.data))
    gone, came = match_findings(a.findings, b.findings)
    if as_json:
        rows = table.astype(object).where(table.notna(), None).to_dict(orient="records")
        document = {
            "schema": "xlaprof.diff/1",
            "before": str(before),
            "after": str(after),
            "comparison": rows,
            "findings_disappeared": gone,
            "findings_appeared": came,
        }
        sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
        return
    from xlaprof.report.console import comparison_table

    console = Console(highlight=False)
    comparison_table(console, table, f"xlaprof diff {before} {after}")
    for title in gone:
        console.print(f"[green]gone:[/green] {title}")
    for title in came:
        console.print(f"[red]new:[/red] {title}")
    if not gone and not came:
        console.print("findings: the same in both runs")
