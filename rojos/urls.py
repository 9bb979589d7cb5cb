"""rojos' URLs, included at the root by roject/urls.py: a project's page and the API."""

from django.urls import path

from rojos.web import pages as views
from rojos.web import shared_pages
from rojos.web.api import api

urlpatterns = [
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
