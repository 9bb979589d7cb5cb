"""Conversations as people manage and read them: list, search, export, replay."""
