"""Run the test provider: `python -m tests.support.oidc_provider.serve PORT`.

Creates its database, its users (OIDC_PROVIDER_USERS, a JSON file: username → password,
email, groups, …) and one confidential client (OIDC_PROVIDER_CLIENT, a JSON file), then
serves on 127.0.0.1:PORT until terminated.
"""

import json
import os
import sys
from pathlib import Path

import django


def provider_setup() -> None:
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0, interactive=False)
    for username, user in json.loads(Path(os.environ["OIDC_PROVIDER_USERS"]).read_text()).items():
        User.objects.create_user(username, email=user["email"], password=user["password"])
    client = json.loads(Path(os.environ["OIDC_PROVIDER_CLIENT"]).read_text())
    Application.objects.create(
        name="Rojo Chat",
        client_id=client["client_id"],
        client_secret=client["client_secret"],
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=" ".join(client["redirect_uris"]),
        post_logout_redirect_uris=" ".join(client["post_logout_redirect_uris"]),
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=False,
    )


def main() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.support.oidc_provider.settings"
    django.setup()
    provider_setup()
    import uvicorn
    from django.core.asgi import get_asgi_application

    uvicorn.run(
        get_asgi_application(),
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="warning",
        lifespan="off",
    )


if __name__ == "__main__":
    main()
