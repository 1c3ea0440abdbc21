"""A 10M-event Kineto trace analyzed under a 6 GB address-space cap (a scale test).

Run: python benchmarks/chrome_stream.py [--events N] [--cap-gb 6] [--before DIR] [--keep PATH]

The input is made here: the events of a real PyTorch-profiler (Kineto) trace,
``../shared/traces/hta_cupti_profiler_benchmark.trace.json.gz`` (A100, HolisticTraceAnalysis'
tests), repeated with their timestamps shifted by the trace's span each copy until
``traceEvents`` holds N events (its ``ph: M`` process and thread names once, at the end, where
Kineto writes them). It is a scale test: the repeated events say nothing new about a workload.

``xlaprof analyze FILE --json`` runs in a fresh process whose address space is capped
(``resource.setrlimit(RLIMIT_AS)``, as ``ulimit -v``) with ``--max-size`` above the file's
inflated size (the default caps refuse a Chrome trace over 1 GiB of JSON). Reported: exit status,
wall and CPU seconds, peak RSS (the child's ``ru_maxrss``), events in the frame. ``--before DIR``
runs the same command with another checkout's package first on the path (``git worktree add DIR
REV``), under the same cap, and then both without a cap on a tenth of the events, for the
ratio of their peak RSS at a size the old reader survives.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent / "shared" / "traces" / "hta_cupti_profiler_benchmark.trace.json.gz"


def synthesize(path: Path, target: int) -> tuple[int, int, int]:
    """Write a ``.trace.json.gz`` of ``target`` events made of copies of ``SOURCE``'s; return
    the events written, how many of them are complete (``ph: X``) events, and the JSON's size
    in bytes."""
    document = json.loads(gzip.decompress(SOURCE.read_bytes()))
    events = document.pop("traceEvents")
    names = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M"]
    starts = [float(e["ts"]) for e in timed if "ts" in e]
    span = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed if "ts" in e) - min(starts)
    span = float(int(span) + 1)
    written = size = complete = 0
    with gzip.open(path, "wb", compresslevel=6) as out:
        head = json.dumps(document)[:-1] + ', "traceEvents": ['
        out.write(head.encode())
        size += len(head)
        copy, first = 0, True
        while written < target - len(names):
            pieces = []
            for event in timed:
                if written >= target - len(names):
                    break
                if "ts" in event:
                    event = {**event, "ts": event["ts"] + copy * span}
                pieces.append(json.dumps(event))
                written += 1
                complete += event.get("ph") == "X"
            text = ("" if first else ", ") + ", ".join(pieces)
            first = False
            out.write(text.encode())
            size += len(text)
            copy += 1
        tail = ", " + ", ".join(json.dumps(e) for e in names) + "]}"
        out.write(tail.encode())
        size += len(tail)
    return written + len(names), complete, size


def _inflated_size(path: Path) -> int:
    """The size of the JSON inside a gzip file, read through."""
    size = 0
    with gzip.open(path, "rb") as handle:
        while chunk := handle.read(2**24):
            size += len(chunk)
    return size


def _run(path: Path, cap_bytes: int | None, code: Path | None, max_size: int) -> dict[str, object]:
    """``xlaprof analyze`` in a child under the cap; its figures."""
    env = {**os.environ, "PJRT_DEVICE": "CPU"}
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    script = (
        "import sys, time, resource, json\n"
        "from xlaprof.cli import main\n"
        "wall, cpu = time.perf_counter(), time.process_time()\n"
        "code = 0\n"
        "try:\n"
        "    main(['analyze', sys.argv[1], '--json', '-o', sys.argv[2], '--force',"
        " '--max-size', sys.argv[3]],"
        " standalone_mode=False)\n"
        "except SystemExit as stop:\n"
        "    code = stop.code or 0\n"
        "except MemoryError:\n"
        "    code = 'MemoryError'\n"
        "print(json.dumps({'code': code, 'wall_s': time.perf_counter() - wall,"
        " 'cpu_s': time.process_time() - cpu,"
        " 'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n"
    )

    def limit() -> None:
        if cap_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "analysis.json"
        done = subprocess.run(
            [sys.executable, "-c", script, str(path), str(out), str(max_size)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,  # not the checkout: its package would come first on the path
            preexec_fn=limit,  # the cap is set in the child before it runs
        )
        lines = done.stdout.strip().splitlines()
        row: dict[str, object] = json.loads(lines[-1]) if lines else {}
        row["returncode"] = done.returncode
        row["stderr"] = done.stderr.strip().splitlines()[-1:] if done.stderr.strip() else []
        if out.exists():
            trace = json.loads(out.read_text()).get("trace", {})
            row["device_steps"] = trace.get("device_steps_total")
    return row


def _show(label: str, row: dict[str, object]) -> None:
    print(
        f"  {label:28s} exit {row.get('code')!s:>4} (rc {row['returncode']})  "
        f"wall {float(str(row.get('wall_s', 'nan'))):7.1f} s  "
        f"cpu {float(str(row.get('cpu_s', 'nan'))):7.1f} s  "
        f"peak RSS {float(str(row.get('peak_rss_mb', 'nan'))):8,.0f} MB  "
        f"device steps {row.get('device_steps')}  "
        f"{' '.join(map(str, row.get('stderr') or []))[:160]}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--cap-gb", type=float, default=6.0)
    parser.add_argument("--before", type=Path, help="another checkout to compare with")
    parser.add_argument("--keep", type=Path, help="write the trace here (reused if present)")
    args = parser.parse_args()
    cap = int(args.cap_gb * 1e9)
    with tempfile.TemporaryDirectory(prefix="xlaprof-chrome-") as tmp:
        sizes = [(args.events, "full")]
        if args.before:
            sizes.append((args.events // 10, "tenth"))
        for events, label in sizes:
            path = (args.keep if args.keep and label == "full" else None) or (
                Path(tmp) / f"{label}.trace.json.gz"
            )
            started = time.perf_counter()
            if not path.exists():
                written, complete, json_bytes = synthesize(path, events)
                print(
                    f"{label}: {written:,} events ({complete:,} complete events: the frame's "
                    f"rows), {json_bytes / 1e6:,.0f} MB of JSON, "
                    f"{path.stat().st_size / 1e6:,.1f} MB gzipped, "
                    f"made in {time.perf_counter() - started:.0f} s",
                    flush=True,
                )
            # above the JSON's size, not far above it: the old reader's inflater asked zlib for
            # an output buffer of the whole cap at once
            max_size = int(_inflated_size(path) * 1.05) + 2**20
            on_cap = cap if label == "full" else None
            where = f"under a {args.cap_gb:g} GB cap" if on_cap else "no cap"
            _show(f"{label}, this tree, {where}", _run(path, on_cap, None, max_size))
            if args.before:
                _show(f"{label}, before, {where}", _run(path, on_cap, args.before, max_size))
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
