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

    from rich.text import Text

    from xlaprof import escape
    from xlaprof.analysis.compare import match_findings
    from xlaprof.api import Analysis

    a, b = Analysis(before, warn=False), Analysis(after, warn=False)
    for note in (a.note, b.note):
        if note:
            click.echo(f"xlaprof: {note}", err=True)
    table = a.compare(b)
    gone, came = match_findings(a.result.findings, b.result.findings)
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

    console = escape.safe_console()
    comparison_table(console, table, f"xlaprof diff {before} {after}")
    for title in gone:
        console.print(Text.assemble(("gone: ", "green"), title))
    for title in came:
        console.print(Text.assemble(("new: ", "red"), title))
    if not gone and not came:
        console.print("findings: the same in both runs")
