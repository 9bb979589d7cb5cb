"""The layers in pyproject.toml hold, and an import that breaks one fails `lint-imports`.

Each case runs the real import-linter on a copy of the code with one import added, so the
contracts are shown to catch what they are there for, not only to pass.
"""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c for c in config["tool"]["importlinter"]["contracts"]}


def _lint(tree: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the code in `tree` (found there first: PYTHONPATH)."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the two packages and the contracts."""
    for package in ("roject", "rojos"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_code_keeps_every_contract():
    """The tree as it is: every contract kept."""
    run = _lint(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"Contracts: {len(_contracts())} kept, 0 broken." in run.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # The provider reading the turns: a layer reaching up, and a forbidden import.
        ("rojos/provider/stream.py", "from rojos.turns import runner", "rojos-layers"),
        ("rojos/provider/request.py", "import rojos.tools", "provider-knows-no-tools-or-turns"),
        ("rojos/models/rojo.py", "import rojos.agent.history", "models-know-no-services"),
        ("roject/members/access.py", "import rojos.models", "roject-knows-no-rojos"),
        ("roject/storage/paths.py", "import roject.models", "storage-gate-alone"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(tree: Path, module: str, line: str, broken: str):
    """One import added where a contract forbids it: lint-imports fails, naming that contract."""
    path = tree / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # noqa\n", encoding="utf-8")

    run = _lint(tree)

    assert run.returncode != 0
    assert f"{_contracts()[broken]['name']} BROKEN" in run.stdout, run.stdout


def test_the_storage_gate_contract_names_everything_else_of_the_project():
    """A new part of roject is forbidden to the gate too (only the base error type is not)."""
    parts = {
        f"roject.{path.stem if path.suffix == '.py' else path.name}"
        for path in (ROOT / "roject").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__")
        or (path.is_dir() and (path / "__init__.py").exists())
    }
    forbidden = set(_contracts()["storage-gate-alone"]["forbidden_modules"])
    assert parts - forbidden == {"roject.storage", "roject.errors"}
