"""Source lines are read only from a chosen root (``xlaprof.inputs.sourcefiles``): a run's
recorded working directory counts only when it is a real project folder here, and only its
Python files are quoted (issue 31)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from builders import drop_graph_protos
from helpers import cli


# -- 3: source lines only from a chosen root ----------------------------------------------------
def _run_quoting(tmp_path: Path, samples: Path, cwd: str, source: str, line: int) -> Path:
    """The recompiling sample run, its changing input's source line pointed at ``source``."""
    run = tmp_path / "run"
    shutil.copytree(
        next((samples / "runs" / "recompile_varying_batch").glob("*")),
        run,
        ignore=shutil.ignore_patterns("plugins"),
    )
    info = json.loads((run / "run.json").read_text())
    # the graphs name the example's helper under the folder the sample was recorded in
    recorded = f'source_file="{info["cwd"]}/examples/_common.py" source_line=42'.encode()
    for path in run.glob("graphs/*.txt.gz"):
        text = gzip.decompress(path.read_bytes())
        assert recorded in text or path.name.startswith("module_0000"), path.name
        data = text.replace(recorded, f'source_file="{source}" source_line={line}'.encode())
        path.write_bytes(gzip.compress(data))
    drop_graph_protos(run)  # the text's metadata is then where the line comes from
    info["cwd"] = cwd
    (run / "run.json").write_text(json.dumps(info))
    return run


@pytest.mark.parametrize("cwd", ["/", "/usr/lib"])
def test_a_recorded_system_folder_is_no_source_root(
    tmp_path: Path, samples: Path, cwd: str
) -> None:
    # GIVEN a run that records a system folder as its working directory and whose graph
    # metadata names /etc/passwd as a source file
    run = _run_quoting(tmp_path, samples, cwd, "/etc/passwd", 1)
    first_line = Path("/etc/passwd").read_text().splitlines()[0]
    # WHEN it is analyzed (JSON, terminal) and reported (HTML)
    document = cli("analyze", str(run), "--json")
    console = cli("analyze", str(run), env={"COLUMNS": "300"})
    html = cli("report", str(run), "-o", str(tmp_path / "r.html"))
    # THEN no line of it is shown anywhere, and each output says so and how to allow it
    assert document.returncode == console.returncode == html.returncode == 0
    page = (tmp_path / "r.html").read_text()
    for text in (document.stdout, console.stdout, page):
        assert first_line not in text
    notes = [w for w in json.loads(document.stdout)["run"]["warnings"] if "/etc/passwd" in w]
    assert len(notes) == 1 and "not shown" in notes[0] and "--source-root" in notes[0]
    assert "not shown" in console.stdout and "--source-root" in console.stdout
    assert "not shown" in page and "--source-root" in page


def test_a_real_project_folder_is_quoted_and_only_its_python_files(
    tmp_path: Path, samples: Path
) -> None:
    # GIVEN a run whose recorded working directory is a project folder here, holding the
    # script the graph names, and one whose graph names a non-Python file of that folder
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text("x = torch.randn(batch_size, 16)  # changes per step\n")
    (project / ".env").write_text("API_TOKEN=secret-token-123\n")
    quoted = _run_quoting(tmp_path / "a", samples, str(project), str(project / "model.py"), 1)
    hidden = _run_quoting(tmp_path / "b", samples, str(project), str(project / ".env"), 1)
    # WHEN both are analyzed
    shown = cli("analyze", str(quoted), "--json")
    kept = cli("analyze", str(hidden), "--json")
    # THEN the script's line is quoted, the other file's is withheld (and said)
    assert shown.returncode == kept.returncode == 0
    assert "torch.randn(batch_size, 16)" in shown.stdout
    assert "secret-token-123" not in kept.stdout
    assert any(".env" in w for w in json.loads(kept.stdout)["run"]["warnings"])


# -- source lines only from the source root --------------------------------------------------------
def test_source_files_are_read_only_inside_the_source_root(tmp_path: Path) -> None:
    from xlaprof.analyzers.shared.sourcecode import source_line
    from xlaprof.inputs.sourcefiles import MAX_SOURCE_BYTES, SourceFiles

    root = tmp_path / "project"
    root.mkdir()
    (root / "train.py").write_text("import torch\nloss = model(x)\n")
    (root / "link.py").symlink_to("/etc/passwd")
    os.mkfifo(root / "fifo.py")
    (root / "huge.py").write_bytes(b"#" * (MAX_SOURCE_BYTES + 1))
    (root / "zero.py").symlink_to("/dev/zero")
    sources = SourceFiles([root])
    assert source_line(sources, str(root / "train.py"), 2) == "loss = model(x)"
    assert source_line(sources, "train.py", 1) == "import torch"  # relative to the root
    for name in ("/etc/passwd", "../../../../etc/passwd", str(root / "link.py")):
        assert sources.text(name) is None, name
    for name in ("fifo.py", "huge.py", "zero.py"):  # no hang, no memory blow-up
        assert sources.text(str(root / name)) is None, name
    assert "/etc/passwd" in sources.withheld()  # exists here, not read: the report says so
    # no root: nothing is read
    assert source_line(SourceFiles(), str(root / "train.py"), 2) is None


# -- a run recorded in another folder, read with --source-root -----------------------------------
def test_a_run_recorded_elsewhere_quotes_its_sources_from_the_source_root(
    tmp_path: Path, samples: Path
) -> None:
    # GIVEN a run recorded in a folder that is not on this machine, naming its script there,
    # and the project (its script at the same place) in another folder here
    project = tmp_path / "clone"
    project.mkdir()
    (project / "model.py").write_text("x = torch.randn(batch_size, 16)  # changes per step\n")
    gone = "/nonexistent-machine/project"
    run = _run_quoting(tmp_path / "a", samples, gone, f"{gone}/model.py", 1)
    # WHEN it is analyzed without a source root, and with the clone as the source root
    alone = cli("analyze", str(run), "--json")
    rooted = cli("analyze", str(run), "--json", "--source-root", str(project))
    # THEN only the second quotes the line, from the clone's file at the recorded place
    assert alone.returncode == rooted.returncode == 0
    assert "torch.randn(batch_size, 16)" not in alone.stdout
    assert "torch.randn(batch_size, 16)" in rooted.stdout


def test_a_recorded_folder_maps_only_into_the_roots(tmp_path: Path) -> None:
    from xlaprof.inputs.sourcefiles import SourceFiles

    # GIVEN a root and, beside it, a secret the recorded names could climb to
    root = tmp_path / "clone"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "train.py").write_text("loss = model(x)\n")
    (tmp_path / "secret.py").write_text("TOKEN = 'secret-token-123'\n")
    (root / "out.py").symlink_to(tmp_path / "secret.py")
    sources = SourceFiles([root], recorded="/elsewhere/proj")
    # THEN a name under the recorded folder reads the root's file at the same place
    assert sources.text("/elsewhere/proj/pkg/train.py") == "loss = model(x)\n"
    # AND nothing outside the root is reached: by climbing, by a link, or from another folder
    for name in ("/elsewhere/proj/../secret.py", "/elsewhere/proj/out.py", "/other/pkg/train.py"):
        assert sources.text(name) is None, name
    assert sources.text("/elsewhere/proj/../../" + str(tmp_path / "secret.py")) is None
