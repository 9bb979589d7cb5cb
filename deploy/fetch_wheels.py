"""Download the wheels of requirements.lock into deploy/wheels, for building the image where
the build cannot reach PyPI (no CA, no network): `python deploy/fetch_wheels.py 3.11.2`.

pip evaluates a lock's markers against the Python that runs it, not the target's, so an entry
such as `async-timeout ; python_full_version < '3.11.3'` would be left out for a base whose
Python is older than the host's. The markers are evaluated here for the base's version, on
Linux and CPython, and pip downloads what they select.
"""

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.markers import Marker

ROOT = Path(__file__).resolve().parent.parent
# One requirement of a uv/pip-compile lock: the line, and its `--hash` continuation lines.
ENTRY = re.compile(r"^(?P<req>[A-Za-z0-9_.\-]+==[^\s;\\]+)(?: ; (?P<marker>[^\\]+?))?\s*\\\n"
                   r"(?P<hashes>(?:\s+--hash=\S+(?: \\)?\n)+)", re.M)  # fmt: skip


def selected(lock_text: str, python_version: str) -> list[str]:
    """The lock's entries for Linux CPython `python_version`, without markers, with hashes."""
    environment = {
        "python_full_version": python_version,
        "python_version": ".".join(python_version.split(".")[:2]),
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_python_implementation": "CPython",
        "implementation_name": "cpython",
        "os_name": "posix",
    }
    chosen = []
    for entry in ENTRY.finditer(lock_text):
        marker = entry["marker"]
        if marker and not Marker(marker).evaluate(environment):
            continue
        hashes = " ".join(h.strip(" \\") for h in entry["hashes"].split("\n") if h.strip())
        chosen.append(f"{entry['req']} {hashes}")
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python_version", help="the base image's Python, e.g. 3.11.2")
    parser.add_argument("--lock", type=Path, default=ROOT / "requirements.lock")
    parser.add_argument("--dest", type=Path, default=ROOT / "deploy" / "wheels")
    args = parser.parse_args()
    entries = selected(args.lock.read_text(), args.python_version)
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as requirements:
        requirements.write("\n".join(entries) + "\n")
        requirements.flush()
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        command += ["--only-binary=:all:", "--require-hashes", "-r", requirements.name]
        command += ["--python-version", args.python_version, "--dest", str(args.dest)]
        return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
