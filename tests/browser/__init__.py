"""The pages in a real Chromium."""
