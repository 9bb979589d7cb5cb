from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from rojos.api import api

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("projects/<int:project_id>/", views.project_page, name="project"),
    path(
        "projects/<int:project_id>/c/<int:conversation_id>/",
        views.project_page,
        name="conversation",
    ),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
