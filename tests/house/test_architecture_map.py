"""docs/architecture.md's table of packages maps them truly: each package it names exists, and
its row names every module the package holds, so that a module added is a row changed."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| `((?:rojos|roject)/[\w/]+)/` \| (.*) \|$")
# Django's own names, which the table leaves out.
UNLISTED = {"__init__", "apps", "urls", "settings"}


def package_rows() -> dict[str, str]:
    """The table under "## Packages": package path → what its row says."""
    section = ARCHITECTURE.read_text(encoding="utf-8").split("## Packages", 1)[1]
    section = section.split("\n## ", 1)[0]
    return {m[1]: m[2] for line in section.splitlines() if (m := ROW.match(line))}


def modules(package: Path) -> set[str]:
    """A package's modules and sub-packages (as `name/`), Django's own names left out."""
    found = {path.stem for path in package.glob("*.py")} - UNLISTED
    found |= {path.parent.name + "/" for path in package.glob("*/__init__.py")}
    return found


def named(row: str) -> set[str]:
    """Every `name` a row quotes, in its parentheses too."""
    return set(re.findall(r"`([\w/]+)`", row))


def test_the_table_names_packages_that_exist():
    rows = package_rows()
    assert len(rows) > 10
    assert [package for package in rows if not (ROOT / package / "__init__.py").exists()] == []


def test_each_row_names_every_module_of_its_package():
    missing = {
        package: sorted(modules(ROOT / package) - named(row))
        for package, row in package_rows().items()
    }
    assert {package: names for package, names in missing.items() if names} == {}


def test_each_module_a_row_names_exists():
    """A lower-case name is a module of the package or of a sub-package (`oidc/` (`config`))."""
    ghosts = {
        package: sorted(
            name
            for name in named(row)
            if re.fullmatch(r"[a-z_0-9]+", name) and not any((ROOT / package).rglob(f"{name}.py"))
        )
        for package, row in package_rows().items()
    }
    assert {package: names for package, names in ghosts.items() if names} == {}
