"""Shared fakes, servers and fixtures of the tests."""
