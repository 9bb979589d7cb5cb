"""The capability in a preview's address: a person's read of one project, signed, for
`ROJO_PREVIEW_SECONDS`.

A sandboxed page has an origin of its own, so its requests for the pictures and styles beside
it carry no session cookie; the address carries this instead. It grants nothing the person
could not read anyway, and each request checks their access again (`views.preview`).
"""

from django.conf import settings
from django.core import signing

_SALT = "rojo.preview"


def preview_capability(*, user_id: int, project_id: int) -> str:
    return signing.dumps([user_id, project_id], salt=_SALT, compress=False)


def preview_capability_read(token: str) -> tuple[int, int] | None:
    """(user id, project id), or None for a capability that is forged, altered or expired."""
    try:
        user_id, project_id = signing.loads(
            token, salt=_SALT, max_age=settings.ROJO_PREVIEW_SECONDS
        )
    except (signing.BadSignature, ValueError, TypeError):
        return None
    return int(user_id), int(project_id)
