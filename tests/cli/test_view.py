"""`xlaprof view` serves the sample runs' traces in the XProf UI."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
import urllib.request

from helpers import REPO, SAMPLES, free_port


def test_view_serves_every_traced_run() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "xlaprof", "view", str(SAMPLES / "runs"), "--port", str(port)],
        cwd=REPO,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout.readline().strip() == f"http://localhost:{port}/"
        runs = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and runs is None:
            try:
                url = f"http://localhost:{port}/data/plugin/profile/runs"
                with urllib.request.urlopen(url, timeout=5) as response:
                    body = response.read()
                    if response.headers.get("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
                    runs = json.loads(body)
            except OSError:
                time.sleep(0.5)
        assert runs is not None, "the UI never answered"
        traced = sorted(p.name for p in (SAMPLES / "runs").iterdir() if any(p.rglob("*.xplane.pb")))
        assert len(traced) >= 4
        assert sorted(run.split("/")[0] for run in runs) == traced
    finally:
        process.terminate()
        process.wait(timeout=30)
