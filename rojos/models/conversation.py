"""Conversations, their messages in OpenAI format, how each turn ended, and file changes."""

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from roject.models import ApiToken, Project

from .claims import dead_claim
from .rojo import Rojo


class ConversationQuerySet(models.QuerySet):
    def running(self):
        """Conversations whose turn is alive: claimed, with a fresh heartbeat."""
        stale = timezone.now() - timedelta(seconds=settings.ROJO_TURN_STALE_SECONDS)
        return self.filter(turn_id__isnull=False, turn_heartbeat__gte=stale)


class Conversation(models.Model):
    """A thread of messages between project members and one rojo."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="conversations")
    rojo = models.ForeignKey(
        Rojo, on_delete=models.SET_NULL, null=True, blank=True, related_name="conversations"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="conversations",
    )
    title = models.CharField(max_length=200, blank=True)
    # The model its turns use, one the rojo offers; empty: the rojo's default
    # (rojos.context.model_choice).
    model = models.CharField(max_length=200, blank=True)
    # Pinned conversations head the project's list, for every member.
    pinned = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    # An outside agent's calls through MCP with one token (one conversation per token and
    # project): its messages are the calls and their results, never sent to a model.
    via_mcp = models.BooleanField(default=False, editable=False)
    via_token = models.ForeignKey(
        ApiToken,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="conversations",
    )
    # The running turn, if any: claimed with a conditional UPDATE so that only one turn runs
    # per conversation across every server process; a stale heartbeat frees a crashed claim.
    turn_id = models.UUIDField(null=True, blank=True, editable=False)
    turn_heartbeat = models.DateTimeField(null=True, blank=True, editable=False)
    # Tools whose calls run without asking for the rest of this conversation (a person chose
    # "allow for this conversation" on one of their approvals); the approval gate reads it.
    allowed_tools = models.JSONField(default=list, blank=True)
    # Since when the running turn waits for a person's approval (None: it does not), for the
    # conversation list's badge on every server process.
    approval_waiting = models.DateTimeField(null=True, blank=True, editable=False)
    # The active branch (0: the first) and the forks made by editing or regenerating, one
    # entry each: {"id", "parent", "at", "after", "first", "replaced"} (rojos/agent/branches.py).
    # Kept on the row, so loading the active branch stays one query of messages.
    branch = models.PositiveIntegerField(default=0, editable=False)
    branches = models.JSONField(default=list, blank=True, editable=False)
    # The process running it (host, pid, boot token: rojos/models/claims.py), so that a process
    # on the same host can tell at once that a claim's owner is gone.
    turn_owner = models.CharField(max_length=200, blank=True, editable=False)
    # The key the page made for the latest message sent to it (ChatIn.key): a page that
    # never heard back (its server died before the reply started) finds it by that key.
    client_key = models.CharField(max_length=64, blank=True, editable=False)

    objects = ConversationQuerySet.as_manager()

    class Meta:
        ordering = ["-pinned", "-updated", "-id"]
        indexes = [
            # The list's pages: keyset on (pinned, updated, id) within a project.
            models.Index(
                fields=["project", "-pinned", "-updated", "-id"], name="conversation_page"
            ),
            # The claimed ones (running()): every chat's limits read them; a scan of every
            # conversation before.
            models.Index(
                fields=["turn_heartbeat"],
                condition=models.Q(turn_id__isnull=False),
                name="conversation_claimed",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["via_token", "project"],
                condition=models.Q(via_token__isnull=False),
                name="one_mcp_conversation_per_token_and_project",
            ),
        ]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"

    @property
    def running(self) -> bool:
        """Whether a turn is alive here: claimed, and the claim not a dead one (its owner a
        gone process of this host, or its heartbeat stale; rojos.models.claims.dead_claim)."""
        return self.turn_id is not None and dead_claim(self) is None

    @property
    def waiting_approval(self) -> bool:
        """Whether a running turn here waits for someone to approve or deny a call."""
        return self.approval_waiting is not None and self.running

    @staticmethod
    def title_from(message: str) -> str:
        """A new conversation's title: its first message on one line, at most 80 characters."""
        line = " ".join(message.split())
        return line if len(line) <= 80 else line[:79] + "…"


class Message(models.Model):
    """One message in the OpenAI chat format, so the history is sent back as stored."""

    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"
        # A summary of the turns before `extra["until"]` (a position), which requests send
        # in their stead once the conversation outgrew the model's window; never sent as is.
        SUMMARY = "summary"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    # Which branch of the conversation holds it (rojos/agent/branches.py) and its place along that
    # branch's path from the first message: positions on one path run 0, 1, 2, ... .
    branch = models.PositiveIntegerField(default=0)
    position = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    # null, as in the OpenAI format, for an assistant message that only calls tools.
    content = models.TextField(null=True, blank=True)  # noqa: DJ001
    # Assistant: [{"id", "type": "function", "function": {"name", "arguments"}, ...extra}].
    tool_calls = models.JSONField(null=True, blank=True)
    # Tool: which call this answers, the tool's name and whether it failed.
    tool_call_id = models.CharField(max_length=200, blank=True)
    name = models.CharField(max_length=64, blank=True)
    is_error = models.BooleanField(default=False)
    # Reasoning text some models stream; kept to show, never sent back.
    reasoning = models.TextField(blank=True)
    # Fields a provider added that the app does not know, kept verbatim.
    extra = models.JSONField(default=dict, blank=True)
    usage = models.JSONField(null=True, blank=True)
    # The model that wrote an assistant message (empty on older rows and other roles).
    model = models.CharField(max_length=200, blank=True)
    # An assistant reply still streaming, saved now and then (drafts.Draft): shown, kept
    # after a crash, but not yet indexed for search, which would re-index the whole growing
    # text at every save. Whatever ends the reply clears it, and the final text is indexed.
    draft = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation_id", "position"]  # the column: ordering by the relation joins
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "branch", "position"], name="unique_message_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} #{self.position}"


class TurnRecord(models.Model):
    """How one turn ended: kept so replays and exports can show errors, which no message holds."""

    class Status(models.TextChoices):
        RUNNING = "running"
        # Running, and a tool call waits for someone's approval (the list's badge).
        DONE = "done"
        ERROR = "error"
        STOPPED = "stopped"
        INTERRUPTED = "interrupted"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    user_message = models.OneToOneField(
        Message, on_delete=models.CASCADE, related_name="turn_record"
    )
    rojo = models.ForeignKey(Rojo, on_delete=models.SET_NULL, null=True, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RUNNING)
    error = models.TextField(blank=True)
    error_code = models.CharField(max_length=20, blank=True)
    started = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["conversation_id", "started"]
        indexes = [
            models.Index(fields=["user", "-started"]),
            # The user's running ones, which the user's limits count at every chat: without
            # it, a read of every turn the user ever started.
            models.Index(
                fields=["user"], condition=models.Q(status="running"), name="turnrecord_running"
            ),
        ]

    def __str__(self) -> str:
        return f"turn of message {self.user_message_id} ({self.status})"


class FileChange(models.Model):
    """One change to a project's files, by a rojo's call or a person, with how to reverse it.

    The one ledger of every change: a rojo's tool call, a person's edit in the file panel, an
    upload, a restore of an older version, an MCP client's call. The previous state of each
    changed path is copied to storage/<project>/undo/<key>/, outside the project root;
    `after` holds a digest of each path as the change left it, so an undo can tell whether
    the file changed since and refuse rather than lose work.
    """

    class Origin(models.TextChoices):
        ROJO = "rojo"
        PERSON = "person"
        UPLOAD = "upload"
        RESTORE = "restore"
        MCP = "mcp"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="file_changes")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="changes"
    )
    message = models.ForeignKey(
        Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="changes"
    )
    tool_call_id = models.CharField(max_length=200, blank=True)
    # Who made it; empty on rows older than the field, whose author is the conversation's user.
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="file_changes",
    )
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.ROJO)
    tool = models.CharField(max_length=64)
    paths = models.JSONField(help_text="The changed paths, relative to the project root.")
    before = models.JSONField(help_text="Per path: whether it existed before the call.")
    after = models.JSONField(
        null=True,
        help_text="Per path: a digest of its state after the call. Empty while a call that "
        "may replace something runs (its record is stored before it, for undo after a crash).",
    )
    created_parents = models.JSONField(
        default=list,
        blank=True,
        help_text="Directories the call created on the way; an undo removes them when empty.",
    )
    diffs = models.JSONField(
        default=list,
        blank=True,
        help_text="Per path: a unified diff of its text, empty when it is not small text.",
    )
    key = models.CharField(max_length=64, unique=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    undone = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )

    class Meta:
        ordering = ["-created"]
        indexes = [
            models.Index(fields=["conversation", "tool_call_id"]),
            models.Index(fields=["project", "-created"]),
            # The records a crash left unfinished, looked for before every change.
            models.Index(
                fields=["project"],
                condition=models.Q(after__isnull=True),
                name="file_change_unfinished",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} {', '.join(self.paths)}"

    @property
    def made_by(self):
        """The user who made the change: its author, or for older rows the conversation's."""
        if self.author_id is not None:
            return self.author
        return self.conversation.user if self.conversation_id else None
