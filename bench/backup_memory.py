"""Backup and restore of a 1 GB storage: the peak memory (RSS) of each command.

A scratch installation (SQLite, a project with 1 GiB of files: 64 files of 16 MiB of random
bytes, and a few hundred small ones) is backed up with `manage.py backup`, checked with
`verify-backup` and restored with `restore` into a second, empty one, each a process of its
own; the figure is each process's own peak RSS (wait4), against the same
command's on a storage of 1 MiB: the bytes are streamed, so the two should differ by a few
MiB at most. By hand: `python -m bench.backup_memory` (about three minutes; 3 GiB of scratch
disk), or `python -m bench.run --only backup_memory`, which writes section 13 of
docs/performance.md. Not in a plain `make bench` (its report keeps this section's last
figures): it is about memory, not speed, and writes gigabytes.

On 5 December 2026 (the 2-core development machine, SQLite, a plain .tar):

    command         1 MiB storage  1 GiB storage  difference
    backup              114.0 MiB      113.9 MiB    -0.2 MiB
    verify-backup       114.5 MiB      117.1 MiB     2.6 MiB
    restore             115.3 MiB      119.7 MiB     4.5 MiB
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.env import ROOT, bench_environ
from bench.report import Section

BIG_FILES, BIG_FILE_MIB = 64, 16
# "Within a few MB of RSS" (issue #34): a command's peak on 1 GiB against its peak on 1 MiB.
MIB_ABOVE_MAX = 16.0
SMALL_FILES = 300


def _manage(env: dict, *args: str) -> float:
    """Run a manage.py command; its own peak RSS in MiB (wait4's usage of that child)."""
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, stdout=output, stderr=output
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            output.seek(0)
            raise SystemExit(f"manage.py {' '.join(args)} failed:\n{output.read().decode()}")
    return usage.ru_maxrss / 1024


def _installation(scratch: Path, name: str) -> dict:
    env = {**os.environ, **bench_environ(scratch)}
    env["DATABASE_URL"] = f"sqlite:///{scratch / (name + '.sqlite3')}"
    env["ROJO_STORAGE_DIR"] = str(scratch / (name + "-storage"))
    _manage(env, "migrate", "--no-input", "-v", "0")
    return env


def _fill(env: dict, mib: int) -> None:
    script = (
        "import os\n"
        "from django.contrib.auth import get_user_model\n"
        "from roject.members.projects import project_create\n"
        "owner = get_user_model().objects.create_user('owner', password='x')\n"
        "project = project_create(name='Big', owner=owner)\n"
        "from roject.storage import project_root\n"
        "root = project_root(project.pk)\n"
        f"files, size = ({BIG_FILES}, {mib} * 1024 * 1024 // {BIG_FILES})\n"
        "(root / 'big').mkdir()\n"
        "for n in range(files):\n"
        "    with open(root / 'big' / f'{n:03d}.bin', 'wb') as fh:\n"
        "        for _ in range(0, size, 1 << 20):\n"
        "            fh.write(os.urandom(min(1 << 20, size)))\n"
        "(root / 'small').mkdir()\n"
        f"for n in range({SMALL_FILES}):\n"
        "    (root / 'small' / f'{n:03d}.txt').write_text(f'note {n}\\n')\n"
    )
    run = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=env, text=True
    )
    if run.returncode != 0:
        raise SystemExit("could not fill the installation")


def measure(mib: int) -> dict[str, float]:
    """Peak RSS (MiB) of backup, verify-backup and restore of a storage of `mib` MiB."""
    with tempfile.TemporaryDirectory(prefix="rojo-bench-backup-") as directory:
        scratch = Path(directory)
        source = _installation(scratch, "source")
        _fill(source, mib)
        archive = scratch / "backup.tar"
        figures = {"backup": _manage(source, "backup", str(archive))}
        figures["verify-backup"] = _manage(source, "verify-backup", str(archive))
        target = _installation(scratch, "target")
        figures["restore"] = _manage(target, "restore", str(archive))
        figures["archive MiB"] = archive.stat().st_size / (1 << 20)
        return figures


def backup_memory_section(small: dict[str, float], big: dict[str, float]) -> Section:
    section = Section(
        "13. Backup and restore memory",
        "`manage.py backup`, `verify-backup` and `restore` (each a process of its own, SQLite, a "
        "plain .tar) of a storage of 1 GiB (64 files of 16 MiB and 300 small ones) against the "
        "same commands on 1 MiB: each command's own peak RSS (wait4). The bytes are streamed, so "
        "the size of the storage should not show.",
    )
    for name in ("backup", "verify-backup", "restore"):
        above = big[name] - small[name]
        section.add(
            f"{name.replace('-', '_')}_peak_rss_1_gib_above_1_mib",
            f"{above:+.1f} MiB",
            f"< {MIB_ABOVE_MAX:.0f} MiB",
            above < MIB_ABOVE_MAX,
            f"{big[name]:.1f} MiB on 1 GiB, {small[name]:.1f} MiB on 1 MiB",
        )
    section.notes.append(
        f"The archives: {small['archive MiB']:.1f} MiB and {big['archive MiB']:.1f} MiB."
    )
    return section


def main() -> None:
    small, big = measure(1), measure(1024)
    print(f"{'command':<14} {'1 MiB storage':>14} {'1 GiB storage':>14} {'difference':>11}")
    for name in ("backup", "verify-backup", "restore"):
        print(f"{name:<14} {small[name]:>10.1f} MiB {big[name]:>10.1f} MiB "
              f"{big[name] - small[name]:>7.1f} MiB")  # fmt: skip
    print(f"archive: {small['archive MiB']:.1f} MiB and {big['archive MiB']:.1f} MiB")


if __name__ == "__main__":
    main()
