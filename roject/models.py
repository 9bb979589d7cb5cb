"""Projects and who may use them."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    EDITOR = "editor", "Editor"
    OWNER = "owner", "Owner"

    @property
    def can_write(self) -> bool:
        """Editors and owners change a project's files; viewers only read them."""
        return self in WRITE_ROLES


WRITE_ROLES = frozenset({Role.EDITOR, Role.OWNER})


class Project(models.Model):
    """A set of files under storage/<id>/root/ that members chat about with rojos."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=200, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    # A call that needs approval in the turn of a member who is not an owner waits for an
    # owner (their Approvals inbox), not for the turn's own user.
    owner_approval = models.BooleanField(
        "changes need approval by an owner",
        default=False,
        help_text="Calls that need approval in an editor's turn wait for an owner to decide.",
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="projects"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class MembershipSource(models.TextChoices):
    MANUAL = "", "Given in the app"
    OIDC = "oidc", "Sign-in provider's groups"


class Membership(models.Model):
    """A user's role in one project; no membership means the project does not exist for them."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    # Who gave it: an owner or the admin (""), or the sign-in provider's groups ("oidc"),
    # which then also change and remove it (roject/identity/oidc/roles.py), never one given by hand.
    source = models.CharField(
        max_length=10, choices=MembershipSource.choices, blank=True, default=""
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "project"], name="unique_membership"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


class MembershipRemoval(models.Model):
    """An owner took this user out of this project: the sign-in's group mapping
    (roject/identity/oidc/roles.py) must not add them back. Gone when an owner adds them again."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    removed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "project"], name="unique_membership_removal"),
        ]

    def __str__(self) -> str:
        return f"{self.user} removed from {self.project}"


class OidcIdentity(models.Model):
    """The provider's account (issuer, subject) an app user signs in as: found by these at
    every sign-in after the first, never by email (see roject/identity/oidc/accounts.py)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identities"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="unique_oidc_identity"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class ApiToken(models.Model):
    """A personal API token: its user's access, for scripts and outside agents (MCP).

    Only a digest of the token is stored; the token itself is shown once, when made. A
    read-only token never writes, whatever its user's role.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    # The token's first characters, to tell tokens apart in a list; not enough to use it.
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    read_only = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField(null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["user", "-created"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class Invitation(models.Model):
    """A link that makes whoever opens it a member with `role`; signed, expiring, single-use.

    Only a digest of the link's random part is stored (like ApiToken): the link is shown
    once, when made. `accepted_at` is set by one conditional update, so two people opening
    the same link at once cannot both use it.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    # Who the link is meant for: a note for owners only, never copied into an account.
    email = models.EmailField(blank=True)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["project", "-created"])]

    def __str__(self) -> str:
        return f"{self.get_role_display()} in {self.project}" + (
            f" for {self.email}" if self.email else ""
        )


class AuditAction(models.TextChoices):
    """What an audit entry records; the admin filters by it."""

    LOGIN = "login", "Login"
    LOGIN_FAILED = "login_failed", "Failed login"
    LOGOUT = "logout", "Logout"
    MEMBER_ADDED = "member_added", "Member added"
    MEMBER_ROLE_CHANGED = "member_role_changed", "Member's role changed"
    MEMBER_REMOVED = "member_removed", "Member removed"
    INVITATION_CREATED = "invitation_created", "Invitation created"
    INVITATION_ACCEPTED = "invitation_accepted", "Invitation accepted"
    INVITATION_REVOKED = "invitation_revoked", "Invitation revoked"
    PROJECT_CHANGED = "project_changed", "Project settings changed"
    PROJECT_DELETED = "project_deleted", "Project deleted"
    ROJO_CREATED = "rojo_created", "Rojo created"
    ROJO_CHANGED = "rojo_changed", "Rojo changed"
    ROJO_DELETED = "rojo_deleted", "Rojo deleted"
    MCP_SERVER_CREATED = "mcp_server_created", "MCP server created"
    MCP_SERVER_CHANGED = "mcp_server_changed", "MCP server changed"
    MCP_SERVER_DELETED = "mcp_server_deleted", "MCP server deleted"
    APPROVAL_GRANTED = "approval_granted", "Change approved"
    APPROVAL_DENIED = "approval_denied", "Change denied"
    UNDO = "undo", "Undo"
    RESTORE = "restore", "File restored"
    TOKEN_CREATED = "token_created", "API token created"
    TOKEN_REVOKED = "token_revoked", "API token revoked"
    EXPORT = "export", "Export"
    CONVERSATION_DELETED = "conversation_deleted", "Conversation deleted"
    FILE_DELETED = "file_deleted", "File deleted"
    SSO_UNLINKED = "sso_unlinked", "Single sign-on account unlinked"
    MEMBER_REMOVAL_FORGOTTEN = "member_removal_forgotten", "Group mapping may add a member again"
    MCP_ACCOUNT_CONNECTED = "mcp_account_connected", "MCP account connected"
    MCP_ACCOUNT_DISCONNECTED = "mcp_account_disconnected", "MCP account disconnected"
    BACKUP_RESTORED = "backup_restored", "Backup restored"


class AuditEntryQuerySet(models.QuerySet):
    """Entries are inserted, read and pruned: a bulk update or delete is refused."""

    def update(self, **kwargs):
        raise TypeError("Audit entries are never changed.")

    def delete(self):
        raise TypeError("Audit entries are removed only by pruning (roject.audit.log.audit_prune).")

    def prune_before(self, cutoff) -> int:
        """Delete the entries older than `cutoff`: retention, the one removal there is."""
        return models.QuerySet.delete(self.filter(at__lt=cutoff))[0]


class AuditEntry(models.Model):
    """One audited action; append-only (see roject/audit/log.py).

    Ids with copies of names, no foreign keys: what the log says stays as it was written
    when its user, token or project is deleted.
    """

    class ActorKind(models.TextChoices):
        USER = "user", "User"
        TOKEN = "token", "API token"
        SYSTEM = "system", "System"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    action = models.CharField(max_length=40, choices=AuditAction.choices)
    actor_kind = models.CharField(max_length=10, choices=ActorKind.choices)
    actor_user_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    actor_token_id = models.BigIntegerField(null=True, blank=True)
    actor_name = models.CharField(max_length=200, blank=True)
    project_id = models.BigIntegerField(null=True, blank=True)
    project_name = models.CharField(max_length=200, blank=True)
    object_type = models.CharField(max_length=100, blank=True)
    object_id = models.CharField(max_length=200, blank=True)
    object_repr = models.CharField(max_length=200, blank=True)
    details = models.JSONField(default=dict, blank=True)
    address = models.GenericIPAddressField(null=True, blank=True)

    objects = AuditEntryQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["project_id", "-at"])]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name or self.actor_kind} {self.action}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise TypeError("Audit entries are never changed.")
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("Audit entries are removed only by pruning (roject.audit.log.audit_prune).")
