"""`xlaprof run` on the real CPU runtime: each example diagnosed at the user's line, arguments,
stdin and exit code passed through, and how a run ends (exit, exception, --max-steps); the
signals that end a job are in test_run_signals.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    EXAMPLES,
    REPO,
    check_contract,
    cli,
    line_of,
    timeless,
    timeless_findings,
)

from xlaprof.rundir.reader import load_run, load_runs

pytestmark = pytest.mark.runtime

# example -> (finding kinds, source line the first finding points at, steps recorded). These runs
# are made (and timed) during the tests, so the kinds whose verdict is a duration measured here
# (helpers.TIMED_KINDS: slow_compile, tracing_bound) are not asserted on them; tracing_bound is
# asserted on the recorded run of the same example (cli/test_analyze.py) and on fixed steps
# (analyzers/test_tracing_bound.py).
EXPECTED = {
    "healthy_loop": ([], None, 12),
    # the line in the step that makes the batch whose size changes (the sync is the cut site)
    "recompile_varying_batch": (["recompilation"], "x, y = make_batch(next(sizes), device)", 12),
    "host_sync_item": (["host_sync"], "history.append(loss.item())", 12),
    "cpu_fallback": (["aten_fallback"], "scale = torch.median", 12),
    # thousands of tiny ops per step vs a few large matmuls (plus one sync before each loop)
    "tracing_bound_tiny_ops": (["tracing_bound"], "state = state * 0.999", 11),
    "device_bound_matmul": ([], None, 9),
    # 24 identical blocks in a for loop; the same model through scan_layers
    "unrolled_layers": (["unrolled_loop"], "for blk in self.blocks:", 4),
    "scanned_layers": ([], None, 4),
    # the rows kept by torch.nonzero differ each step (recompiles first: it is an error), and
    # the nonzero line makes the changing input
    "data_dependent_shape": (["recompilation", "aten_fallback"], "keep = torch.nonzero", 8),
}


@pytest.mark.parametrize("name", EXPECTED)
def test_each_example_is_diagnosed_at_the_users_line(example_runs, name: str) -> None:
    kinds, needle, steps = EXPECTED[name]
    result = cli("analyze", "--json", str(example_runs[name]))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    check_contract(document)
    found = timeless_findings(document["findings"])
    assert [f["kind"] for f in found] == timeless(kinds)
    if needle is not None and timeless(kinds):
        location = found[0]["location"]
        assert location["file"].endswith(f"examples/{name}.py")
        assert location["line"] == line_of(name, needle)
    assert document["run"]["status"] == "ok" and document["run"]["exit_code"] == 0
    assert document["summary"]["steps"] == steps


def test_warmup_compiles_are_on_steps_0_and_1(example_runs) -> None:
    run = load_run(example_runs["healthy_loop"])
    steps = run.steps()
    assert list(steps["step"]) == list(range(12))
    assert list(steps["compiles"][:2]) == [1, 1] and steps["compiles"][2:].sum() == 0
    compiles = run.compiles()
    assert list(compiles["step"]) == [0, 1]
    assert all(
        location.endswith(
            "examples/healthy_loop.py:" + str(line_of("healthy_loop", "        torch_xla.sync()"))
        )
        for location in compiles["location"]
    )


def test_recompiles_are_tied_to_their_steps(example_runs) -> None:
    run = load_run(example_runs["recompile_varying_batch"])
    compile_steps = list(run.compiles()["step"])
    # sizes cycle 32, 24, 17, 32, 9: new graphs at steps 0, 1 (optimizer state), 2, 4 ...
    assert compile_steps[:2] == [0, 1] and len(compile_steps) >= 4
    assert all(step < 12 for step in compile_steps)
    per_step = run.steps().set_index("step")["compiles"]
    assert [s for s, n in per_step.items() if n] == compile_steps


def test_arguments_stdin_output_and_exit_code_pass_through(tmp_path: Path) -> None:
    script = tmp_path / "echo.py"
    script.write_text(
        "import sys, torch, torch_xla\n"
        "x = torch.ones(2, device=torch_xla.device()) * 2\n"
        "torch_xla.sync()\n"
        "data = sys.stdin.read()\n"
        "print('args', sys.argv[1:], 'stdin', data.strip())\n"
        "print('to stderr', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    out = tmp_path / "run"
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "xlaprof",
            "run",
            "-q",
            "--out",
            str(out),
            "--",
            sys.executable,
            str(script),
            "--lr",
            "0.1",
            "--",
            "x y",
        ],
        input="hello",
        capture_output=True,
        text=True,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
        cwd=REPO,
        timeout=300,
    )
    assert process.returncode == 3
    assert process.stdout == "args ['--lr', '0.1', '--', 'x y'] stdin hello\n"
    assert process.stderr.strip().splitlines()[-1] == "to stderr"
    info = load_run(out).info
    assert (info.status, info.exit_code, info.steps_recorded) == ("exit", 3, 1)


def test_an_exception_is_recorded(tmp_path: Path) -> None:
    script = tmp_path / "boom.py"
    script.write_text(
        "import torch, torch_xla\n"
        "for i in range(3):\n"
        "    x = torch.ones(2, device=torch_xla.device()) * i\n"
        "    torch_xla.sync()\n"
        "raise ValueError('bad batch')\n"
    )
    result = cli("run", "-q", "--out", str(tmp_path / "run"), "--", sys.executable, str(script))
    assert result.returncode == 1 and "ValueError: bad batch" in result.stderr
    info = load_run(tmp_path / "run").info
    assert info.status == "exception" and info.detail == "ValueError: bad batch"
    assert info.steps_recorded == 3


def test_max_steps_stops_the_script_and_a_second_run_into_its_folder_does_not_collide(
    tmp_path: Path,
) -> None:
    # GIVEN two runs of the healthy loop into one folder, each stopped by --max-steps (the
    # first would train 50 steps)
    out = tmp_path / "shared"
    for steps, script_args in ((3, ("--steps", "50")), (2, ())):
        script = (sys.executable, str(EXAMPLES / "healthy_loop.py"), *script_args)
        result = cli("run", "-q", "--max-steps", str(steps), "--out", str(out), "--", *script)
        assert result.returncode == 0, result.stderr[-2000:]
    # THEN each has its own run directory, stopped at its own cap
    runs = sorted(load_runs(out), key=lambda r: len(r.steps()))
    assert len(runs) == 2 and runs[0].path != runs[1].path
    assert [len(r.steps()) for r in runs] == [2, 3]
    assert all(r.info.status == "max_steps" for r in runs)


def test_a_command_that_cannot_start_fails_cleanly(tmp_path: Path) -> None:
    result = cli("run", "--out", str(tmp_path / "r"), "--", "no-such-program-xyz")
    assert result.returncode == 127
    assert "no-such-program-xyz" in result.stderr and "Traceback" not in result.stderr


def test_unrolled_loop_names_the_loop_and_the_module_list(example_runs) -> None:
    document = json.loads(cli("analyze", "--json", str(example_runs["unrolled_layers"])).stdout)
    (finding,) = timeless_findings(document["findings"])
    evidence = finding["evidence"]
    assert evidence["layer_class"] == "Block"
    assert evidence["layer_stack"].startswith("self.blocks of Stack (nn.ModuleList of Block")
    assert evidence["loop"].endswith(
        f"unrolled_layers.py:{line_of('unrolled_layers', 'for blk in self.blocks:')}"
    )
    # 24 blocks: all but the edge blocks are structurally identical copies
    assert 20 <= evidence["repeats"] <= 24 and evidence["repeated_share"] > 0.5
    assert "scan_layers(self.blocks, x)" in finding["suggestion"]


def test_varying_batch_names_the_input_and_its_dimension(example_runs) -> None:
    document = json.loads(
        cli("analyze", "--json", str(example_runs["recompile_varying_batch"])).stdout
    )
    (finding,) = timeless_findings(document["findings"])
    evidence = finding["evidence"]
    assert evidence["change_kind"] == "input_shapes"
    inputs = evidence["inputs"]
    # every compile's batch, in compile order: the example's BATCH_SIZES, warm-up included
    batch_sizes = [256, 192, 136, 256, 72]
    assert all(i["varying_dims"] == {"0": batch_sizes} for i in inputs)
    assert finding["location"]["line"] == line_of(
        "recompile_varying_batch", "x, y = make_batch(next(sizes), device)"
    )
    widths = sorted(i["shapes"][0][1] for i in inputs)
    assert widths == [1, 256]  # y and x
    assert all(
        i["source"].endswith(f"_common.py:{line_of('_common', 'return x.to(device)')}")
        for i in inputs
    )
    assert "dim 0" in finding["title"] and "drop_last=True" in finding["suggestion"]


def test_data_dependent_shape_is_explained(example_runs) -> None:
    document = json.loads(
        cli("analyze", "--json", str(example_runs["data_dependent_shape"])).stdout
    )
    recompile = timeless_findings(document["findings"])[0]
    line = line_of("data_dependent_shape", "keep = torch.nonzero")
    assert recompile["evidence"]["change_kind"] == "data_dependent"
    assert (
        "aten::nonzero at " in recompile["title"]
        and f"data_dependent_shape.py:{line}" in recompile["title"]
    )
    assert "torch.where" in recompile["suggestion"]


def test_every_python_process_of_the_job_gets_its_own_run(tmp_path: Path) -> None:
    # GIVEN a job whose main script starts a second Python process that also trains
    worker = tmp_path / "worker.py"
    worker.write_text(
        "import torch, torch_xla\n"
        "for i in range(3):\n"
        "    x = torch.ones(4, device=torch_xla.device()) * i\n"
        "    torch_xla.sync()\n"
    )
    main = tmp_path / "main.py"
    main.write_text(
        "import subprocess, sys, torch, torch_xla\n"
        f"subprocess.run([sys.executable, {str(worker)!r}], check=True)\n"
        "for i in range(2):\n"
        "    x = torch.ones(4, device=torch_xla.device()) * i\n"
        "    torch_xla.sync()\n"
    )
    out = tmp_path / "run"
    result = cli("run", "-q", "--out", str(out), "--", sys.executable, str(main))
    assert result.returncode == 0, result.stderr
    # THEN each process wrote its own run directory, none overwrote the other
    runs = load_runs(out)
    assert sorted(len(r.steps()) for r in runs) == [2, 3]
    assert len({r.info.pid for r in runs}) == 2
    assert cli("analyze", "--json", str(out)).returncode == 0


def test_the_job_records_with_the_xlaprof_that_launched_it(tmp_path: Path) -> None:
    # GIVEN a job whose own path finds another xlaprof first: a stand-in package on its
    # PYTHONPATH, as an editable install of another checkout or an older release would be
    other = tmp_path / "other"
    (other / "xlaprof").mkdir(parents=True)
    (other / "xlaprof" / "__init__.py").write_text("raise ImportError('the other copy')\n")
    script = tmp_path / "job.py"
    script.write_text("import torch_xla, sys\nprint('XLAPROF', sys.modules['xlaprof'].__file__)\n")
    # WHEN it runs under this checkout's `xlaprof run`
    result = cli(
        "run",
        "-q",
        "--out",
        str(tmp_path / "out"),
        "--",
        sys.executable,
        str(script),
        env={"PYTHONPATH": str(other)},
    )
    # THEN its session is this checkout's package, and the other copy was never imported
    assert result.returncode == 0, result.stderr[-2000:]
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("XLAPROF ")]
    assert Path(line.split(" ", 1)[1]).resolve() == (REPO / "xlaprof" / "__init__.py").resolve()
    assert "profiling disabled" not in result.stderr
