"""Audit entries for an account on an MCP server connected or disconnected, a person's own or
the shared one.

An entry names the server (by id, and its name as it was) and whose account it is; for a
connection also how Rojo was known to the authorization server (the admin's credentials,
its client ID metadata document, or a client it registered dynamically). Never a token,
the client secret or the client ID a provider issued.
"""

from typing import Literal

from roject.audit.log import AuditAction, AuditActor, audit_record

from ...models import McpServer
from ..spec import ServerSpec

Registration = Literal["preregistered", "client_metadata_document", "dynamic"]


def registration_of(*, spec: ServerSpec, flow: dict) -> Registration:
    """How the sign-in that `flow` paused was registered with the authorization server."""
    client_id = (flow.get("client") or {}).get("client_id")
    if spec.oauth_client_id and client_id == spec.oauth_client_id:
        return "preregistered"
    if client_id and client_id == flow.get("client_metadata_url"):
        return "client_metadata_document"
    return "dynamic"


def account_audit(
    *,
    action: AuditAction,
    actor: AuditActor,
    spec: ServerSpec,
    shared: bool,
    details: dict | None = None,
) -> None:
    """(Blocking) One entry: `actor` connected or disconnected their account on the server
    (`shared`: the server's shared account)."""
    audit_record(
        action=action,
        actor=actor,
        object_type=McpServer._meta.label_lower,
        object_id=spec.server_id,
        object_repr=spec.name,
        details={"server": spec.slug, "account": "shared" if shared else "own", **(details or {})},
    )
