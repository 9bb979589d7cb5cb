"""The claims of the test provider's users: email, email_verified, names and groups, from the
users file the tests write (re-read at each sign-in, so a test can change a user's groups)."""

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
        return {
            "email": user["email"],
            "email_verified": user.get("email_verified", True),
            "preferred_username": user.get("preferred_username", request.user.username),
            "given_name": user.get("given_name", ""),
            "family_name": user.get("family_name", ""),
            "groups": user.get("groups", []),
        }
