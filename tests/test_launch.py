"""The launcher of the local servers (servers/launch.py), without starting a server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from servers import launch


def test_a_server_started_again_is_refused_and_the_running_one_kept(
    tmp_path: Path, monkeypatch
) -> None:
    """`launch.py solr` run while Solr was up failed on the port, and its pid replaced the
    running server's: `launch.py stop` stopped nothing, and that Solr ran on unseen."""
    monkeypatch.setattr(launch, "STATE", tmp_path)
    running = launch._spawn("solr-8983", [sys.executable, "-c", "import time; time.sleep(60)"],
                            tmp_path / "first.log")  # fmt: skip
    try:
        with pytest.raises(RuntimeError, match=r"solr-8983 is running already \(pid \d+\)"):
            launch._spawn("solr-8983", [sys.executable, "-c", "pass"], tmp_path / "again.log")
        # The pid that `stop` reads is still the running server's.
        assert (tmp_path / "solr-8983.pid").read_text() == str(running.process.pid)
        assert running.process.poll() is None
    finally:
        running.process.kill()
        running.process.wait(timeout=30)


@pytest.mark.parametrize("engine", ["solr", "elasticsearch"])
def test_a_server_started_again_keeps_the_running_ones_data(
    engine: str, tmp_path: Path, monkeypatch
) -> None:
    """A second `launch.py elasticsearch` while one ran was refused, but only after it had
    emptied the work folder: the running node lost its data and lock, and every index it
    held went red."""
    monkeypatch.setattr(launch, "STATE", tmp_path)
    name = {"solr": "solr-8983", "elasticsearch": "elasticsearch-9200"}[engine]
    running = launch._spawn(name, [sys.executable, "-c", "import time; time.sleep(60)"],
                            tmp_path / "first.log")  # fmt: skip
    held = tmp_path / engine / "data" / "held"
    held.parent.mkdir(parents=True)
    held.write_text("the running server's data")
    start = {"solr": launch.start_solr, "elasticsearch": launch.start_elasticsearch}[engine]
    try:
        with pytest.raises(RuntimeError, match=rf"{name} is running already"):
            start(work=tmp_path / engine)
        assert held.read_text() == "the running server's data"
    finally:
        running.process.kill()
        running.process.wait(timeout=30)


def test_a_server_whose_process_has_ended_is_started_again(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(launch, "STATE", tmp_path)
    ended = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    ended.wait()
    (tmp_path / "solr-8983.pid").write_text(str(ended.pid))
    again = launch._spawn("solr-8983", [sys.executable, "-c", "pass"], tmp_path / "again.log")
    assert again.process.wait(timeout=30) == 0
    assert (tmp_path / "solr-8983.pid").read_text() == str(again.process.pid)
