"""`xlaprof view` serves only what it was given (issue 48): a private copy of the captures,
read-only, to its own page only. Requests go to XProf's real app (werkzeug's test client),
built as `xlaprof view` builds it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import cli, sample_capture

from xlaprof.errors import UnsafeInput

PORT = 8791
OWN = {"Host": f"localhost:{PORT}"}


def _text(answer: object) -> str:
    """An answer's body as text (XProf gzips its data answers)."""
    import gzip

    body = answer.get_data()  # type: ignore[attr-defined]
    if answer.headers.get("Content-Encoding") == "gzip":  # type: ignore[attr-defined]
        body = gzip.decompress(body)
    return body.decode()


def _sent_run(tmp_path: Path) -> Path:
    """A sent logdir in XProf's layout holding one real capture."""
    session = tmp_path / "sent" / "run1" / "plugins" / "profile" / "s1"
    session.mkdir(parents=True)
    shutil.copyfile(sample_capture("healthy_loop"), session / "vm.xplane.pb")
    return tmp_path / "sent"


@pytest.fixture
def served(tmp_path: Path) -> tuple[Path, Path, object]:
    from werkzeug.test import Client

    from xlaprof.cli.view import guarded_app, logdir_for

    sent = _sent_run(tmp_path)
    logdir = logdir_for(sent)
    yield sent, logdir, Client(guarded_app(logdir, "127.0.0.1", PORT))
    shutil.rmtree(logdir, ignore_errors=True)


def test_the_ui_reads_the_private_copy_from_its_own_page(served: tuple) -> None:
    # GIVEN a sent logdir served WHEN the UI's own page asks for the run list
    sent, logdir, client = served
    answer = client.get("/data/plugin/profile/runs", headers=OWN)
    # THEN it is listed, from a private copy only this user can enter
    assert answer.status_code == 200, _text(answer)
    assert "run1" in _text(answer)
    assert logdir.resolve() != sent.resolve() and not logdir.is_relative_to(sent)
    assert os.stat(logdir).st_mode & 0o077 == 0


def test_a_page_elsewhere_is_refused(served: tuple) -> None:
    # GIVEN the UI served WHEN another site's page (or a rebound DNS name) sends requests
    _, _, client = served
    answers = [
        client.get("/data/plugin/profile/runs", headers={"Host": f"evil.example:{PORT}"}),
        client.get("/data/plugin/profile/runs", headers={**OWN, "Origin": "https://evil.example"}),
        client.get("/data/plugin/profile/runs", headers={**OWN, "Sec-Fetch-Site": "cross-site"}),
        client.get("/data/plugin/profile/runs", headers={"Host": "localhost:1"}),
    ]
    # THEN each is refused in one line
    for answer in answers:
        assert answer.status_code == 403, answer.text
        assert _text(answer).count("\n") == 1


def test_capture_and_writes_are_refused(served: tuple) -> None:
    # GIVEN the UI served WHEN its own page asks it to capture from a named address, to
    # generate caches, or to write
    _, _, client = served
    capture = client.get(
        "/data/plugin/profile/capture_profile",
        query_string={"service_addr": "10.0.0.1:8466", "duration": "1000"},
        headers=OWN,
    )
    cache = client.get("/data/plugin/profile/generate_cache", headers=OWN)
    post = client.post("/data/plugin/profile/runs", headers=OWN)
    # THEN none is served: capturing is `xlaprof capture`'s, the UI is read-only
    assert capture.status_code == 403 and "xlaprof capture" in capture.text
    assert cache.status_code == 403
    assert post.status_code == 405


def test_session_and_run_paths_outside_the_folder_are_refused(
    served: tuple, tmp_path: Path
) -> None:
    # GIVEN the UI served and a folder of captures elsewhere on the machine
    _, logdir, client = served
    elsewhere = _sent_run(tmp_path / "other") / "run1"
    link = logdir / "run1" / "plugins" / "profile" / "planted"
    # WHEN a request names it as session_path or run_path (directly, by .., through a link)
    link.symlink_to(elsewhere / "plugins" / "profile" / "s1")
    answers = {
        value: client.get(
            "/data/plugin/profile/runs", query_string={name: value}, headers=OWN
        ).status_code
        for name in ("session_path", "run_path")
        for value in (str(elsewhere), f"{logdir}/../other", str(link), "gs://bucket/x")
    }
    inside = client.get(
        "/data/plugin/profile/runs",
        query_string={"session_path": str(logdir / "run1" / "plugins" / "profile" / "s1")},
        headers=OWN,
    )
    # THEN each outside is refused; inside is served
    assert set(answers.values()) == {403}, answers
    assert inside.status_code == 200, _text(inside)


def test_caches_never_land_in_the_sent_folder_or_through_its_links(tmp_path: Path) -> None:
    from werkzeug.test import Client

    from xlaprof.cli.view import guarded_app, logdir_for

    # GIVEN a sent logdir with XProf's cache file planted as a link to a user file
    sent = _sent_run(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    (sent / "run1" / "plugins" / "profile" / ".cached_tools.json").symlink_to(victim)
    (sent / "run1" / ".cached_tools.json").symlink_to(victim)
    before = sorted(str(p.relative_to(sent)) for p in sent.rglob("*"))
    # WHEN it is served and the UI lists its runs and tools, and opens a tool
    logdir = logdir_for(sent)
    try:
        client = Client(guarded_app(logdir, "127.0.0.1", PORT))
        assert client.get("/data/plugin/profile/runs", headers=OWN).status_code == 200
        tools = client.get("/data/plugin/profile/run_tools", query_string={"run": "run1/s1"})
        assert tools.status_code == 403  # no Host: refused
        client.get("/data/plugin/profile/run_tools", query_string={"run": "run1/s1"}, headers=OWN)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    # THEN the user's file is untouched and nothing was written in the sent folder
    assert victim.read_text() == "mine\n"
    assert sorted(str(p.relative_to(sent)) for p in sent.rglob("*")) == before


def test_a_capture_that_is_a_link_is_refused(tmp_path: Path) -> None:
    # GIVEN a sent logdir whose capture is a link to a file elsewhere
    session = tmp_path / "sent" / "plugins" / "profile" / "s1"
    session.mkdir(parents=True)
    (session / "vm.xplane.pb").symlink_to(sample_capture("healthy_loop"))
    # WHEN it is viewed THEN it is refused at once, one line, its own exit code
    out = cli("view", str(tmp_path / "sent"), "--port", "1")
    assert out.returncode == UnsafeInput.exit_code, out.stderr
    assert out.stderr.count("\n") == 1 and "link" in out.stderr
