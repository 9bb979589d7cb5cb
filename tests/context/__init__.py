"""The window, compaction, usage, prices and budgets."""
