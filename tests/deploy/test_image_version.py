"""The image installs Rojo's dependencies but no package of Rojo's: it copies the code into
/app. There, as in an installed Rojo, a backup's header names this release, so that an
archive from a newer Rojo is refused and one of the same release is taken (a copy that said
"Rojo 0" refused every archive of an install made with `make`, as newer)."""

import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def in_build_context(source: str) -> bool:
    """Whether the build reads `source`: .dockerignore leaves out all ('*') but the paths it
    names with '!' (a COPY of anything else fails the build)."""
    named = [line[1:].rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
             if line.startswith("!")]  # fmt: skip
    source = source.rstrip("/")
    return any(source == path or source.startswith(f"{path}/") for path in named)


def image_app(app: Path) -> None:
    """/app as the Containerfile's build stage fills it: each `COPY <sources> /app/…`."""
    for sources, target in re.findall(r"^COPY ((?:\S+ )+)(/app/\S*)$",
                                      (ROOT / "Containerfile").read_text(), re.M):  # fmt: skip
        for source in sources.split():
            assert in_build_context(source), f"{source}: left out of the build by .dockerignore"
            into = app / target.removeprefix("/app/")
            if target.endswith("/"):
                into = into / Path(source).name
            into.parent.mkdir(parents=True, exist_ok=True)
            copy = shutil.copytree if (ROOT / source).is_dir() else shutil.copy2
            copy(ROOT / source, into)


def packages_without_rojo(into: Path) -> None:
    """The test's installed packages, less Rojo's own (its metadata and editable finder)."""
    into.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if "rojo_chat" not in entry.name:
            (into / entry.name).symlink_to(entry)


def test_the_code_as_the_image_holds_it_names_this_release(tmp_path):
    image_app(tmp_path / "app")
    packages_without_rojo(tmp_path / "packages")
    done = subprocess.run(
        [sys.executable, "-S", "-c", "import django; django.setup(); "
         "from roject.backup.manifest import rojo_version; print(rojo_version())"],
        cwd=tmp_path / "app", capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(tmp_path / "packages"), "DEBUG": "1",
             "DJANGO_SETTINGS_MODULE": "roject.settings",
             "ROJO_STORAGE_DIR": str(tmp_path / "storage")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    release = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert done.stdout.strip() == release
