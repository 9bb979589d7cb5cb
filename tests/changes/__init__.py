"""The file-change ledger: people's edits, history, undo, uploads."""
