"""The server under Django: middlewares, threads, SQLite, limits, probes, metrics."""
