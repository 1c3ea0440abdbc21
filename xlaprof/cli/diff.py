"""``xlaprof diff RUN_A RUN_B``: two runs side by side, and which findings came and went."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def diff(before: Path, after: Path, as_json: bool) -> None:
    """Compare two run directories: figures as ratios, findings that appeared or disappeared."""
    from xlaprof.cli.common import emit, say
    from xlaprof.model.result import RunComparison
    from xlaprof.pipeline import analyze_one
    from xlaprof.tables.compare import compare, match_findings, run_summary

    (a, _, note_a), (b, _, note_b) = analyze_one(before), analyze_one(after)
    for note in (note_a, note_b):
        if note:
            say(note)
    table = compare(run_summary(a.part.data), run_summary(b.part.data))
    gone, came = match_findings(a.findings, b.findings)
    emit(RunComparison(str(before), str(after), table, gone, came), "json" if as_json else None)
