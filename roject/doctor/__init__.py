"""The configuration doctor: what deployments get wrong, one finding a line, each with its fix.

Checks register here by kind:
- `settings`: read only settings and the environment; cheap and fixed for a process's life,
  so /readyz (roject/server/probes.py) counts their errors too;
- `runtime`: touch the storage, the database, Redis;
- `network`: reach other hosts (providers, the OIDC provider), each within 2 seconds.

roject's checks live in this package; an app adds its own in a `doctor` module of its own
(rojos/doctor.py), found by Django's autodiscovery, so roject never imports rojos.
"""

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from django.utils.module_loading import autodiscover_modules

Level = Literal["error", "warning"]
Kind = Literal["settings", "runtime", "network"]


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One thing wrong, and what to do about it."""

    level: Level
    code: str
    message: str
    fix: str

    def line(self) -> str:
        return f"{self.level.upper():7} {self.code}: {self.message} Fix: {self.fix}"


@dataclass(frozen=True, kw_only=True)
class Context:
    """What a check may need beyond settings: the URL people use, the processes of the
    install (all containers' together), whether other hosts may be tried."""

    url: str = ""
    processes: int = 1
    network: bool = True


def serving_context() -> Context:
    """What a serving process tells the doctor: the address people use (ROJO_PUBLIC_URL) and
    the install's processes (ROJO_PROCESSES). `manage.py serve` logs the findings with it, and
    /readyz counts the errors of the settings checks with it, so that what the start's log
    calls an error keeps the process out of the proxy's rotation."""
    try:
        processes = int(os.environ.get("ROJO_PROCESSES") or 1)
    except ValueError:
        processes = 1
    return Context(url=os.environ.get("ROJO_PUBLIC_URL", "").strip(), processes=processes)


Check = Callable[[Context], list[Finding]]
_CHECKS: dict[Kind, list[Check]] = {"settings": [], "runtime": [], "network": []}


def check(kind: Kind) -> Callable[[Check], Check]:
    """Register a check of `kind`."""

    def register(function: Check) -> Check:
        _CHECKS[kind].append(function)
        return function

    return register


def checks_load() -> None:
    from . import runtime_checks, settings_checks  # noqa: F401  (they register)

    autodiscover_modules("doctor")


def doctor_run(*, context: Context, kinds: tuple[Kind, ...]) -> list[Finding]:
    """Every finding of the checks of `kinds`, errors first."""
    checks_load()
    found: list[Finding] = []
    for kind in kinds:
        if kind == "network" and not context.network:
            continue
        for function in _CHECKS[kind]:
            found.extend(function(context))
    return sorted(found, key=lambda finding: finding.level != "error")
