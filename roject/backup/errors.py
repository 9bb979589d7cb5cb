"""The one error a backup, a restore or a check of an archive raises on purpose."""

from roject.errors import AppError


class BackupError(AppError):
    """Why an archive cannot be written, checked or restored, in words for the operator."""
