"""Logins, their limits, sessions, API tokens, single sign-on."""
