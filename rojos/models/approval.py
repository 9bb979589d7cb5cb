"""A tool call waiting for a person's decision, stored so that any process can list it."""

from django.conf import settings
from django.db import models

from roject.models import Project

from .conversation import Conversation


class PendingApproval(models.Model):
    """One call of a running turn that waits for approval; removed once decided, timed out
    or its turn ended.

    Every waiting call has one (the decision's audit entry names its tool and path from
    here); `routed` ones wait for an owner of the project and fill the owners' inbox.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="pending_approvals")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="pending_approvals"
    )
    # The turn's user: the editor whose call it is.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="pending_approvals",
    )
    call_id = models.CharField(max_length=200)
    tool = models.CharField(max_length=200)
    path = models.CharField(max_length=1000, blank=True)
    preview = models.JSONField(default=dict, blank=True)
    routed = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()

    class Meta:
        ordering = ["created", "id"]
        indexes = [models.Index(fields=["project", "created"])]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "call_id"], name="unique_pending_approval"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} {self.path} in conversation {self.conversation_id}"
