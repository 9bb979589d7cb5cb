import asyncio

from roject import storage

from .base import RojoTool, RojoToolContext, path_parameter
from .diff import unified_diff
from .outcome import ToolError


def _occurrences(text: str, old: str) -> int:
    """How often `old` occurs, overlaps included: "aa" is in "aaa" twice, so it is ambiguous."""
    count, start = 0, text.find(old)
    while start != -1:
        count += 1
        start = text.find(old, start + 1)
    return count


def apply_edits(text: str, edits: list[dict]) -> str:
    """Apply exact-match replacements in order; each old_text must occur exactly once."""
    for number, edit in enumerate(edits, start=1):
        old, new = edit["old_text"], edit["new_text"]
        if not old:
            raise ToolError(f"edit {number}: old_text must not be empty")
        count = _occurrences(text, old)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise ToolError(
                f"edit {number}: old_text {where} in the file; it must match exactly once "
                "(include more surrounding text to make it unique). Nothing was written."
            )
        text = text.replace(old, new, 1)
    return text


class EditTextContent(RojoTool):
    """Change parts of a text file by exact replacement."""

    name = "edit_text_content"
    description = (
        "Edit a UTF-8 text file in place with exact-match replacements, applied in order. "
        "Each old_text must occur exactly once in the file (as it is after the previous edits), "
        "otherwise nothing is written. Much cheaper than rewriting a whole file. Returns "
        '{"ok": true, "diff": <unified diff>}.'
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": path_parameter("Path of the file, relative to the project root."),
            "edits": {
                "type": "array",
                "description": "Replacements, applied in order.",
                "items": {
                    "type": "object",
                    "properties": {
                        "old_text": {"type": "string", "description": "Exact text to replace."},
                        "new_text": {"type": "string", "description": "Its replacement."},
                    },
                    "required": ["old_text", "new_text"],
                },
            },
        },
        "required": ["path", "edits"],
    }
    writes = True
    follows_links = True

    def changed_paths(self, args: dict) -> list[str]:
        return [args["path"]]

    def preview(self, args: dict, ctx: RojoToolContext) -> dict:
        before = storage.read_project_file(ctx.project_root, args["path"])
        return {"diff": unified_diff(args["path"], before, apply_edits(before, args["edits"]))}

    async def execute(self, args: dict, ctx: RojoToolContext) -> dict:
        return await asyncio.to_thread(self._edit, ctx, args["path"], args["edits"])

    @staticmethod
    def _edit(ctx: RojoToolContext, path: str, edits: list[dict]) -> dict:
        before = storage.read_project_file(ctx.project_root, path)
        after = apply_edits(before, edits)
        storage.write_project_file(ctx.project_root, path, after)
        return {"ok": True, "diff": unified_diff(path, before, after)}
