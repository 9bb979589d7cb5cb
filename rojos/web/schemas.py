"""What the JSON API reads and answers, apart from errors (roject/api_answers.py has those).

The classes' names are the schema names in the OpenAPI document, so renaming one changes it.
"""

from datetime import datetime

from ninja import Field, Schema

from rojos.context.window import window_of
from rojos.conversations.listing import cursor_of


class ProjectOut(Schema):
    id: int
    name: str
    slug: str
    role: str


class RojoMcpServerOut(Schema):
    slug: str = Field(description="The server; its tools are named <slug>__<tool>.")
    name: str
    transport: str
    tools: list[str] | None = Field(description="The tools the rojo uses; null: all of them.")
    ask_before: bool = Field(description="Tools not marked read-only wait for approval.")
    sign_in: str = Field(
        description='"person": its tools act as each member\'s own account (connected at '
        '/connections/); "shared": as one shared account an admin signed in; "": fixed headers.'
    )

    @staticmethod
    def resolve_slug(link) -> str:
        return link.server.slug

    @staticmethod
    def resolve_sign_in(link) -> str:
        return link.server.sign_in

    @staticmethod
    def resolve_name(link) -> str:
        return link.server.name

    @staticmethod
    def resolve_transport(link) -> str:
        return link.server.transport


class RojoOut(Schema):
    id: int
    name: str
    slug: str
    model: str
    base_url: str
    tools: list[str]
    context_window: int | None = Field(description="Declared in the admin; null: learned.")
    max_output_tokens: int | None
    window: int = Field(description="The window in use, in tokens (declared, listed, stated).")
    mcp_servers: list[RojoMcpServerOut] = Field(description="MCP servers it takes tools from.")

    @staticmethod
    def resolve_mcp_servers(rojo) -> list:
        return list(rojo.mcp_links.all())

    @staticmethod
    def resolve_window(rojo) -> int:
        return window_of(rojo)


class ConversationOut(Schema):
    id: int
    title: str
    rojo_id: int | None
    user_id: int | None
    created: datetime
    updated: datetime
    running: bool
    waiting_approval: bool = Field(
        description="A running reply waits for someone to approve or deny a call."
    )
    allowed_tools: list[str] = Field(
        description="Tools allowed for the rest of this conversation: they no longer ask."
    )
    pinned: bool
    model: str = Field(description="The model its turns ask; empty: the rojo's default.")


class ConversationItem(ConversationOut):
    author: str = Field(description="Who started it; empty for a deleted user.")
    status: str = Field(description="running, waiting (for approval), failed, or empty.")
    cursor: str = Field(description="Pass as `before` for the page after this one.")

    @staticmethod
    def resolve_author(conversation) -> str:
        return conversation.user.get_username() if conversation.user else ""

    @staticmethod
    def resolve_cursor(conversation) -> str:
        return cursor_of(conversation)


class ConversationStatusOut(Schema):
    statuses: dict[str, str] = Field(description="By conversation id: its badge, or empty.")


class ConversationChangeIn(Schema):
    title: str | None = Field(None, min_length=1, max_length=200)
    pinned: bool | None = Field(None, description="Pinned ones head the project's list.")


class DeletedOut(Schema):
    deleted: int


class BranchIn(Schema):
    message: int = Field(description="A message of the branch to show: its newest is shown.")


class BranchOut(Schema):
    branch: int


class SearchHitOut(Schema):
    conversation: int
    title: str
    project: int
    project_name: str
    message: int | None = Field(description="The matching message; null when the title did.")
    snippet: str


class MessageOut(Schema):
    id: int
    position: int
    role: str
    content: str | None
    tool_calls: list[dict] | None
    tool_call_id: str
    name: str
    is_error: bool
    reasoning: str
    model: str = Field(description="The model that wrote an assistant message; else empty.")
    created: datetime
    attachments: list[dict] = Field(
        default_factory=list, description="A user message's attached files: {path, size}."
    )

    @staticmethod
    def resolve_attachments(message) -> list[dict]:
        return [
            {"path": a["path"], "size": a["size"]}
            for a in (message.extra or {}).get("attachments", [])
        ]

    images: list[dict] = Field(
        default_factory=list,
        description="A user message's images: {sha256, type, size}, and `path` for a project "
        "file it mentioned; GET /api/projects/{id}/images/{sha256} serves one.",
    )

    @staticmethod
    def resolve_images(message) -> list[dict]:
        return list((message.extra or {}).get("images", []))

    pdfs: list[dict] = Field(
        default_factory=list,
        description="A user message's uploaded PDFs: {sha256, type, name, size, pages}; "
        "GET /api/projects/{id}/pdfs/{sha256}?name= downloads one.",
    )

    @staticmethod
    def resolve_pdfs(message) -> list[dict]:
        pdfs = (message.extra or {}).get("pdfs", [])
        return [{k: v for k, v in pdf.items() if k != "text"} for pdf in pdfs]


class ChangeOut(Schema):
    id: int
    tool_call_id: str
    message_id: int | None
    tool: str
    paths: list[str]
    created: datetime
    undone: datetime | None


class TurnOut(Schema):
    user_message_id: int
    status: str
    error: str
    error_code: str


class TokensOut(Schema):
    prompt: int
    completion: int
    cached: int
    reasoning: int
    cost: str | None = Field(description="US dollars; null when the rojo has no prices.")
    estimated: bool = Field(description="Some counts are the app's estimate, not reported.")
    calls: int = Field(description="Model calls, summaries included.")


class ContextOut(Schema):
    window: int = Field(description="The context window of the conversation's model, in tokens.")
    used: int = Field(description="Estimated tokens of the next request, compacted.")
    model: str = Field("", description="The model whose window this is.")


class ConversationUsageOut(Schema):
    turns: dict[str, TokensOut] = Field(description="By the id of the turn's user message.")
    total: TokensOut
    context: ContextOut
    instructions: list[str] = Field(
        default_factory=list,
        description="The project's instruction files the next request sends (paths in the "
        "root): the root's, and those of the folders the conversation entered.",
    )


class ConversationDetail(ConversationOut):
    project_id: int
    messages: list[MessageOut]
    changes: list[ChangeOut]
    turns: list[TurnOut]
    events: list[dict] = Field(description="Each stored turn's events, as the chat streams them.")
    usage: ConversationUsageOut
    branch: int = Field(description="The active branch, which the messages and events follow.")
    choices: dict[str, list[int]] = Field(
        description="By message id: the ids of its alternatives (edits, regenerations), "
        "oldest first, itself included; only messages that have some."
    )


class ApprovalIn(Schema):
    call: str = Field(description="The id of the tool call waiting for approval.")
    approve: bool
    allow_for_conversation: bool = Field(
        default=False,
        description="With approve: calls of the same tool run without asking for the rest "
        "of this conversation.",
    )


class UndoTurnIn(Schema):
    message: int = Field(description="The id of the user message that started the turn.")


class ApprovalOut(Schema):
    delivered: bool


class ChangeDiffOut(Schema):
    diff: str = Field(description="What the change did to the file, as a unified diff.")


class UndoneOut(Schema):
    undone: list[int] = Field(description="The ids of the changes undone, newest first.")


class StopOut(Schema):
    stopping: bool = Field(description="False when no reply was running.")
