"""`/preview/<capability>/<path>`: a project file as its preview shows it (`kinds.py`).

Every request reads the capability (from the client address it was asked from), then the
person's access and sign-in as they are now (the API token it was asked with still live, or
the login session still signed in; the password unchanged), before anything of the file; a
capability that is forged, expired, or no longer backed by access is a 404, which tells
nothing of what exists. The file is read through the storage gate.
"""

import asyncio
from urllib.parse import quote

from django.contrib.auth import get_user_model
from django.http import Http404, HttpRequest, StreamingHttpResponse
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_safe

from roject import storage
from roject.identity.live_auth import asession_signed_in
from roject.identity.login_limits import client_address
from roject.identity.tokens import aapi_token_alive
from roject.members.access import aproject_access
from roject.server.streaming import blocking_stream
from roject.storage import StorageError

from .capability import preview_capability_read
from .kinds import preview_type

_EXPIRED = "This preview's address has expired; open the file again."


@require_safe
@xframe_options_sameorigin
async def preview(request: HttpRequest, token: str, path: str):
    grant = preview_capability_read(token)
    if grant is None or not grant.asked_from(client_address(request)):
        raise Http404(_EXPIRED)
    user = await get_user_model().objects.filter(pk=grant.user_id, is_active=True).afirst()
    if user is None or not grant.password_unchanged(user):
        raise Http404(_EXPIRED)
    if grant.token_id is not None and not await aapi_token_alive(token_id=grant.token_id):
        raise Http404(_EXPIRED)
    if grant.session_key is not None and not await asession_signed_in(
        session_key=grant.session_key, user_id=user.pk
    ):
        raise Http404(_EXPIRED)  # logged out, or the session expired
    access = await aproject_access(user=user, project_id=grant.project_id)  # 404 without access
    root = storage.project_root_create(access.project.pk)
    try:
        produce = await asyncio.to_thread(storage.file_download_open, root, path)
    except (StorageError, OSError):
        raise Http404("No such file to preview.") from None
    content_type, policy = preview_type(path)
    response = StreamingHttpResponse(blocking_stream(produce), content_type=content_type)
    response["Content-Security-Policy"] = policy
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "private, no-store"
    # No Cross-Origin-Resource-Policy: a sandboxed page has an opaque origin, which
    # `same-origin` would refuse its own pictures and styles; the capability is the guard.
    name = quote(path.rsplit("/", 1)[-1])
    response["Content-Disposition"] = f"inline; filename*=UTF-8''{name}"
    return response
