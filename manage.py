#!/usr/bin/env python
"""Django's command-line utility for Rojo Chat."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "roject.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import OperationalError, ProgrammingError

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        sys.stderr.write(f"Error: {exc}\n")
        sys.exit(2)
    except (OperationalError, ProgrammingError) as exc:
        # A database out of reach or not migrated is the operator's to fix, in any command,
        # Django's too; any other ProgrammingError is a bug, shown whole.
        from roject.doctor.database_fixes import database_fix

        fix = None if "--traceback" in sys.argv else database_fix(exc)
        if fix is None:
            raise
        sys.stderr.write(
            f"Error: the database cannot be used: {str(exc).strip()}. "
            f"{fix[0].upper()}{fix[1:]} (manage.py doctor says more.)\n"
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
