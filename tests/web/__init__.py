"""The API, the chat endpoint, the admin, the commands."""
