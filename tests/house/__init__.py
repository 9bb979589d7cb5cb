"""The house rules: docs' links, import contracts."""
