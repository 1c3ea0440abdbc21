"""One escaping layer per medium (``xlaprof.escape``): names from a capture someone sends you
print literally on the terminal, stay one well-formed command in GitHub annotations and JUnit
XML, and are text, never live markup, in the HTML report (issue 31).

Each attack is run through the real ``xlaprof`` command (or the renderers, for the fuzzed
names): the test asserts what the user sees.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
from pathlib import Path

from builders import HOSTILE, drop_graph_protos, hostile_chrome_trace
from fuzzing import CALL_LIMIT_S, HOSTILE_NAMES, SMALL, Hang, hostile_name, raw_controls, time_limit
from helpers import cli


def _noraw_controls(text: str) -> None:
    bad = [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0]
    assert not bad, f"raw control characters reached the output: {sorted(set(bad))!r}"
    assert "\u202e" not in text


def test_hostile_names_print_literally_on_the_terminal(tmp_path: Path) -> None:
    # GIVEN a capture whose op, process and thread names hold escape sequences and markup
    trace = tmp_path / "evil\x1b]0;pwned\x07\x1b[2K\r.trace.json"
    hostile_chrome_trace(trace)
    # WHEN it is analyzed for the terminal (wide enough that names are not folded)
    out = cli("analyze", str(trace), env={"COLUMNS": "400"})
    # THEN no control character reaches the terminal, markup prints as itself, no crash
    assert out.returncode == 0, out.stderr
    _noraw_controls(out.stdout + out.stderr)
    assert "[/oops]" in out.stdout
    assert "[link=https://evil.example]op[/link]" in out.stdout
    assert "kernel\\x1b]0;pwned" in out.stdout  # shown, visibly


def _hostile_run(tmp_path: Path, samples: Path) -> Path:
    """The recompiling sample run, its script renamed with escape sequences in the name."""
    run = tmp_path / "run"
    shutil.copytree(
        next((samples / "runs" / "recompile_varying_batch").glob("*")),
        run,
        ignore=shutil.ignore_patterns("plugins"),
    )
    info = json.loads((run / "run.json").read_text())
    examples = f"{info['cwd']}/examples/"  # where the sample was recorded
    evil = f"{examples}evil{HOSTILE},x:1/"
    drop_graph_protos(run)  # their stack frames name the script too, in binary
    for path in [run / "debug.log", *run.glob("graphs/*.txt.gz")]:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        data = data.replace(examples.encode(), evil.encode())
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    info["device_kind"] = f"TPU{HOSTILE}"
    info["host"] = HOSTILE
    (run / "run.json").write_text(json.dumps(info))
    return run


def test_check_output_annotations_and_junit_stay_inert(tmp_path: Path, samples: Path) -> None:
    import xml.etree.ElementTree as ET

    # GIVEN a recompiling run whose source path holds ESC, BEL, CR, a comma and a colon
    run = _hostile_run(tmp_path, samples)
    junit = tmp_path / "junit.xml"
    # WHEN checked under GitHub Actions with a JUnit report
    out = cli(
        "check",
        str(run),
        "--max-recompilations",
        "0",
        "--junit",
        str(junit),
        "--no-config",
        env={"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path)},
    )
    # THEN the budget fails as it should, nothing raw reaches the log, every annotation is
    # one well-formed command line, and the JUnit file parses
    assert out.returncode == 1, out.stderr
    _noraw_controls(out.stdout + out.stderr)
    annotations = [line for line in out.stdout.splitlines() if line.startswith("::")]
    assert annotations and all(line.startswith("::error ") for line in annotations)
    assert "evil" in annotations[0] and "%2C" in annotations[0].split("::")[1]
    root = ET.fromstring(junit.read_bytes())
    cases = [c for c in root.iter("testcase") if c.get("file")]
    assert cases and "\\x1b]0;pwned" in cases[0].get("file")


def test_label_markup_in_names_is_not_live_in_the_html_report(tmp_path: Path) -> None:
    # GIVEN a capture with an op named as a plotly link and a line break
    trace = tmp_path / "evil.trace.json"
    hostile_chrome_trace(trace)
    report = tmp_path / "report.html"
    # WHEN the HTML report is written
    out = cli("report", str(trace), "-o", str(report))
    # THEN the names are there as text: no live <a href> or <br> from data reaches plotly,
    # and no raw control character is in the page
    assert out.returncode == 0, out.stderr
    page = report.read_text()
    calls = page.split("Plotly.newPlot(")[1:]  # each figure's data (after plotly.js itself)
    figures = "".join(call[: call.index("</script>")] for call in calls)
    assert '<a href="https://evil' not in figures
    assert '\\u003ca href=\\"https:\\u002f\\u002fevil' not in figures
    assert (
        '&lt;a href=\\"https:\\u002f\\u002fevil.example\\"&gt;x&lt;\\u002fa&gt;&lt;br&gt;y'
        in figures
    )
    assert "\\u001b" not in figures
    _noraw_controls(page[: page.index("<h2>Figures</h2>")] + figures)


def test_hostile_names_render_inertly(tmp_path: Path) -> None:
    from xlaprof.inputs.paths import load_parts
    from xlaprof.model.result import AnalysisResult
    from xlaprof.pipeline import analyze_parts
    from xlaprof.report import RenderOptions, render

    assert len(HOSTILE_NAMES) >= 10
    failures: dict[str, tuple[int, str]] = {}
    for seed in range(SMALL):
        rng = random.Random(seed)
        names = [hostile_name(rng) for _ in range(6)]
        events: list[dict] = [
            {"ph": "M", "name": "process_labels", "pid": 0, "args": {"labels": "GPU 0"}},
            {"ph": "M", "name": "process_name", "pid": 9, "args": {"name": hostile_name(rng)}},
            {"ph": "M", "name": "thread_name", "pid": 9, "tid": 1,
             "args": {"name": hostile_name(rng)}},
        ]  # fmt: skip
        for step in range(3):
            start = 1000.0 * (step + 1)
            events.append({"ph": "X", "name": f"ProfilerStep#{step}", "pid": 9, "tid": 1,
                           "ts": start, "dur": 900.0})  # fmt: skip
            for index, name in enumerate(names):
                events.append({"ph": "X", "name": name, "pid": rng.choice([0, 9]), "tid": 7,
                               "ts": start + 100 * index, "dur": 50.0})  # fmt: skip
        path = tmp_path / f"{seed}.trace.json"
        path.write_text(json.dumps({"traceEvents": events}))
        try:
            with time_limit(CALL_LIMIT_S):
                result = AnalysisResult(analyze_parts(load_parts([path], 2**30)))
                terminal = render(result, "console", options=RenderOptions(width=200))
                page = render(result, "html")
            figures = "".join(c[: c.index("</script>")] for c in page.split("Plotly.newPlot(")[1:])
            web = page[: page.index("<h2>Figures</h2>")] + figures
            shown = terminal + web
            assert not raw_controls(shown), f"raw controls {sorted(raw_controls(shown))!r}"
            assert '<a href="https://evil' not in web  # in the terminal it is only text
        except (Exception, Hang) as error:
            failures.setdefault(f"{type(error).__name__}: {error}"[:160], (seed, repr(names)))
        path.unlink()
    assert not failures, "\n".join(f"{k} (seed {s}, {n})" for k, (s, n) in failures.items())


def test_notebook_figures_hold_no_live_link(tmp_path: Path) -> None:
    from builders import copy_run

    from xlaprof import Analysis

    # GIVEN a capture whose kernels, and a run whose regions, are named as plotly links
    trace = tmp_path / "evil.trace.json"
    hostile_chrome_trace(trace)
    run = copy_run(tmp_path)
    steps = [json.loads(line)["step"] for line in (run / "steps.jsonl").read_text().splitlines()]
    regions = [
        {"step": step, "name": name, "calls": 1, "seconds": 0.01}
        for step in steps
        for name in ('<a href="https://evil.example">x</a><br>y', "forward")
    ]  # as xlaprof.region writes them, one row per region and step
    (run / "regions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in regions))
    # WHEN a notebook draws them through the facade, and the figures are rendered
    drawn = [Analysis(trace).plot_device_ops(), Analysis(run, warn=False).plot_regions()]
    for figure in drawn:
        page = figure.to_html(include_plotlyjs=False, full_html=False)
        data = page[page.index("Plotly.newPlot(") :]
        # THEN the names are in the figure as text, and no link or line break from data is live
        assert "evil.example" in data
        assert '<a href="https://evil' not in data
        assert '\\u003ca href=\\"https:\\u002f\\u002fevil' not in data
        assert '&lt;a href=\\"https:\\u002f\\u002fevil.example\\"&gt;x&lt;\\u002fa&gt;' in data
        # AND drawing it into the HTML report again does not escape it twice
        from xlaprof.escape import plotly_figure

        assert (
            plotly_figure(figure).to_html(include_plotlyjs=False, full_html=False).count("&amp;lt;")
            == 0
        )
