"""Django's ModelBackend with the session's user read by a query compiled once.

Every request signed in by its session asks the backend the session names for its user
(django.contrib.auth.get_user); Django's ModelBackend builds and compiles that ORM query
each time, most of the 270 µs of thread CPU the session's user took in a chat's start
(docs/performance.md, section 14). Here it is prepared (roject/server/prepared_queries.py):
the same row, then the same user_can_authenticate; get_user's own checks (the backend
listed in AUTHENTICATION_BACKENDS, the session's hash and its fallback keys, the session
flushed on a mismatch) are Django's, unchanged.

A session stores its backend's dotted path, so the sessions made before this backend name
Django's: it stays in AUTHENTICATION_BACKENDS, after this one, and they go on as they were
until they end. Moving this module would sign out everyone it signed in.
"""

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied

from roject.server.prepared_queries import PreparedQuery

__all__ = ["PreparedModelBackend", "PreparedSessionUser", "user_by_pk"]

_USER = PreparedQuery(lambda pk: get_user_model()._default_manager.filter(pk=pk), int)


def user_by_pk(user_id):
    """(Blocking) The user whose primary key is `user_id`, whatever its state; None for none."""
    if type(user_id) is not int:  # a primary key not an integer: the ORM converts it
        return get_user_model()._default_manager.filter(pk=user_id).first()
    return _USER.first(user_id)


class PreparedSessionUser:
    """The session's user by the prepared query, while the account is active, as Django's
    ModelBackend answers it (user_can_authenticate), for each backend that signs people in:
    mozilla-django-oidc's own get_user returns the user whatever its state, so a
    deactivated SSO user stayed signed in."""

    def get_user(self, user_id):
        user = user_by_pk(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None

    async def aget_user(self, user_id):
        return await sync_to_async(self.get_user)(user_id)


class PreparedModelBackend(PreparedSessionUser, ModelBackend):
    """Passwords checked as Django's ModelBackend checks them; the session's user prepared."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if user is None and username is not None and password is not None:
            # Refused: Django's ModelBackend, listed after this one for its sessions, would
            # hash the password again to the same answer (twice the CPU a wrong password
            # costs). Django sends user_login_failed as it would for a None.
            raise PermissionDenied
        return user
