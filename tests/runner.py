"""Running the ``neardup`` command in tests: in-process through ``main(argv)`` (fast), or as a
subprocess where the process itself is under test (exit codes, pipes, the console script)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from neardup.cli import main


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _environment(env: dict[str, str] | None, cwd: Path | None):
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update(env or {})
    if cwd:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def neardup(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Result:
    """Run ``neardup ARGS`` in this process; argparse's own exits are caught."""
    out, err = io.StringIO(), io.StringIO()
    with _environment(env, cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
    return Result(code, out.getvalue(), err.getvalue())


def neardup_process(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m neardup.cli ARGS`` as a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "neardup.cli", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=120,
    )


def assert_user_error(result: Result | subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("neardup: error: ")
    assert message in lines[0]
