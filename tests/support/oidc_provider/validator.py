"""The claims of the test provider's users: email, email_verified (left out when null),
names and groups, from the users file the tests write (re-read at each sign-in, so a test
can change a user's groups or claims)."""

import json
import os
from pathlib import Path

from oauth2_provider.oauth2_validators import OAuth2Validator


def provider_users() -> dict[str, dict]:
    return json.loads(Path(os.environ["OIDC_PROVIDER_USERS"]).read_text())


class ClaimsValidator(OAuth2Validator):
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "profile"}

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
