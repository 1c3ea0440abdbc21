"""Fuzzing every loader with mutations of real inputs: xlaprof never crashes on bad data.

The property, per loader: given any bytes where a file is expected, the loader returns (with
warnings for what it could not read) or raises an ``XlaprofError`` (a one-line message and a
documented exit code). It never raises anything else (the CLI's exit 70), never runs past a
time limit, and never grows memory with the damage (bombs are capped while inflating).

* text: metrics reports and debug logs (``load_text_inputs``), from sample_traces/ and
  tests/data/;
* xplane: ``*.xplane.pb`` (``load_trace``), from ../shared/traces and the sample runs, with
  protobuf-aware mutations (stats out of range, timestamps past int64 picoseconds, ...);
* Chrome trace: ``*.trace.json.gz`` (``load_trace``), structured JSON and gzip mutations;
* run directory: one damaged file per run (``load_parts`` + the analyzers + the JSON
  document), from the sample runs;
* issue 31: pod caches (damaged bytes, metadata, columns: a miss, never a crash or another
  number), ``modules.json`` and JSON nested past any recursion limit (FIFOs and devices in
  their place too), and hostile names (terminal sequences, markup) through the console and
  HTML renderers.

Mutations are seeded, so a failure names a seed that reproduces it. The count per loader is
``XLAPROF_FUZZ_MUTATIONS`` (default 500); the suite takes about a minute on two cores.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import os
import random
import re
import resource
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from fuzzing import (
    HOSTILE_NAMES,
    Hang,
    deep_json,
    hostile_name,
    mutate_bytes,
    mutate_chrome_trace,
    mutate_gzip,
    mutate_json_value,
    mutate_jsonl,
    mutate_parquet_cache,
    mutate_text,
    mutate_xspace,
    time_limit,
)
from helpers import DATA, REPO, SAMPLES

from xlaprof.errors import XlaprofError

MUTATIONS = int(os.environ.get("XLAPROF_FUZZ_MUTATIONS", "500"))
SHARED_TRACES = REPO.parent / "shared" / "traces"
# One call on a mutated input of at most a few hundred KB: far above any honest run time.
CALL_LIMIT_S = 30.0
# Peak memory may not grow by more than this over the whole loop (inputs are < 2 MB).
MEMORY_GROWTH_LIMIT = 1024**3
REPRO_DIR = os.environ.get("XLAPROF_FUZZ_REPRO_DIR")
_MAX_TEMPLATE_GRAPH_BYTES = 64 * 1024


class Outcomes:
    """Counts per outcome, and the first input that crashed per distinct exception."""

    def __init__(self, loader: str) -> None:
        self.loader = loader
        self.ok = 0
        self.errors = 0
        self.crashes: dict[str, tuple[int, str]] = {}
        self.crash_count = 0
        self.peak_before = _peak_rss()

    def call(self, seed: int, function: Callable[[], object], describe: str) -> None:
        try:
            with time_limit(CALL_LIMIT_S):
                function()
        except XlaprofError:
            self.errors += 1
        except (Exception, Hang) as error:  # the property under test
            self.crash_count += 1
            # Numbers (offsets, CRCs, values) vary between inputs that hit the same bug.
            message = re.sub(r"0x[0-9a-fA-F]+|\d+", "#", str(error))[:120]
            key = f"{type(error).__name__}: {message}"
            self.crashes.setdefault(key, (seed, describe))
        else:
            self.ok += 1

    def check(self) -> None:
        total = self.ok + self.errors + self.crash_count
        required = getattr(self, "total_required", MUTATIONS)
        assert total >= required, f"{self.loader}: only {total} mutations ran"
        growth = _peak_rss() - self.peak_before
        lines = [f"{k} (seed {s}, {d})" for k, (s, d) in sorted(self.crashes.items())]
        assert not self.crashes, (
            f"{self.loader}: {self.crash_count} of {total} mutated inputs crashed the loader, "
            f"{len(self.crashes)} distinct:\n" + "\n".join(lines)
        )
        assert growth < MEMORY_GROWTH_LIMIT, f"{self.loader}: peak RSS grew by {growth} bytes"
        # Both outcomes must occur, or the mutations are too weak (or too strong) to test much.
        assert self.ok and self.errors, f"{self.loader}: ok={self.ok} errors={self.errors}"


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _save(loader: str, seed: int, name: str, data: bytes) -> None:
    """Keep a crashing input when XLAPROF_FUZZ_REPRO_DIR is set (for bug reports)."""
    if REPRO_DIR:
        target = Path(REPRO_DIR) / loader / f"{seed}-{name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


# -- text: metrics reports and debug logs -------------------------------------------------------
def _text_sources() -> list[Path]:
    files = sorted(SAMPLES.glob("*.log")) + sorted(SAMPLES.glob("*.fallbacks"))
    files += sorted(DATA.glob("*.log")) + sorted(DATA.glob("*.txt"))
    files += sorted(SAMPLES.glob("runs/*/*/metrics/final.txt"))
    return files


def test_text_loader_never_crashes(tmp_path: Path) -> None:
    from xlaprof.inputs.paths import load_text_inputs

    sources = [(p.name, p.read_text()) for p in _text_sources()]
    assert len(sources) >= 15
    outcomes = Outcomes("text")
    target = tmp_path / "input.log"
    for seed in range(MUTATIONS):
        rng = random.Random(seed)
        name, text = rng.choice(sources)
        if rng.random() < 0.8:
            data = mutate_text(rng, text).encode("utf-8", "surrogatepass")
        else:
            data = mutate_bytes(rng, text.encode())
        target.write_bytes(data)
        before = outcomes.crash_count
        outcomes.call(seed, lambda: load_text_inputs([target]), name)
        if outcomes.crash_count > before:
            _save("text", seed, name, data)
    outcomes.check()


# -- traces ---------------------------------------------------------------------------------------
def _xplane_sources() -> list[Path]:
    files = sorted(SHARED_TRACES.glob("*.xplane.pb")) if SHARED_TRACES.is_dir() else []
    files = [f for f in files if f.stat().st_size < 400_000]
    runs = sorted(SAMPLES.glob("runs/*/*/plugins/profile/*/*.xplane.pb"))
    return files + [f for f in runs if f.stat().st_size < 250_000]


def _chrome_sources() -> list[Path]:
    files = sorted(SHARED_TRACES.glob("*.trace.json.gz")) if SHARED_TRACES.is_dir() else []
    return files + sorted(SAMPLES.glob("runs/*/*/plugins/profile/*/*.trace.json.gz"))


def test_xplane_loader_never_crashes(tmp_path: Path) -> None:

    sources = _xplane_sources()
    assert len(sources) >= 3
    space_class = _xspace_class()
    originals = [(p.name, p.read_bytes()) for p in sources]
    outcomes = Outcomes("xplane")
    for seed in range(MUTATIONS):
        rng = random.Random(seed)
        name, data = rng.choice(originals)
        if space_class is not None and rng.random() < 0.75:
            space = space_class()
            space.ParseFromString(data)
            mutate_xspace(rng, space)
            mutated = space.SerializeToString()
        else:
            mutated = mutate_bytes(rng, data)
        folder = tmp_path / str(seed) / "plugins" / "profile" / "1"
        folder.mkdir(parents=True)
        path = folder / "host.xplane.pb"
        path.write_bytes(mutated)
        before = outcomes.crash_count
        outcomes.call(seed, functools.partial(_load_trace, path), name)
        if outcomes.crash_count > before:
            _save("xplane", seed, name, mutated)
        shutil.rmtree(tmp_path / str(seed))
    outcomes.check()


def _load_trace(path: Path) -> None:
    from xlaprof.inputs.traces import load_trace

    load_trace(path).step_times()


def _xspace_class():  # type: ignore[no-untyped-def]
    """The XSpace message class, if the xplane parser exposes one (for structured mutations)."""
    from xlaprof.parse.xplane import schema as xplane

    factory = getattr(xplane, "xspace_class", None)
    return factory() if factory is not None else None


def test_chrome_trace_loader_never_crashes(tmp_path: Path) -> None:

    sources = _chrome_sources()
    assert len(sources) >= 3
    originals = [(p.name, p.read_bytes()) for p in sources]
    outcomes = Outcomes("chrome")
    for seed in range(MUTATIONS):
        rng = random.Random(seed)
        name, data = rng.choice(originals)
        mutated = mutate_gzip(rng, data, functools.partial(mutate_chrome_trace, rng))
        if rng.random() < 0.02:  # nested past any recursion limit (issue 31)
            mutated = gzip.compress(b'{"traceEvents": ' + deep_json(rng) + b"}", 1)
        path = tmp_path / f"{seed}.trace.json.gz"
        path.write_bytes(mutated)
        before = outcomes.crash_count
        outcomes.call(seed, functools.partial(_load_trace, path), name)
        if outcomes.crash_count > before:
            _save("chrome", seed, name, mutated)
        path.unlink()
    outcomes.check()


REPRO = Path(__file__).parent / "data" / "fuzz_repro"


_REPROS = sorted(p.name for p in REPRO.iterdir() if p.name != "README.md")


@pytest.mark.parametrize("name", _REPROS)
def test_trace_reproducers(name: str) -> None:
    """Each minimal input of a crash the trace fuzzing found loads or raises XlaprofError."""
    from xlaprof.inputs.traces import load_trace

    with contextlib.suppress(XlaprofError):
        load_trace(REPRO / name).step_times()


# -- run directories -------------------------------------------------------------------------------
def _run_templates(tmp_path: Path) -> list[Path]:
    """The sample runs without their traces (fuzzed on their own above).

    Runs with large graphs are left out: parsing a 2 MB HLO 500 times would take minutes and
    test nothing the small graphs do not.
    """
    templates = []
    for run in sorted(SAMPLES.glob("runs/*/*")):
        if not (run / "run.json").is_file():
            continue
        if sum(p.stat().st_size for p in run.glob("graphs/*")) > _MAX_TEMPLATE_GRAPH_BYTES:
            continue
        target = tmp_path / "templates" / run.parent.name
        shutil.copytree(run, target, ignore=shutil.ignore_patterns("plugins"))
        templates.append(target)
    return templates


def _damage_run(rng: random.Random, run: Path) -> str:
    """Damage one file of ``run``; say which and how."""
    files = sorted(p for p in run.rglob("*") if p.is_file())
    path = rng.choice(files)
    relative = str(path.relative_to(run))
    op = rng.random()
    if op < 0.05:
        path.unlink()
        return f"{relative} deleted"
    if op < 0.08:
        path.unlink()
        path.mkdir()
        return f"{relative} replaced by a folder"
    if op < 0.11 and relative.startswith("graphs/") and relative.endswith(".gz"):
        path.write_bytes(gzip.compress(b"\0" * (80 * 1024**2), 9))
        return f"{relative} is a gzip bomb"
    data = path.read_bytes()
    if relative.endswith(".gz"):
        path.write_bytes(mutate_gzip(rng, data, lambda c: mutate_text(rng, c.decode()).encode()))
    elif relative.endswith((".jsonl", ".json")):
        if relative == "run.json" and rng.random() < 0.7:
            try:
                document = json.loads(data)
            except (json.JSONDecodeError, UnicodeDecodeError):
                document = None
            if document is not None:
                path.write_text(json.dumps(mutate_json_value(rng, document)))
            else:
                path.write_bytes(mutate_bytes(rng, data))
        else:
            path.write_text(mutate_jsonl(rng, data.decode("utf-8", "replace")))
    elif rng.random() < 0.8:
        path.write_bytes(mutate_text(rng, data.decode("utf-8", "replace")).encode())
    else:
        path.write_bytes(mutate_bytes(rng, data))
    return f"{relative} mutated"


def test_run_directory_loader_never_crashes(tmp_path: Path) -> None:
    from xlaprof.inputs.paths import DEFAULT_MAX_INPUT_BYTES, load_parts
    from xlaprof.pipeline import analyze_parts
    from xlaprof.report import json_out

    templates = _run_templates(tmp_path)
    assert len(templates) >= 5
    outcomes = Outcomes("run directory")

    def load_and_analyze(root: Path) -> None:
        parts = load_parts([root], DEFAULT_MAX_INPUT_BYTES, 2)
        results = analyze_parts(parts)
        json_out.dumps(json_out.results_document(results))
        for part in parts:
            if part.run is not None:
                part.run.steps()
                part.run.events()
                part.run.regions_frame()

    for seed in range(MUTATIONS):
        rng = random.Random(seed)
        template = rng.choice(templates)
        root = tmp_path / "run"
        shutil.copytree(template, root)
        how = "; ".join(_damage_run(rng, root) for _ in range(rng.randint(1, 2)))
        outcomes.call(seed, functools.partial(load_and_analyze, root), f"{template.name}: {how}")
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(root)
    outcomes.check()


# -- hypothesis: arbitrary text and JSON values ----------------------------------------------------
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_STEP_KEYS = ["step", "wall_s", "compiles", "compile_s", "aten", "debug_offset", "ops", "start"]


@hypothesis.settings(max_examples=150, deadline=None)
@hypothesis.given(text=st.text(max_size=400))
def test_text_parsers_take_any_text(text: str) -> None:
    from xlaprof.parse.debug_log import parse_debug_log
    from xlaprof.parse.metrics_report import parse_metrics_report

    metrics = parse_metrics_report(text)
    debug = parse_debug_log(text)
    assert metrics.reports_seen >= len(metrics.reports)
    assert all(w.line >= 0 for w in [*metrics.warnings, *debug.warnings])


@hypothesis.settings(max_examples=150, deadline=None)
@hypothesis.given(
    rows=st.lists(
        st.one_of(st.fixed_dictionaries({}, optional={k: _json for k in _STEP_KEYS}), _json),
        max_size=5,
    ),
    regions=st.lists(_json, max_size=3),
    samples=st.lists(_json, max_size=3),
)
def test_run_rows_of_any_json_type_load(tmp_path_factory, rows, regions, samples) -> None:
    from xlaprof.inputs.paths import DEFAULT_MAX_INPUT_BYTES, load_parts
    from xlaprof.pipeline import analyze_parts

    root = tmp_path_factory.mktemp("hyp")
    (root / "run.json").write_text(json.dumps({"schema": 1, "status": "ok"}))
    for name, values in (("steps", rows), ("regions", regions), ("samples", samples)):
        (root / f"{name}.jsonl").write_text("".join(json.dumps(v) + "\n" for v in values))
    parts = load_parts([root], DEFAULT_MAX_INPUT_BYTES, 2)
    analyze_parts(parts)
    for step in parts[0].data.steps:
        assert isinstance(step.step, int) and not isinstance(step.step, bool)
        assert step.wall_s is None or isinstance(step.wall_s, float)


# -- issue 31: caches, modules.json, deep nesting, names -----------------------------------------
SMALL = max(MUTATIONS // 25, 20)  # each input is a whole load: fewer, but every kind


def test_pod_cache_damage_is_a_miss_never_a_crash_or_a_wrong_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_pod import _write_host

    from xlaprof.inputs import pod
    from xlaprof.inputs.traces import load_trace

    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the cache key lives there
    session = tmp_path / "logdir" / "plugins" / "profile" / "1"
    for host in ("host-0", "host-1"):
        _write_host(session / f"{host}.xplane.pb")
    key = ["host", "device", "step"]

    def steps() -> object:
        trace = load_trace(tmp_path / "logdir", lazy=True, workers=1)
        return pod.host_steps(trace).sort_values(key).reset_index(drop=True)

    truth = steps()
    cache = session / "host-0.xplane.pb.xlaprof.parquet"
    good = cache.read_bytes()
    crashes: dict[str, tuple[int, str]] = {}
    for seed in range(SMALL):
        rng = random.Random(seed)
        how, damaged = mutate_parquet_cache(rng, good)
        cache.write_bytes(damaged)
        try:
            with time_limit(CALL_LIMIT_S):
                got = steps()
            assert got.equals(truth), "other numbers than the capture's"
        except (Exception, Hang) as error:  # XlaprofError included: a damaged cache is a miss
            crashes.setdefault(f"{type(error).__name__}: {error}"[:160], (seed, how))
        cache.write_bytes(good)
    assert not crashes, "\n".join(f"{k} (seed {s}, {h})" for k, (s, h) in crashes.items())


def _hostile_modules(rng: random.Random, path: Path) -> str:
    """Put something hostile where ``modules.json`` (or another run JSON file) goes."""
    path.unlink(missing_ok=True)
    op = rng.randrange(5)
    if op == 0:
        path.write_bytes(deep_json(rng))
        return "deep nesting"
    if op == 1:
        os.mkfifo(path)
        return "a FIFO"
    if op == 2:
        path.symlink_to("/dev/zero")
        return "/dev/zero"
    if op == 3:
        document = {"step": 1, "stacks": [{"class": "Block", "calls": [["m.py", 3]]}],
                    "repeated": [{"class": "Block", "count": 4}]}  # fmt: skip
        path.write_text(json.dumps(mutate_json_value(rng, document)))
        return "hostile values"
    path.write_bytes(mutate_bytes(rng, b'{"step": 1, "stacks": [], "repeated": []}'))
    return "damaged bytes"


def test_modules_json_and_deep_nesting_never_crash(tmp_path: Path) -> None:
    from xlaprof.inputs.paths import DEFAULT_MAX_INPUT_BYTES, load_parts
    from xlaprof.pipeline import analyze_parts
    from xlaprof.report import json_out

    templates = _run_templates(tmp_path)
    outcomes = Outcomes("modules.json and deep JSON")
    for seed in range(SMALL * 2):
        rng = random.Random(seed)
        template = rng.choice(templates)
        root = tmp_path / "run"
        shutil.copytree(template, root)
        name = rng.choice(["modules.json"] * 6 + ["dynamo.jsonl", "run.json", "steps.jsonl"])
        how = f"{name}: {_hostile_modules(rng, root / name)}"

        def load_and_analyze(root: Path = root) -> None:
            parts = load_parts([root], DEFAULT_MAX_INPUT_BYTES, 2)
            json_out.dumps(json_out.results_document(analyze_parts(parts)))

        outcomes.call(seed, load_and_analyze, how)
        shutil.rmtree(root)
    outcomes.total_required = SMALL * 2
    outcomes.check()


def _raw_controls(text: str) -> set[str]:
    return {c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0}


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
            assert not _raw_controls(shown), f"raw controls {sorted(_raw_controls(shown))!r}"
            assert '<a href="https://evil' not in web  # in the terminal it is only text
        except (Exception, Hang) as error:
            failures.setdefault(f"{type(error).__name__}: {error}"[:160], (seed, repr(names)))
        path.unlink()
    assert not failures, "\n".join(f"{k} (seed {s}, {n})" for k, (s, n) in failures.items())
