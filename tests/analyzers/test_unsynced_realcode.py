"""Loops that never sync and graphs that grow (issue 37), on real library code recorded once.

Each run directory in sample_traces/realcode_runs/ is a real `xlaprof run` of a set-up of
examples/realcode (regenerate.py there says how), read here with no runtime needed. What each
must say comes from the set-up's docstring, its `# expect:` line and the bare runtime's counts
in examples/realcode/corpus.toml, never from xlaprof's output. Before issue 37 all of these were
wrong: diffusers' sampling loop (6 UNet + scheduler steps, no sync: one graph run once, a run
with no step) got no unrolled loop and a slow_compile fix of a persistent cache and
scan_layers; the Euler solver's pure loop likewise; generate() with the default cache and
pytorch/examples' regression (reads but no sync) were "a constant baked into the graph changes".
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest
from helpers import EXAMPLES, REPO, SAMPLES

from xlaprof import api
from xlaprof.findings import Finding, Kind

RUNS = SAMPLES / "realcode_runs"
REALCODE = EXAMPLES / "realcode"
sys.path.insert(0, str(EXAMPLES / "corpus"))
import judge  # noqa: E402

pytest.importorskip("google.protobuf")


def findings(name: str) -> list[Finding]:
    return api.analyze(RUNS / name, source_root=REPO)


def of_kind(found: list[Finding], kind: Kind) -> list[Finding]:
    return [f for f in found if f.kind == kind]


def where(finding: Finding) -> tuple[str, int]:
    assert finding.location is not None, finding.title
    return Path(finding.location.file).name, finding.location.line


def line_of(name: str, text: str) -> int:
    lines = (REALCODE / f"{name}.py").read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def test_a_sampling_loop_that_never_syncs_is_an_unrolled_loop_fixed_by_a_sync_per_step() -> None:
    # GIVEN diffusers' deconstructed sampling loop: UNet2DModel + DDPMScheduler.step for 6
    # timesteps, no sync, the image read once (the bare runtime: 1 compile, 1 execution)
    found = findings("diffusers_sampling_loop")
    (loop,) = of_kind(found, Kind.UNROLLED_LOOP)
    # THEN the loop is found on the run's only graph, at the user's `for t in ...` line,
    # through the library calls its body makes
    assert where(loop) == (
        "diffusers_sampling_loop.py",
        judge.marked_line("diffusers_sampling_loop", "unrolled_loop", REALCODE),
    )
    assert loop.evidence["repeats"] >= 5
    assert any("scheduling_ddpm" in c for c in loop.evidence["library_calls"])
    # AND the fix fits the body: the scheduler takes `t` (host tables, a branch), so a sync per
    # timestep after the body's last line, and scan called no drop-in
    assert loop.evidence["fix_kind"] == "sync_per_iteration"
    assert "`t` passed to scheduler.step()" in loop.suggestion
    last = line_of("diffusers_sampling_loop", "scheduler.step(noise_pred, t, sample)")
    assert f"torch_xla.sync() as the last statement of the loop body (after line {last})" in (
        loop.suggestion
    )
    assert "no drop-in" in loop.suggestion
    # AND slow_compile (31 s for the one compile when recorded) points at that loop, never at
    # a persistent cache or scan_layers
    (slow,) = of_kind(found, Kind.SLOW_COMPILE)
    assert slow.evidence["unrolled_loop"] == str(loop.location)
    assert "initialize_cache" not in slow.suggestion
    assert "scan_layers" not in slow.suggestion


def test_a_pure_loop_that_never_syncs_is_fixed_with_scan() -> None:
    # GIVEN a fixed-step Euler solver, x = x + dt * field(x) 8 times, loop variable unused
    found = findings("neural_ode_euler")
    (loop,) = of_kind(found, Kind.UNROLLED_LOOP)
    # THEN it is found at the loop and the fix is scan (the body is pure tensor work)
    assert where(loop) == (
        "neural_ode_euler.py",
        judge.marked_line("neural_ode_euler", "unrolled_loop", REALCODE),
    )
    assert loop.evidence["fix_kind"] == "scan"
    assert "torch_xla.experimental.scan.scan" in loop.suggestion
    assert loop.evidence["loop_variable_to_host"] == []


def test_generate_with_the_default_cache_is_growth_fixed_by_a_sync_per_token() -> None:
    # GIVEN model.generate() with the default cache and nothing syncing inside it
    (finding,) = of_kind(findings("hf_generate_dynamic_cache"), Kind.RECOMPILATION)
    # THEN the finding is growth, with op counts that rise at every read, at the generate call
    assert where(finding) == (
        "hf_generate_dynamic_cache.py",
        judge.marked_line("hf_generate_dynamic_cache", "recompilation", REALCODE),
    )
    assert finding.evidence["change_kind"] == "growth"
    ops = finding.evidence["graph_ops"]
    assert len(ops) >= 3 and all(b > a for a, b in itertools.pairwise(ops))
    assert "growing" in finding.title and "constant" not in finding.title
    assert "transformers/generation/" in finding.evidence["read_at"]
    # AND the fix is a sync per token (generate still compiles per length: measured)
    assert "StoppingCriteria" in finding.suggestion and "torch_xla.sync()" in finding.suggestion
    assert "whatever the cache" in finding.suggestion and "StaticCache" in finding.suggestion
    bare = judge.manifest(REALCODE)["hf_generate_dynamic_cache"]["bare"]
    assert finding.evidence["compiles_at_site"] <= bare["compiles"]


def test_reads_in_a_loop_that_never_syncs_are_growth_fixed_by_a_sync_per_iteration() -> None:
    # GIVEN pytorch/examples' regression: loss.item() each iteration, param.data.add_ updates,
    # no sync (the updates stay pending, each read compiles all of them)
    found = findings("pt_examples_regression")
    (finding,) = of_kind(found, Kind.RECOMPILATION)
    # THEN growth at the read, and the fix is a sync at the end of the loop body; the
    # iterations each grown graph holds are that one cause, not also an unrolled loop per graph
    assert of_kind(found, Kind.UNROLLED_LOOP) == []
    assert where(finding) == (
        "pt_examples_regression.py",
        judge.marked_line("pt_examples_regression", "recompilation", REALCODE),
    )
    assert finding.evidence["change_kind"] == "growth"
    assert "constant" not in finding.title
    loop = line_of("pt_examples_regression", "for batch_idx in count(1):")
    last = line_of("pt_examples_regression", "            break")
    assert f"loop at line {loop}" in finding.suggestion
    assert f"(after line {last})" in finding.suggestion
