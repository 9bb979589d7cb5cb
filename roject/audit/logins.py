"""Logins, failed logins and logouts in the audit log, one entry each, from Django's auth
signals: the password forms (the site's and the admin's) and single sign-on send them alike."""

from roject.audit.log import AuditAction, audit_record
from roject.identity.login_limits import client_ip

_NAME_LENGTH = 150


def _via(user) -> str:
    backend = getattr(user, "backend", "") or ""
    return "oidc" if "oidc" in backend.lower() else "password"


def _address(request) -> str | None:
    return client_ip(request) if request is not None else None


def audit_login(sender, request, user, **kwargs) -> None:
    audit_record(
        action=AuditAction.LOGIN,
        user=user,
        obj=user,
        details={"via": _via(user)},
        address=_address(request),
    )


def audit_login_failed(sender, credentials, request=None, **kwargs) -> None:
    """A refused password, or a single sign-on the provider or the app refused. The name
    typed is kept (clipped) to tell guessing from typos; the password never reaches here."""
    via = credentials.get("via") or ("oidc" if "nonce" in credentials else "password")
    details = {"via": via}
    if via == "password":
        details["username"] = str(credentials.get("username", ""))[:_NAME_LENGTH]
    reason = kwargs.get("reason") or getattr(request, "oidc_failure", "")
    if reason:
        details["reason"] = reason
    audit_record(action=AuditAction.LOGIN_FAILED, details=details, address=_address(request))


def audit_logout(sender, request, user, **kwargs) -> None:
    if user is None:  # a logout without a login: nothing happened
        return
    audit_record(action=AuditAction.LOGOUT, user=user, obj=user, address=_address(request))
