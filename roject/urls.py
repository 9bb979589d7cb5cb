"""The root URLs. rojos' are included by dotted string, so roject imports nothing from rojos."""

from django.contrib import admin
from django.urls import include, path

from roject.audit import views as audit_views
from roject.identity import views
from roject.identity.forms import AdminLoginForm
from roject.identity.oidc import views as oidc_views
from roject.members import views as member_views
from roject.members.project_settings import project_settings
from roject.previews.views import preview
from roject.server.static_files import favicon

# The admin's login counts failures with the site's (roject/identity/login_limits.py).
admin.site.login_form = AdminLoginForm

urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", favicon, name="favicon"),
    path("", include("rojos.urls")),
    path("preview/<str:token>/<path:path>", preview, name="file_preview"),
    path("projects/<int:project_id>/settings/", project_settings, name="project_settings"),
    path("projects/<int:project_id>/audit/", audit_views.project_audit, name="project_audit"),
    path("tokens/", views.api_tokens, name="api_tokens"),
    path("tokens/<int:token_id>/revoke/", views.api_token_revoke_view, name="api_token_revoke"),
    path("projects/<int:project_id>/members/", member_views.members, name="members"),
    path(
        "projects/<int:project_id>/members/add/",
        member_views.member_add_view,
        name="member_add",
    ),
    path(
        "projects/<int:project_id>/members/<int:user_id>/role/",
        member_views.member_role_view,
        name="member_role",
    ),
    path(
        "projects/<int:project_id>/members/<int:user_id>/remove/",
        member_views.member_remove_view,
        name="member_remove",
    ),
    path(
        "projects/<int:project_id>/invitations/",
        member_views.invitation_create_view,
        name="invitation_create",
    ),
    path(
        "projects/<int:project_id>/invitations/<int:invitation_id>/revoke/",
        member_views.invitation_revoke_view,
        name="invitation_revoke",
    ),
    path("invitations/<str:token>/", member_views.invitation, name="invitation"),
    path("login/", views.login, name="login"),
    path("logout/", oidc_views.logout, name="logout"),
    # Single sign-on (roject/identity/oidc/config.py): 404 unless configured; the provider's
    # redirect URI is <site>/oidc/callback/.
    path(
        "oidc/authenticate/", oidc_views.OidcLoginStart.as_view(), name="oidc_authentication_init"
    ),
    path("oidc/callback/", oidc_views.OidcCallback.as_view(), name="oidc_authentication_callback"),
    path("admin/login/", views.admin_login),
    # Its old password counts as a login (roject/identity/login_limits.py).
    path(
        "admin/password_change/",
        admin.site.admin_view(views.admin_password_change, cacheable=True),
    ),
    path("admin/", admin.site.urls),
]
