"""The first admin `manage.py serve` creates: from ROJO_ADMIN_PASSWORD in the container that
makes it, and none from a container started with `--no-admin` (the compose stack's second,
which gets no admin password and would otherwise make one up if it took the lock first)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUPERUSERS = (
    "from django.contrib.auth import get_user_model;"
    "print(list(get_user_model().objects.filter(is_superuser=True)"
    ".values_list('username', flat=True)))"
)


def manage(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if not name.startswith("ROJO_")}
    env |= {
        "DEBUG": "1",
        "SECRET_KEY": "k" * 50,
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
        "ROJO_STORAGE_DIR": str(tmp_path / "storage"),
        "ROJO_ADMIN_PASSWORD": "a long password for the test",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_serve_creates_the_first_admin_with_the_given_password(tmp_path):
    served = manage(tmp_path, "serve", "--no-server")

    assert manage(tmp_path, "shell", "-c", SUPERUSERS).stdout.splitlines()[-1] == "['admin']"
    assert "one-time password" not in served.stdout + served.stderr


def test_serve_with_no_admin_leaves_the_first_admin_to_another_container(tmp_path):
    served = manage(tmp_path, "serve", "--no-server", "--no-admin")

    assert manage(tmp_path, "shell", "-c", SUPERUSERS).stdout.splitlines()[-1] == "[]"
    assert "one-time password" not in served.stdout + served.stderr
