"""A project's standing instructions (`AGENTS.md` and the like), read for each request.

The rojo names the files (`Rojo.instruction_files`). Those in the project's root go with
every request, after the rojo's system prompt; a folder's join once the rojo has read or
written in it (a call of the conversation that worked, with a path in that folder), and
the result of that first call names them. They are read again for each request, so an edit
applies from the next one. Every read goes through the storage gate: a missing file is
nothing, one over the bound is cut with a note, a binary or undecodable one is left out with
a note, so that a broken file never stops a turn.
"""

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from roject import storage
from roject.storage import StorageError
from rojos.models import Message
from rojos.tools import ToolOutcome

# Each file is cut at this size; what all of them send together stops at the total.
MAX_FILE_BYTES = 16_000
MAX_TOTAL_CHARS = 48_000
# Arguments of the built-in tools that name a path in the project.
_PATH_ARGUMENTS = ("path", "source", "destination")


@dataclass(frozen=True, slots=True, kw_only=True)
class InstructionFile:
    """One instruction file found: its path in the root, its text as sent, and any note."""

    path: str
    text: str
    note: str = ""


def _read_one(project_root: Path, path: str) -> InstructionFile | None:
    try:
        found = storage.text_start(project_root, path, max_bytes=MAX_FILE_BYTES)
    except (StorageError, OSError) as exc:
        if isinstance(exc.__cause__, FileNotFoundError):  # no root yet: nothing there
            return None
        return InstructionFile(path=path, text="", note=f"left out: {exc}")
    if found is None:
        return None
    text, size = found
    note = ""
    if size > MAX_FILE_BYTES:
        note = f"cut: the first {MAX_FILE_BYTES:,} of {size:,} bytes; read the rest with tools"
    return InstructionFile(path=path, text=text, note=note)


def instruction_files_read(
    *, project_root: Path, names: list[str], folders: list[str]
) -> list[InstructionFile]:
    """(Blocking) The instruction files of `folders` ("" is the root), in that order."""
    found = []
    for folder in folders:
        for name in names or ():
            path = str(PurePosixPath(folder) / name) if folder else name
            item = _read_one(project_root, path)
            if item is not None:
                found.append(item)
    return found


def instructions_text(files: list[InstructionFile]) -> str:
    """The block sent after the system prompt: each file's text under its path, within
    the total bound (the files past it are named and left out)."""
    parts, used = [], 0
    for item in files:
        text = item.text.strip()
        note = f"\n[{item.note}]" if item.note else ""
        if text and used + len(text) > MAX_TOTAL_CHARS:
            total = f"{MAX_TOTAL_CHARS:,}"
            text, note = (
                "",
                f"[left out: the instruction files together are over {total} characters]",
            )
        used += len(text)
        parts.append(f"Instructions from {item.path} (the project's file):\n{text}{note}".rstrip())
    if not parts:
        return ""
    return (
        "The project's instruction files follow; people edit them, and these are their "
        "current texts. Follow them.\n\n" + "\n\n".join(parts)
    )


def folders_of(args: dict | None) -> list[str]:
    """The folders a call's path arguments are in, outermost first: each path's parents
    and the path itself (it may be a folder; a file's own name finds no instructions)."""
    folders: list[str] = []
    for key in _PATH_ARGUMENTS:
        value = (args or {}).get(key)
        if not isinstance(value, str):
            continue
        parts = PurePosixPath(value.strip("/")).parts
        for end in range(1, len(parts) + 1):
            folder = str(PurePosixPath(*parts[:end]))
            if folder not in (".", "") and ".." not in parts[:end] and folder not in folders:
                folders.append(folder)
    return folders


def folders_entered(messages: list[Message]) -> list[str]:
    """The folders the conversation's calls that worked read or wrote in, first first.

    A call of an MCP server's tool works elsewhere, so it enters no folder here.
    """
    worked = {
        m.tool_call_id
        for m in messages
        if m.role == Message.Role.TOOL and not m.is_error and not (m.extra or {}).get("mcp_server")
    }
    folders: list[str] = []
    for message in messages:
        for call in message.tool_calls or ():
            if call.get("id") not in worked:
                continue
            try:
                args = json.loads((call.get("function") or {}).get("arguments") or "{}")
            except ValueError:
                continue
            for folder in folders_of(args if isinstance(args, dict) else None):
                if folder not in folders:
                    folders.append(folder)
    return folders


def joined_result(value, paths: list[str]):
    """A call's result naming the instruction files that joined with it: a key of an
    object, a last line of a text (a file's content stays as it was above it)."""
    note = (
        f"The project's instructions in {', '.join(paths)} apply from now on (they are in "
        "the system message)."
    )
    if isinstance(value, dict):
        return {**value, "instructions": note}
    if isinstance(value, str):  # one blank line between the text and the note
        end = "\n" if value.endswith("\n") else "\n\n"
        return f"{value}{end}[{note}]"
    return {"result": value, "instructions": note}


async def instructions_joined(
    outcome: ToolOutcome,
    *,
    args: dict | None,
    messages: list[Message],
    names: tuple[str, ...],
    project_root: Path,
) -> ToolOutcome:
    """A successful call's outcome, naming the folders' instruction files (`names`) that join
    with it: the first of the conversation (`messages`) to work in a folder that has one
    (its next request sends them)."""
    if not (outcome.ok and names):
        return outcome
    entered = folders_entered(messages)
    new = [folder for folder in folders_of(args) if folder not in entered]
    if not new:
        return outcome
    files = await asyncio.to_thread(
        instruction_files_read, project_root=project_root, names=list(names), folders=new
    )
    if not files:
        return outcome
    return ToolOutcome.success(joined_result(outcome.value, [f.path for f in files]))
