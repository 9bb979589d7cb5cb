"""Approvals, and those routed to a project's owners."""
