#!/usr/bin/env python
"""Django's command-line utility for Rojo Chat."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "roject.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import OperationalError

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        sys.stderr.write(f"Error: {exc}\n")
        sys.exit(2)
    except OperationalError as exc:
        # A database out of reach is the operator's to fix, in any command, Django's too.
        if "--traceback" in sys.argv:
            raise
        sys.stderr.write(
            f"Error: the database cannot be used: {str(exc).strip()}. Check DATABASE_URL, and "
            "that the database server runs and can be reached (manage.py doctor says more).\n"
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
