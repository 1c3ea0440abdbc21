"""The inputs a user names (``xlaprof.inputs.paths``): text logs and run directories, whatever
their bytes.

The fuzz tests' property: given any bytes where a file is expected, the loader returns (with
warnings for what it could not read) or raises an ``XlaprofError`` (one line, a documented exit
code), never anything else, never past a time limit (``fuzzing.py``).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import os
import random
import shutil
from pathlib import Path

import pytest
from fuzzing import (
    MUTATIONS,
    SMALL,
    Outcomes,
    deep_json,
    mutate_bytes,
    mutate_gzip,
    mutate_json_value,
    mutate_jsonl,
    mutate_text,
    run_templates,
    save_repro,
    text_sources,
)

from xlaprof.errors import InputUnreadable


def test_text_loader_never_crashes(tmp_path: Path) -> None:
    from xlaprof.inputs.paths import load_text_inputs

    sources = [(p.name, p.read_text()) for p in text_sources()]
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
            save_repro("text", seed, name, data)
    outcomes.check()


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
    if relative.endswith(".pb.gz"):  # a graph's HloProto: binary inside the gzip
        path.write_bytes(mutate_gzip(rng, data, lambda c: mutate_bytes(rng, c)))
    elif relative.endswith(".gz"):
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

    templates = run_templates(tmp_path)
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

    templates = run_templates(tmp_path)
    outcomes = Outcomes("modules.json and deep JSON", required=SMALL * 2)
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
    outcomes.check()


def test_a_fifo_or_a_device_is_refused_without_blocking(tmp_path: Path) -> None:
    from xlaprof.inputs.paths import load_text_inputs

    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(InputUnreadable, match="not a regular file"):
            load_text_inputs([path])
