"""Single sign-on with an OpenID Connect provider (its backend: oidc_backend)."""
