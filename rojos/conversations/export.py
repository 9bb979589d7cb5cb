"""A conversation as a downloadable file: JSON (the stored messages) or a Markdown transcript."""

import json
import re

from rojos.agent.branches import branch_count, branch_messages
from rojos.context.plan import TOOL_NAME as PLAN_TOOL
from rojos.context.plan import plan_latest, plan_lines
from rojos.conversations.replay import conversation_replay
from rojos.models import Conversation, FileChange, Message, TurnRecord
from rojos.tools import ToolError
from rojos.tools.update_plan import plan_checked


def _message_json(message: Message) -> dict:
    data = {
        "id": message.pk,
        "branch": message.branch,
        "position": message.position,
        "role": message.role,
        "content": message.content,
        "created": message.created.isoformat(),
    }
    if message.tool_calls:
        data["tool_calls"] = message.tool_calls
    if message.role == Message.Role.TOOL:
        data.update(tool_call_id=message.tool_call_id, name=message.name, is_error=message.is_error)
    if message.reasoning:
        data["reasoning"] = message.reasoning
    if message.model:
        data["model"] = message.model  # the model that wrote it (rojos.context.model_choice)
    if message.usage:
        data["usage"] = message.usage
    if message.extra:
        data["extra"] = message.extra
    return data


def conversation_export_json(conversation: Conversation) -> dict:
    """The stored OpenAI-format messages of every branch (each with its `branch`; the active
    one's path is `branch_path`) with the conversation's metadata, its forks, turn outcomes
    and the file changes its calls made (and whether each was undone)."""
    rojo = conversation.rojo
    messages = Message.objects.filter(conversation=conversation).order_by("branch", "position")
    turns = TurnRecord.objects.filter(conversation=conversation)
    changes = FileChange.objects.filter(conversation=conversation).order_by("created", "pk")
    path = list(branch_messages(conversation).order_by("position"))
    return {
        "conversation": {
            "id": conversation.pk,
            "title": conversation.title,
            "project": {"id": conversation.project_id, "slug": conversation.project.slug},
            "rojo": {"slug": rojo.slug, "name": rojo.name, "model": rojo.model} if rojo else None,
            "model": conversation.model or (rojo.model if rojo else ""),
            "user": conversation.user.get_username() if conversation.user else None,
            "created": conversation.created.isoformat(),
            "updated": conversation.updated.isoformat(),
            "branch": conversation.branch,
            "branches": conversation.branches,
        },
        "branch_path": [m.pk for m in path],
        # The rojo's last plan on the active branch (update_plan), as the chat shows it.
        "plan": plan_latest(path),
        "messages": [_message_json(m) for m in messages],
        "turns": [
            {
                "user_message": t.user_message_id,
                "status": t.status,
                "error": t.error or None,
                "error_code": t.error_code or None,
                "started": t.started.isoformat(),
                "finished": t.finished.isoformat() if t.finished else None,
            }
            for t in turns
        ],
        "changes": [
            {
                "id": c.pk,
                "tool_call_id": c.tool_call_id,
                "tool": c.tool,
                "paths": c.paths,
                "created": c.created.isoformat(),
                "undone": c.undone.isoformat() if c.undone else None,
            }
            for c in changes
        ],
    }


def conversation_export_markdown(conversation: Conversation) -> str:
    """A readable transcript: the people's and the rojo's words, and the tool activity."""
    rojo = conversation.rojo
    model = f" ({conversation.model or rojo.model})" if rojo else ""
    lines = [
        f"# {conversation.title or f'Conversation {conversation.pk}'}",
        "",
        f"Project **{conversation.project.name}** · rojo **{rojo.name if rojo else 'deleted'}**"
        f"{model} · started {conversation.created:%Y-%m-%d %H:%M} UTC",
    ]
    undone = set(
        FileChange.objects.filter(conversation=conversation, undone__isnull=False).values_list(
            "pk", flat=True
        )
    )
    if conversation.branches:
        lines += [
            "",
            f"_Branch {conversation.branch + 1} of {branch_count(conversation)}, the one shown "
            "in the chat; the others follow._",
        ]
    lines += _turns_markdown(conversation_replay(conversation), undone)
    others = [f for f in conversation.branches or () if f["id"] != conversation.branch]
    if conversation.branch:
        others.insert(0, {"id": 0, "at": 0})
    for fork in others:
        turns = conversation_replay(conversation, branch=fork["id"])
        lines += ["", "---", "", f"# Branch {fork['id'] + 1} of {branch_count(conversation)}"]
        if fork["at"]:
            lines += ["", f"_The conversation up to its message {fork['at'] + 1}, then:_"]
        lines += _turns_markdown([t for t in turns if t.user.position >= fork["at"]], undone)
    return "\n".join(lines) + "\n"


def _turns_markdown(turns: list, undone: set[int]) -> list[str]:
    """The transcript lines of some turns."""
    lines: list[str] = []
    for turn in turns:
        text = turn.user.content or ""
        lines += ["", "## You", "", _fences_closed(text)]
        # Images and PDFs by reference: the bytes stay with the project (docs/guide.md); a
        # PDF's text as the model read it is in the JSON export.
        extra = turn.user.extra or {}
        attached = [
            f"- 🖼 {i['type']}, {i['size']:,} bytes, sha256 `{i['sha256']}`"
            for i in extra.get("images", [])
        ] + [f"- 📄 {_pdf_line(pdf)}" for pdf in extra.get("pdfs", [])]
        if attached:
            lines += ["", *attached]
        speaking = False
        asked, plan = {}, None  # the turn's plans asked for, and its last that worked
        call_line = 0  # the line of the last call, which its result ends
        for event in turn.events:
            data = event.data
            if event.type in ("TOOL_CALL", "TOOL_RESULT") and data["name"] == PLAN_TOOL:
                if event.type == "TOOL_CALL":
                    asked[data["id"]] = data["args"]
                elif data["ok"]:
                    plan = _plan_of(asked.get(data["id"])) or plan
                continue  # shown once, as the checklist after the turn's activity
            if event.type == "CHAT":
                if not speaking:
                    lines += ["", "## Rojo", ""]
                    speaking = True
                lines.append(_fences_closed(data["text"]))
            elif event.type == "REASONING":
                lines += ["", f"<details><summary>{_thought(data)}</summary>", ""]
                lines += [_fences_closed(data["text"]), "", "</details>"]
                speaking = False
            elif event.type == "TOOL_CALL":
                args = json.dumps(data["args"], ensure_ascii=False)
                lines += ["", f"- ⚙ `{data['name']}` {_inline_code(args)}"]
                call_line = len(lines) - 1
                speaking = False
            elif event.type == "TOOL_RESULT":
                result = data["result"]
                error = result.get("error") if isinstance(result, dict) else result
                lines[call_line] += " → ok" if data["ok"] else f" → error: {error}"
                if data.get("change") in undone:
                    lines[call_line] += " (undone)"
            elif event.type in ("QUESTION", "ANSWERED"):
                lines += _question_lines(event.type, data)
            elif event.type == "SUMMARY":
                lines += ["", "<details><summary>Earlier conversation summarised</summary>", ""]
                lines += [_fences_closed(data["text"]), "", "</details>"]
                speaking = False
            elif event.type == "NOTICE":
                lines += ["", f"> **Note:** {data['message']}"]
                speaking = False
            elif event.type == "ERROR":
                lines += ["", f"> **Error:** {data['message']}"]
                speaking = False
        if plan:
            lines += ["", "**Plan**", "", *plan_lines(plan)]
    return lines


def _pdf_line(pdf: dict) -> str:
    pages = f"{pdf['pages']} page{'' if pdf['pages'] == 1 else 's'}"
    size = f"{pdf['size']:,} bytes"
    return f"{_inline_code(pdf['name'])}, PDF, {pages}, {size}, sha256 `{pdf['sha256']}`"


def _question_lines(kind: str, data: dict) -> list[str]:
    """A server's question during a call, and its answer, as sub-items of the call."""
    if kind == "QUESTION":
        what = data.get("url") if data.get("mode") == "url" else data.get("message")
        return [f"  - {data['server']} asked: {_inline_code(' '.join((what or '').split()))}"]
    if data.get("timed_out"):
        return ["  - no answer in time (cancel)"]
    values = data.get("content")
    shown = f" {_inline_code(json.dumps(values, ensure_ascii=False))}" if values else ""
    return [f"  - answered: {data['action']}{shown}"]


def _thought(data: dict) -> str:
    seconds = data.get("seconds")
    return "Thinking" if seconds is None else f"Thought for {max(1, round(seconds))} s"


def _plan_of(args) -> list[dict] | None:
    try:
        return plan_checked(args)
    except ToolError:
        return None


def _inline_code(text: str, limit: int = 200) -> str:
    """A code span that holds any text: its backticks outnumber every run inside it."""
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    if "`" not in text:
        return f"`{text}`"
    ticks = "`" * (max(len(run) for run in re.findall(r"`+", text)) + 1)
    return f"{ticks} {text} {ticks}"


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _fences_closed(text: str) -> str:
    """The text, with a code block it leaves open (a reply stopped mid-block) closed, so
    that the headings after it are not read as code."""
    open_fence = None
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if not match:
            continue
        fence = match.group(1)
        if open_fence is None:
            open_fence = fence
        elif fence[0] == open_fence[0] and len(fence) >= len(open_fence) and not line.strip("`~ "):
            open_fence = None
    return text if open_fence is None else f"{text}\n{open_fence}"
