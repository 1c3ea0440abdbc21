"""`xlaprof bench` on small models, on the real CPU runtime: a fix measured before and after,
and a target that cannot run refused before any process starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import EXAMPLES, SAMPLES, cli


def bench(kind: str, target: str, out: Path, *extra: str):  # type: ignore[no-untyped-def]
    return cli(
        "bench",
        kind,
        target,
        "--steps",
        "2",
        "--warmup",
        "1",
        "--out",
        str(out),
        *extra,
        cwd=EXAMPLES,
    )


@pytest.mark.runtime
def test_scanning_a_non_homogeneous_stack_fails_the_numerical_check(tmp_path: Path) -> None:
    # auto-detection refuses a ModuleList of mixed classes, once the model is built: before
    # the before side runs a step, and with no second process started
    refused = bench("scan", "bench_targets.py:mixed_stack", tmp_path / "a")
    assert refused.returncode == 19
    assert "no nn.ModuleList or nn.Sequential of identical layers" in refused.stderr
    assert "step 1 of" not in refused.stderr and "xlaprof bench scan: scan" not in refused.stderr
    assert not list((tmp_path / "a").rglob("steps.jsonl"))
    # ... and forcing it through scan_layers is caught by the numerical check (with the layer
    # traced once, --layer-pure, as without)
    options = ("--layers", "blocks", "--layer-pure")
    forced = bench("scan", "bench_targets.py:mixed_stack", tmp_path / "b", *options)
    assert forced.returncode == 18
    line = forced.stderr.strip().splitlines()[-1]
    assert "scan changes the results" in line and "not homogeneous" in line
    assert "DISAGREE" in forced.stdout and "Traceback" not in forced.stderr
    # and the header echoes the options that changed what was measured
    header = "xlaprof bench scan bench_targets.py:mixed_stack --layers blocks --layer-pure"
    assert header in forced.stdout


@pytest.mark.runtime
def test_remat_measures_memory_and_keeps_results(tmp_path: Path) -> None:
    result = bench("remat", "bench_targets.py:small_stack", tmp_path / "r", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["numerics"]["ok"]
    before, after = document["before"]["summary"], document["after"]["summary"]
    assert before["intermediate_bytes"] and after["intermediate_bytes"]
    assert any(note.startswith("intermediate tensor bytes") for note in document["notes"])


@pytest.mark.runtime
def test_offload_is_probed_safely_on_cpu(tmp_path: Path) -> None:
    result = bench("offload", "bench_targets.py:small_stack", tmp_path / "o", "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["supported"] is False
    assert "offload is not supported on this backend" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.runtime
def test_cache_says_whether_it_hit(tmp_path: Path) -> None:
    result = bench("cache", "bench_targets.py:small_stack", tmp_path / "c", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    cache = document["after"]["summary"]["persistent_cache"]
    note = document["notes"][0]
    if cache["deserialize_failures"] or not cache["hits"]:  # the CPU backend cannot load them
        assert note.startswith("the cache did not load")
        # and no row offers a difference as the cache's improvement (issue 29: "1.17x better"
        # rows under a footnote saying the cache never loaded)
        for row in document["comparison"]:
            assert row["ratio"] is None and "better" not in row["change"]
    else:
        assert "loaded" in note


def test_bench_with_a_missing_target_is_17_and_leaves_nothing(tmp_path: Path) -> None:
    result = cli("bench", "scan", "nosuch.py:make", cwd=tmp_path)
    assert result.returncode == 17 and "nosuch.py: no such file" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_bench_given_a_saved_result_says_in_one_line_why_not(tmp_path: Path) -> None:
    # GIVEN a result saved by `xlaprof analyze --json` (the sample log's)
    done = cli("analyze", "--json", str(SAMPLES / "healthy_loop.log"))
    assert done.returncode == 0, done.stderr
    (tmp_path / "saved.json").write_text(done.stdout)
    # WHEN bench is given it as its target
    result = cli("bench", "scan", "saved.json", cwd=tmp_path)
    # THEN one line says why a saved result cannot be a side, exit 17, and nothing is run
    errors = [line for line in result.stderr.splitlines() if line.startswith("xlaprof: error")]
    assert result.returncode == 17 and len(errors) == 1, result.stderr
    assert "a saved result cannot be a side" in errors[0] and "xlaprof diff" in errors[0]
    assert "Traceback" not in result.stderr and not (tmp_path / "runs").exists()


@pytest.mark.runtime
def test_bench_with_a_target_that_fails_to_load_is_17_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("def other():\n    pass\n")
    result = cli("bench", "cache", "model.py:make", cwd=tmp_path)
    assert result.returncode == 17, result.stderr
    assert "'make' is not a function" in result.stderr
    assert not (tmp_path / "runs").exists()
