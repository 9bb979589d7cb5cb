"""rojos' URLs, included at the root by roject/urls.py: a project's page and the API."""

from django.urls import path

from rojos.web import client_metadata, connections, shared_pages
from rojos.web import pages as views
from rojos.web.api import api

urlpatterns = [
    # Accounts on MCP servers that ask for OAuth; the callback is the redirect URI to
    # register with a provider: <site>/connections/callback/.
    path("connections/", connections.connections_page, name="mcp_connections"),
    path("connections/callback/", connections.connect_callback, name="mcp_connect_callback"),
    # Rojo's client ID metadata document: on an https site, its URL is Rojo's client_id
    # with authorization servers that support one.
    path(
        "connections/client-metadata.json",
        client_metadata.client_metadata_document,
        name="mcp_client_metadata",
    ),
    path("connections/<slug:slug>/connect/", connections.connect_view, name="mcp_connect"),
    path(
        "connections/<slug:slug>/disconnect/",
        connections.disconnect_view,
        name="mcp_disconnect",
    ),
    path("projects/<int:project_id>/", views.project_page, name="project"),
    path(
        "projects/<int:project_id>/c/<int:conversation_id>/",
        views.project_page,
        name="conversation",
    ),
    path(
        "projects/<int:project_id>/c/<int:conversation_id>/read/",
        shared_pages.conversation_read_page,
        name="conversation_read",
    ),
    path("approvals/", views.approvals_page, name="approvals"),
    path("api/", api.urls),
]
