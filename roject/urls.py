"""The root URLs. rojos' are included by dotted string, so roject imports nothing from rojos."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import audit_views, views
from .forms import AdminLoginForm

# The admin's login counts failures with the site's (roject/login_limits.py).
admin.site.login_form = AdminLoginForm

urlpatterns = [
    path("", views.home, name="home"),
    path("", include("rojos.urls")),
    path("projects/<int:project_id>/audit/", audit_views.project_audit, name="project_audit"),
    path("tokens/", views.api_tokens, name="api_tokens"),
    path("tokens/<int:token_id>/revoke/", views.api_token_revoke_view, name="api_token_revoke"),
    path("login/", views.login, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/login/", views.admin_login),
    path("admin/", admin.site.urls),
]
