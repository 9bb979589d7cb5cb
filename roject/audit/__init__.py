"""The audit log: its entries, their guard, exports and pages, the logins' entries."""
