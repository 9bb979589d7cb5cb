"""What fits a model's window: its size, compaction, summaries, usage, prices, budgets."""
