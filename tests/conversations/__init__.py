"""Conversations as people use them: search, export, replay, sharing."""
