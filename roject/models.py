"""Projects and who may use them."""

from django.conf import settings
from django.db import models


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
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="projects"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's role in one project; no membership means the project does not exist for them."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "project"], name="unique_membership"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


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
