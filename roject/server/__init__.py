"""The server under Django: middlewares, static files, body and write limits, threads."""
