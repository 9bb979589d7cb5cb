"""Providers' streams, quirks, failures and refusals; the fake provider itself."""
