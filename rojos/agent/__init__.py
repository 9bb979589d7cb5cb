"""The agent loop: one user message in, model steps and tool runs out, as events."""
