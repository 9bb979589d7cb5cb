"""The single sign-on variables that need parsing beyond a string (roject/identity/oidc/)."""

from django.core.exceptions import ImproperlyConfigured


def oidc_group_roles(value: str) -> list[tuple[str, str, str]]:
    """ROJO_OIDC_GROUP_ROLES as (group, project slug, role) triples: `group:slug:role`,
    comma-separated; a group's name may itself hold colons (the last two fields are split off)."""
    triples = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        group, _, rest = item.rpartition(":")
        group, _, slug = group.rpartition(":")
        if not group or not slug or rest not in {"viewer", "editor", "owner"}:
            raise ImproperlyConfigured(
                f"ROJO_OIDC_GROUP_ROLES: {item!r} is not group:project-slug:role "
                "(role: viewer, editor or owner)."
            )
        triples.append((group, slug, rest))
    return triples
