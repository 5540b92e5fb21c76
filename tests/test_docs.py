"""The README and the CLI stay in step: every command and flag of ``--help`` is documented, and
every command and Python example in the README runs as written."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path
from types import ModuleType

import pytest

from neardup import api, service
from neardup.cli import _COMMANDS, _parser
from tests.runner import neardup

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, flags=re.S)


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    flags = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags |= _flags(sub)
        flags |= {o for o in action.option_strings if o.startswith("--") and o != "--help"}
    return flags


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_command_and_flag_is_in_the_readme(name: str) -> None:
    assert f"neardup {name}" in README
    missing = sorted(f for f in _flags(_subcommands()[name]) if f not in README)
    assert not missing, f"neardup {name}: {missing} are not in the README"


# Each command, with arguments that work in a folder holding listings.csv and pairs.tsv, and
# the API function it stands for.
COMMAND_CALLS = [
    ("index listings.csv --id-field sku", "index"),
    ("lookup --id 12345", "lookup"),
    ("link listings.csv --id-field sku", "link"),
    ("explain 12345 12346", "explain"),
    ("report -o out.tsv", "report"),
    ("dedup listings.csv --id-field sku -o kept.csv", "dedup"),
    ("delete 12349", "delete"),
    ("export -o records.jsonl", "export"),
    ("stats", "stats"),
    ("eval --truth pairs.tsv --report pairs.tsv", "evaluate"),
    ("tune --threshold 0.8", "tune"),
    ("generate 10 -o generated.tsv", "generate"),
    ("schema apply", "apply_schema"),
    ("demo", "demo"),
    ("serve --port 1", "serve"),
]
# Commands that would run until stopped: the test records their call without making it.
ENDLESS = {"serve"}


def home(function: str) -> ModuleType:
    """Where a command's function lives: the API, or for serve the service, a skin over it."""
    return service if function == "serve" else api


def test_every_command_is_one_api_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ "Everything the CLI does is also a Python function": each command makes exactly one call
    into neardup.api (calls the API makes within it are not counted)."""
    assert sorted(_COMMANDS) == sorted(line.split()[0] for line, _ in COMMAND_CALLS)
    (tmp_path / "listings.csv").write_text(LISTINGS)
    (tmp_path / "pairs.tsv").write_text("left_id\tright_id\n12345\t12346\n")
    calls: list[str] = []
    depth = [0]

    def recorded(name: str):
        original = (lambda *a, **k: None) if name in ENDLESS else getattr(home(name), name)

        def call(*args, **kwargs):
            if not depth[0]:
                calls.append(name)
            depth[0] += 1
            try:
                return original(*args, **kwargs)
            finally:
                depth[0] -= 1

        return call

    for _, function in COMMAND_CALLS:
        monkeypatch.setattr(home(function), function, recorded(function))
    env = {"NEARDUP_STORE": f"sqlite:///{tmp_path / 'neardup.db'}"}
    for line, function in COMMAND_CALLS:
        calls.clear()
        result = neardup(*line.split(), cwd=tmp_path, env=env)
        assert result.returncode == 0, f"{line}: {result.stderr}"
        assert calls == [function], line


def test_every_commands_function_is_in_the_package() -> None:
    """What a command stands for is importable from ``neardup`` itself, as the README shows."""
    import neardup

    named = {function for _, function in COMMAND_CALLS} | {"lookup_file", "clusters"}
    named |= {"report_page", "record_texts"}
    assert named <= set(neardup.__all__)
    assert all(getattr(neardup, name) is getattr(home(name), name) for name in named)


def _readme_commands() -> list[str]:
    lines = []
    for language, body in BLOCKS:
        for line in body.splitlines():
            if language == "" and line.startswith("neardup "):
                lines.append(line.split("  #")[0].strip())
    return lines


LISTINGS = """\
sku,title,description
12345,Art's Deli,12224 Ventura Blvd. Studio City
12346,Art's Deli,"12224 Ventura Boulevard, Studio City"
12347,Golden Lotus Dim Sum,1209 Grant Ave San Francisco CA 94133
12348,Golden Lotus Dim Sum Restaurant,1209 Grant Avenue San Francisco CA 94133
12349,Thai Orchid Kitchen,58 Elm Street Northampton MA 01060
"""


def test_every_readme_command_runs(tmp_path: Path) -> None:
    (tmp_path / "listings.csv").write_text(LISTINGS)
    header, *rows = LISTINGS.splitlines()
    (tmp_path / "shop_a.csv").write_text("\n".join([header, *rows[0::2]]) + "\n")
    (tmp_path / "shop_b.csv").write_text("\n".join([header, *rows[1::2]]) + "\n")
    commands = _readme_commands()
    assert len(commands) >= 10
    env = {"NEARDUP_STORE": f"sqlite:///{tmp_path / 'neardup.db'}"}
    for command in commands:
        result = neardup(*shlex.split(command)[1:], cwd=tmp_path, env=env)
        assert result.returncode == 0, f"{command}: {result.stderr}"
        assert "Traceback" not in result.stderr


def test_the_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "listings.csv").write_text(LISTINGS)
    monkeypatch.chdir(tmp_path)
    examples = [body for language, body in BLOCKS if language == "python"]
    assert examples
    for body in examples:
        namespace: dict[str, object] = {}
        exec(compile(body, "README.md", "exec"), namespace)


def test_the_readme_explain_output_is_what_explain_prints(tmp_path: Path) -> None:
    (tmp_path / "listings.csv").write_text(LISTINGS)
    env = {"NEARDUP_STORE": f"sqlite:///{tmp_path / 'neardup.db'}"}
    assert (
        neardup("index", "listings.csv", "--id-field", "sku", cwd=tmp_path, env=env).returncode == 0
    )
    printed = neardup("explain", "12345", "12346", cwd=tmp_path, env=env).stdout
    shown = [body for language, body in BLOCKS if body.startswith("A   ")]
    assert shown == [printed]


def test_the_readme_pair_is_found_with_the_defaults(tmp_path: Path) -> None:
    """The seed pair of the recipe: the long form of a name, same address."""
    (tmp_path / "deli.txt").write_text(
        "1 Art's Deli 12224 Ventura Blvd. Studio City\n"
        "2 Art's Delicatessen 12224 Ventura Blvd. Studio City\n"
        "3 Arthur's Diner 1224 Ventura Blvd. Sherman Oaks\n"
    )
    env = {"NEARDUP_STORE": f"sqlite:///{tmp_path / 'neardup.db'}"}
    assert neardup("index", "deli.txt", cwd=tmp_path, env=env).returncode == 0
    found = neardup("lookup", "--id", "1", "--json", cwd=tmp_path, env=env)
    assert [m["id"] for m in json.loads(found.stdout)] == ["2"]
