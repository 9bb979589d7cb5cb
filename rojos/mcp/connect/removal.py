"""A person's MCP accounts go when they can no longer use them: when they leave their last
project (every rojo, and so every server, can be used in any project) or their account is
deactivated. Memberships and users are `roject`'s, which imports nothing of rojos: these
receivers are connected to its models' signals by rojos' app (`RojosConfig.ready`), so every
way out is covered (an owner's removal, the sign-in's group mapping, the admin, a deleted
project)."""

from django.db import transaction

from roject.models import Membership

from ..accounts import accounts_of_user_delete


def membership_deleted(sender, instance: Membership, **kwargs) -> None:
    """A membership ended: with no project left, the person's tokens are deleted."""
    user_id = instance.user_id

    def forget() -> None:
        if not Membership.objects.filter(user_id=user_id).exists():
            accounts_of_user_delete(user_id=user_id)

    transaction.on_commit(forget)


def user_saved(sender, instance, **kwargs) -> None:
    """A deactivated person's tokens are deleted (a deleted one's go with the row); rows
    loaded as they are (a fixture, `raw`) are left alone."""
    if not instance.is_active and not kwargs.get("raw"):
        accounts_of_user_delete(user_id=instance.pk)
