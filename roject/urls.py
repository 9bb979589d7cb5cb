"""The root URLs. rojos' are included by dotted string, so roject imports nothing from rojos."""

from django.contrib import admin
from django.urls import include, path

from . import oidc_views, views
from .forms import AdminLoginForm

# The admin's login counts failures with the site's (roject/login_limits.py).
admin.site.login_form = AdminLoginForm

urlpatterns = [
    path("", views.home, name="home"),
    path("", include("rojos.urls")),
    path("tokens/", views.api_tokens, name="api_tokens"),
    path("tokens/<int:token_id>/revoke/", views.api_token_revoke_view, name="api_token_revoke"),
    path("login/", views.login, name="login"),
    path("logout/", oidc_views.logout, name="logout"),
    # Single sign-on (roject/oidc.py): 404 unless configured; the provider's redirect URI
    # is <site>/oidc/callback/.
    path(
        "oidc/authenticate/", oidc_views.OidcLoginStart.as_view(), name="oidc_authentication_init"
    ),
    path("oidc/callback/", oidc_views.OidcCallback.as_view(), name="oidc_authentication_callback"),
    path("admin/login/", views.admin_login),
    path("admin/", admin.site.urls),
]
