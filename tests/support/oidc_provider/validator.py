"""The claims of the test provider's users: email, email_verified (left out when null),
names and groups, from the users file the tests write (re-read at each sign-in, so a test
can change a user's groups or claims); and the signing of ID tokens for a client known by its
metadata document."""

import json
import os
from pathlib import Path

from oauth2_provider.models import Application
from oauth2_provider.oauth2_validators import OAuth2Validator


def provider_users() -> dict[str, dict]:
    return json.loads(Path(os.environ["OIDC_PROVIDER_USERS"]).read_text())


class ClaimsValidator(OAuth2Validator):
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "profile"}

    def _load_application(self, client_id, request):
        """A client known by its metadata document signs in with `openid` too (the MCP
        server asks for it): django-oauth-toolkit makes it with no algorithm to sign its
        ID tokens with, so it gets the provider's RSA key, as the registered client has."""
        client = super()._load_application(client_id, request)
        cimd = Application.RegistrationSource.CIMD
        if client is not None and client.registration_source == cimd and not client.algorithm:
            client.algorithm = Application.RS256_ALGORITHM
            client.save(update_fields=["algorithm"])
        return client

    def get_additional_claims(self, request):
        user = provider_users()[request.user.username]
        claims = {
            "email": user["email"],
            # The claim as the tests set it: True, False, "false", … or null for none at all.
            "email_verified": user.get("email_verified", True),
            "preferred_username": user.get("preferred_username", request.user.username),
            "given_name": user.get("given_name", ""),
            "family_name": user.get("family_name", ""),
            "groups": user.get("groups", []),
        }
        if claims["email_verified"] is None:
            del claims["email_verified"]
        return claims
