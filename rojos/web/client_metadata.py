"""Rojo's client ID metadata document, /connections/client-metadata.json: how an MCP server's
authorization server that supports them (draft-ietf-oauth-client-id-metadata-document, MCP's
SEP-991) learns who Rojo is, with no credentials set by an admin and no dynamic
registration. The URL is the `client_id`: Connect hands it to the SDK (`connections`), and
the authorization server fetches the document from it.

Its URL is built as the app builds every absolute URL (`request.build_absolute_uri`): the
host is the request's, which Django accepts only from ALLOWED_HOSTS, and the scheme is
https only on a TLS connection or, behind a proxy, where SECURE_PROXY_SSL_HEADER trusts the
proxy's `X-Forwarded-Proto`. The draft asks for an https client_id (and the SDK refuses any
other): over plain http there is no document, and Connect offers none.
"""

from typing import TYPE_CHECKING

from django.http import Http404, JsonResponse
from django.urls import reverse
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

if TYPE_CHECKING:
    from rojos.mcp.oauth import SignIn


# Authorization servers cache the document (by its Cache-Control): briefly, so that a
# changed host or name reaches them soon.
CACHE_SECONDS = 300


def client_metadata_url(request) -> str | None:
    """The document's URL as this request reaches the site, or None unless that is https."""
    if not request.is_secure():
        return None
    return request.build_absolute_uri(reverse("mcp_client_metadata"))


def client_sign_in(request) -> "SignIn":
    """How Rojo presents itself to authorization servers, from this request's site: the
    redirect URI of Connect's callback, and the document's URL when the site is https."""
    # Here, not at the top: it brings the MCP SDK, and the URLconf (so every management
    # command) imports this module; a server imports it at start (rojos/eager.py).
    from rojos.mcp import oauth

    return oauth.SignIn(
        redirect_uri=request.build_absolute_uri(reverse("mcp_connect_callback")),
        client_metadata_url=client_metadata_url(request),
    )


@require_GET
@cache_control(public=True, max_age=CACHE_SECONDS)
def client_metadata_document(request):
    """The document (public: the authorization server fetches it without a login)."""
    sign_in = client_sign_in(request)
    if sign_in.client_metadata_url is None:
        raise Http404("Rojo's client ID metadata document is published only over https.")
    document = sign_in.metadata_document(client_uri=request.build_absolute_uri("/"))
    return JsonResponse(document)
