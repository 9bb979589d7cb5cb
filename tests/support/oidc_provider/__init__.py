"""A real OpenID Connect provider for the single sign-on tests: django-oauth-toolkit in a
process of its own (see tests/support/oidc_server.py), on its own SQLite file."""
