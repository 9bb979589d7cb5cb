"""The one ledger of changes to a project's files: people's actions, history, undo."""
