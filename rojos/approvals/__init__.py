"""Approvals routed to a project's owners: the stored waits, the inbox's live news."""
