"""The built-in tools and tools of one's own."""
