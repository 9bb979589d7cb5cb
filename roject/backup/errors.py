"""The one error a backup, a restore or a check of an archive raises on purpose, and the
kinds of it a command words on its own."""

from roject.errors import AppError


class BackupError(AppError):
    """Why an archive cannot be written, checked or restored, in words for the operator."""


class ArchiveExists(BackupError):
    """A file has the archive's name already: an older backup, kept unless told otherwise."""


class NotAnArchive(BackupError):
    """The file is no archive `backup` wrote (a text file, a zip, another tar), as opposed to
    one damaged or cut short: the operator named the wrong file."""
