"""The fuzz harness and its mutators: deterministic, seeded, and typed per format.

The fuzz tests sit with the loader each one fuzzes (inputs/test_paths.py, inputs/test_traces.py,
inputs/pod/test_cache.py, rundir/test_reader.py, test_escape.py); what they share is here.

Each mutator takes a ``random.Random`` and the bytes (or parsed form) of a real input and
returns a damaged copy. Byte-level mutations find framing bugs (truncation, bad gzip, bad
varints); structured ones (JSON values of the wrong type, protobuf stats out of range) get past
the framing to the code that trusts field types, where most crashes live.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import random
import re
import resource
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from helpers import (
    DATA,
    SAMPLE_RUNS,
    SAMPLES,
    SHARED_CAPTURES,
    SHARED_XPLANES,
    sample_capture,
    sample_run,
    shared_trace,
)

from xlaprof.errors import XlaprofError

# Values that break code assuming a type or a range.
HOSTILE_JSON: list[Any] = [
    None,
    "abc",
    "",
    "nan",
    "1e308",
    -1,
    0,
    2**63,
    2**64 - 1,
    -(2**63) - 1,
    1e308,
    -1e308,
    True,
    [],
    [1, 2, 3],
    [[1]],
    {},
    {"a": [1]},
    "../../etc/passwd",
    "/etc/passwd",
    "\x00",
    "x" * 300,
]
HOSTILE_TEXT = [
    "nan",
    "inf",
    "-1",
    "1e308",
    "18446744073709551615",
    "-10s",
    "\x0c",
    "\u2028",
    "\r",
    "\x00",
    "Metric: ",
    "Counter: ",
    "Value: ",
    "TotalSamples: ",
    "Accumulator: ",
    "Percentiles: 50%=",
    "[MetricsData; step=99999999999999999999]",
    "Compilation Analysis: ",
    "Execution Analysis: ",
    "Post Compilation Analysis: ",
    "================================================================================",
    "--------------------------------------------------------------------------------",
    "pt-xla-profiler: ",
    "FRAME (count=18446744073709551616):",
    "[TAG aten::x From Thread 1]",
    "  fn (/etc/passwd:1)",
    "  fn (:99999999999999999999)",
    "\udcff".encode("utf-8", "surrogatepass").decode("latin-1"),
]
_INTERESTING_BYTES = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0x0A, 0x0D, 0x22, 0x7B, 0x5B]


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """One to four byte-level edits: flips, overwrites, cuts, deletions, duplications."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not out:
            out += bytes([rng.randrange(256)])
            continue
        op = rng.randrange(7)
        at = rng.randrange(len(out))
        if op == 0:
            out[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            out[at] = rng.choice(_INTERESTING_BYTES)
        elif op == 2:
            del out[rng.randrange(len(out)) :]
        elif op == 3:
            end = min(len(out), at + rng.randint(1, 64))
            del out[at:end]
        elif op == 4:
            end = min(len(out), at + rng.randint(1, 256))
            out[at:at] = out[at:end] * rng.randint(1, 3)
        elif op == 5:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:
            end = min(len(out), at + 8)
            out[at:end] = b"\xff" * (end - at)
    return bytes(out)


def mutate_text(rng: random.Random, text: str) -> str:
    """Line-level edits: hostile tokens spliced into lines, lines cut, dropped or repeated."""
    lines = text.split("\n")
    for _ in range(rng.randint(1, 4)):
        if not lines:
            lines = [""]
        at = rng.randrange(len(lines))
        op = rng.randrange(6)
        line = lines[at]
        if op == 0:
            cut = rng.randint(0, len(line))
            lines[at] = line[:cut] + rng.choice(HOSTILE_TEXT) + line[cut:]
        elif op == 1:
            # Replace the value after a "Field:" with a hostile one.
            head, sep, _value = line.partition(": ")
            lines[at] = head + (sep or ": ") + rng.choice(HOSTILE_TEXT)
        elif op == 2:
            lines[at] = line[: rng.randint(0, len(line))]
        elif op == 3:
            del lines[at : at + rng.randint(1, 8)]
        elif op == 4:
            lines[at:at] = lines[at : at + rng.randint(1, 20)] * rng.randint(1, 3)
        else:
            lines.insert(at, rng.choice(HOSTILE_TEXT))
    return "\n".join(lines)


def _paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    yield prefix
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value[:50]):
            yield from _paths(inner, (*prefix, index))


def mutate_json_value(rng: random.Random, value: Any) -> Any:
    """Replace one node of a JSON document with a hostile value (or drop a key)."""
    paths = list(_paths(value))
    path = rng.choice(paths)
    if not path:
        return rng.choice(HOSTILE_JSON)
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and rng.random() < 0.2:
        del parent[path[-1]]
    else:
        parent[path[-1]] = rng.choice(HOSTILE_JSON)
    return value


def mutate_jsonl(rng: random.Random, text: str) -> str:
    """JSON lines: some lines get a hostile value, become non-objects, or are cut."""
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return rng.choice(["[1,2,3]", "null", "{}", "{"])
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(lines))
        op = rng.randrange(4)
        if op == 0:
            try:
                lines[at] = json.dumps(mutate_json_value(rng, json.loads(lines[at])))
            except (json.JSONDecodeError, ValueError):
                lines[at] = "{"
        elif op == 1:
            lines[at] = json.dumps(rng.choice(HOSTILE_JSON))
        elif op == 2:
            lines[at] = lines[at][: rng.randint(0, len(lines[at]))]
        else:
            lines[at] = mutate_bytes(rng, lines[at].encode()).decode("utf-8", "replace")
    return "\n".join(lines) + "\n"


def mutate_gzip(rng: random.Random, data: bytes, inner: Callable[[bytes], bytes]) -> bytes:
    """Either damage the compressed stream, or damage the content and compress it again."""
    if rng.random() < 0.3:
        return mutate_bytes(rng, data)
    try:
        content = gzip.decompress(data)
    except (OSError, EOFError):
        return mutate_bytes(rng, data)
    return gzip.compress(inner(content), compresslevel=1)


def mutate_chrome_trace(rng: random.Random, data: bytes) -> bytes:
    """A Chrome trace JSON: structured edits most of the time, byte edits otherwise."""
    if rng.random() < 0.25:
        return mutate_bytes(rng, data)
    try:
        document = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return mutate_bytes(rng, data)
    events = document.get("traceEvents") if isinstance(document, dict) else None
    for _ in range(rng.randint(1, 4)):
        if isinstance(events, list) and events and rng.random() < 0.8:
            at = rng.randrange(len(events))
            event = events[at]
            if isinstance(event, dict) and event and rng.random() < 0.7:
                key = rng.choice([*event.keys(), "ts", "dur", "pid", "tid", "args", "ph", "name"])
                event[key] = rng.choice(HOSTILE_JSON)
            else:
                events[at] = rng.choice(HOSTILE_JSON)
        else:
            document = mutate_json_value(rng, document)
            events = document.get("traceEvents") if isinstance(document, dict) else None
    return json.dumps(document).encode()


# Protobuf stat values that break code trusting them (the step_num list included).
_HOSTILE_STATS: list[tuple[str, Any]] = [
    ("str_value", "abc"),
    ("str_value", "nan"),
    ("str_value", ""),
    ("double_value", math.nan),
    ("double_value", math.inf),
    ("double_value", -math.inf),
    ("double_value", 1e308),
    ("uint64_value", 2**64 - 1),
    ("int64_value", -(2**63)),
    ("int64_value", 2**63 - 1),
    ("int64_value", -1),
    ("ref_value", 2**64 - 1),
    ("bytes_value", b"\xff\x00"),
]
_HOSTILE_INTS = [0, -1, 2**63 - 1, -(2**63), 9_300_000_000_000_000, 2**62]


def mutate_xspace(rng: random.Random, space: Any) -> None:
    """Edit a parsed XSpace message in place: stats, timestamps, ids and planes."""
    planes = list(space.planes)
    if not planes:
        return
    for _ in range(rng.randint(1, 4)):
        plane = rng.choice(planes)
        op = rng.randrange(7)
        lines = list(plane.lines)
        if op == 0 and lines:
            rng.choice(lines).timestamp_ns = rng.choice(_HOSTILE_INTS)
        elif op in (1, 2) and lines:
            line = rng.choice(lines)
            if line.events:
                event = rng.choice(list(line.events))
                if op == 1:
                    setattr(
                        event,
                        rng.choice(["offset_ps", "duration_ps", "metadata_id"]),
                        rng.choice(_HOSTILE_INTS),
                    )
                else:
                    _hostile_stat(rng, event, plane)
        elif op == 3 and plane.event_metadata:
            key = rng.choice(list(plane.event_metadata.keys()))
            metadata = plane.event_metadata[key]
            if rng.random() < 0.5:
                del plane.event_metadata[key]
            else:
                metadata.name = rng.choice(["", "\x00", "x" * 1000, "$core.py:1 step"])
        elif op == 4 and plane.stat_metadata:
            key = rng.choice(list(plane.stat_metadata.keys()))
            plane.stat_metadata[key].name = rng.choice(["step_num", "hlo_op", "", "group_id"])
        elif op == 5:
            plane.name = rng.choice(["", "/device:TPU:0", "/host:CPU", "\xff", "/device:GPU:99"])
        else:
            space.planes.add().CopyFrom(plane)
        planes = list(space.planes)


def _hostile_stat(rng: random.Random, event: Any, plane: Any) -> None:
    names = {v.name: k for k, v in plane.stat_metadata.items()}
    stat = event.stats.add()
    wanted = rng.choice(["step_num", "hlo_op", "hlo_module", "group_id", None])
    stat.metadata_id = names.get(wanted, rng.choice([*_HOSTILE_INTS[:2], 12345]))
    field, value = rng.choice(_HOSTILE_STATS)
    with contextlib.suppress(ValueError, TypeError):
        setattr(stat, field, value)


class Hang(Exception):
    """A loader call ran past its time limit (raised by ``time_limit``)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ``Hang`` in the main thread if the block runs past ``seconds`` (SIGALRM)."""

    def _raise(_signum: int, _frame: Any) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- issue 31: deep nesting, hostile names, caches ------------------------------------------------
# Names a capture can give its hosts, ops and regions: terminal sequences (OSC title and
# hyperlink, conceal, erase line, CR), rich markup, plotly label markup, XML-illegal characters.
HOSTILE_NAMES = [
    "\x1b]0;pwned\x07",
    "\x1b]8;;https://evil.example\x07link\x1b]8;;\x07",
    "\x1b[8mhidden\x1b[0m",
    "\x1b[2K\rerased",
    "[link=https://evil.example]op[/link]",
    "[/oops]",
    "[bold red]",
    '<a href="https://evil.example">x</a>',
    "<br>line<b>bold</b>",
    "&lt;escaped&gt;",
    "\u202eevil\u202c",
    "\x00nul",
    "\ufffe\uffff",
    "%0A::error::injected",
    ",:%",
]


def hostile_name(rng: random.Random) -> str:
    """A name made of one to three hostile pieces around ordinary text."""
    pieces = [rng.choice(HOSTILE_NAMES) for _ in range(rng.randint(1, 3))]
    pieces.insert(rng.randrange(len(pieces) + 1), f"op{rng.randrange(100)}")
    return "".join(pieces)


def deep_json(rng: random.Random, depth: int = 200_000) -> bytes:
    """JSON nested ``depth`` deep (lists or objects): past any recursion limit."""
    if rng.random() < 0.5:
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def mutate_parquet_cache(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    """A pod cache (Parquet) damaged: bytes, its metadata (stamp, summary) or its columns.

    Returns how, and the new bytes. Metadata and column edits keep the file valid Parquet, so
    the damage reaches the code that trusts a cache, not only the format's own checks.
    """
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    op = rng.randrange(4)
    if op == 0:
        return "bytes", mutate_bytes(rng, data)
    table = pq.read_table(io.BytesIO(data))
    metadata = dict(table.schema.metadata or {})
    if op == 1:
        key = rng.choice([b"xlaprof.stamp", b"xlaprof.summary"])
        value = metadata.get(key, b"")
        if key == b"xlaprof.summary" and rng.random() < 0.7:
            try:
                value = json.dumps(mutate_json_value(rng, json.loads(value))).encode()
            except (ValueError, TypeError):
                value = b"{"
        else:
            value = mutate_bytes(rng, value)
        metadata[key] = value
        how = f"metadata {key.decode()}"
    elif op == 2:
        name = rng.choice(table.column_names)
        junk = pa.array([rng.choice(["junk", "", None]) for _ in range(table.num_rows)])
        table = table.set_column(table.column_names.index(name), name, junk)
        how = f"column {name} junk"
    else:
        keep = [n for n in table.column_names if rng.random() < 0.8]
        table = table.select(keep or table.column_names[:1])
        how = "columns dropped"
    out = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(metadata), out)
    return how, out.getvalue()


# ---------------------------------------------------------------- the harness
#
# The property, per loader: given any bytes where a file is expected, the loader returns (with
# warnings for what it could not read) or raises an ``XlaprofError`` (a one-line message and a
# documented exit code). It never raises anything else (the CLI's exit 70), never runs past a
# time limit, and never grows memory with the damage (bombs are capped while inflating).
# Mutations are seeded, so a failure names a seed that reproduces it. The count per loader is
# ``XLAPROF_FUZZ_MUTATIONS`` (default 200, about 30 s for the loaders on a 2-core machine; the
# crashers earlier and longer runs found are replayed from tests/data/fuzz_repro every time).

MUTATIONS = int(os.environ.get("XLAPROF_FUZZ_MUTATIONS", "200"))
# Each input is a whole load (a pod cache, a run through the renderers): fewer, but every kind.
SMALL = max(MUTATIONS // 25, 20)
# A bound on one call that only a hang reaches: inputs are at most a few hundred KB and load in
# well under a second, on a machine busy with other work too.
CALL_LIMIT_S = 120.0
# Peak memory may not grow by more than this over the whole loop (inputs are < 2 MB).
MEMORY_GROWTH_LIMIT = 1024**3
REPRO_DIR = os.environ.get("XLAPROF_FUZZ_REPRO_DIR")
# Runs with larger graphs are left out of the run templates: parsing a 2 MB HLO 500 times would
# take minutes and test nothing the small graphs do not.
MAX_TEMPLATE_GRAPH_BYTES = 64 * 1024


class Outcomes:
    """Counts per outcome, and the first input that crashed per distinct exception."""

    def __init__(self, loader: str, required: int = MUTATIONS) -> None:
        self.loader = loader
        self.required = required
        self.ok = 0
        self.errors = 0
        self.crashes: dict[str, tuple[int, str]] = {}
        self.crash_count = 0
        self.peak_before = peak_rss()

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
        assert total >= self.required, f"{self.loader}: only {total} mutations ran"
        growth = peak_rss() - self.peak_before
        lines = [f"{k} (seed {s}, {d})" for k, (s, d) in sorted(self.crashes.items())]
        assert not self.crashes, (
            f"{self.loader}: {self.crash_count} of {total} mutated inputs crashed the loader, "
            f"{len(self.crashes)} distinct:\n" + "\n".join(lines)
        )
        assert growth < MEMORY_GROWTH_LIMIT, f"{self.loader}: peak RSS grew by {growth} bytes"
        # Both outcomes must occur, or the mutations are too weak (or too strong) to test much.
        assert self.ok and self.errors, f"{self.loader}: ok={self.ok} errors={self.errors}"


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def save_repro(loader: str, seed: int, name: str, data: bytes) -> None:
    """Keep a crashing input when XLAPROF_FUZZ_REPRO_DIR is set (for bug reports)."""
    if REPRO_DIR:
        target = Path(REPRO_DIR) / loader / f"{seed}-{name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def text_sources() -> list[Path]:
    """Metrics reports and debug logs: the sample logs, tests/data, the sample runs' reports."""
    files = sorted(SAMPLES.glob("*.log")) + sorted(SAMPLES.glob("*.fallbacks"))
    files += sorted(DATA.glob("*.log")) + sorted(DATA.glob("*.txt"))
    files += [next(sample_run(name).glob("*/metrics/final.txt")) for name in SAMPLE_RUNS]
    return files


def xplane_sources() -> list[Path]:
    """Real xplane captures of at most a few hundred KB: ../shared/traces and the sample runs."""
    shared = [shared_trace(name) for name in SHARED_XPLANES]
    runs = [sample_capture(name) for name in SAMPLE_RUNS]
    return [f for f in shared if f.stat().st_size < 400_000] + [
        f for f in runs if f.stat().st_size < 250_000
    ]


def chrome_sources() -> list[Path]:
    """Real Chrome traces: ../shared/traces and the sample runs'."""
    shared = [shared_trace(name) for name in SHARED_CAPTURES if name.endswith(".trace.json.gz")]
    runs = [
        next(sample_run(name).glob("*/plugins/profile/*/*.trace.json.gz")) for name in SAMPLE_RUNS
    ]
    return shared + runs


def load_trace_steps(path: Path) -> None:
    """What a user's first look at a trace does: load it and take its step times."""
    from xlaprof.inputs.traces import load_trace

    load_trace(path).step_times()


def run_templates(tmp_path: Path) -> list[Path]:
    """The sample runs without their traces (fuzzed on their own), those with small graphs."""
    templates = []
    for name in SAMPLE_RUNS:
        run = next(sample_run(name).glob("*/run.json")).parent
        if sum(p.stat().st_size for p in run.glob("graphs/*")) > MAX_TEMPLATE_GRAPH_BYTES:
            continue
        target = tmp_path / "templates" / name
        shutil.copytree(run, target, ignore=shutil.ignore_patterns("plugins"))
        templates.append(target)
    return templates


def raw_controls(text: str) -> set[str]:
    """Control characters that would reach a terminal or page raw."""
    return {c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0}
