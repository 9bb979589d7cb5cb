"""Every environment variable the settings read is named in the docs (docs/operations.md's
table, or the page of its feature), so an operator can find each one."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READ = re.compile(
    r"""(?:env_(?:int|float|bool|list)\(|os\.environ\.get\(|os\.environ\[)\s*"([A-Z][A-Z_0-9]+)\""""
)


def test_every_variable_the_settings_read_is_in_the_docs():
    """roject/settings.py, and the modules of roject/config/ that parse its groups."""
    sources = [ROOT / "roject" / "settings.py", *sorted((ROOT / "roject" / "config").glob("*.py"))]
    variables = set(READ.findall("\n".join(p.read_text(encoding="utf-8") for p in sources)))
    assert {"SECRET_KEY", "DATABASE_URL", "ROJO_TURN_MAX_SECONDS"} <= variables
    docs = "\n".join(page.read_text(encoding="utf-8") for page in (ROOT / "docs").glob("*.md"))
    assert sorted(name for name in variables if f"`{name}`" not in docs) == []
