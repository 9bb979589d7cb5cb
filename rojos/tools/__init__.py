"""Tools the rojos call, one module each, and the registry that holds the built-ins."""

from .arguments import ToolCall, display_args, parse_arguments
from .base import RojoTool, RojoToolContext
from .create_directory import CreateDirectory
from .delete_path import DeletePath
from .edit_text_content import EditTextContent
from .function_tool import FunctionTool, rojo_tool
from .get_text_content import GetTextContent
from .list_files import ListFiles
from .move_path import MovePath
from .outcome import ToolError, ToolOutcome, echoed
from .read_path_meta import ReadPathMeta
from .read_result import ReadResult
from .registry import RojoToolRegistry
from .search_text import SearchText
from .update_plan import UpdatePlan
from .write_text_content import WriteTextContent

BUILTIN_TOOLS: tuple[type[RojoTool], ...] = (
    ReadPathMeta,
    GetTextContent,
    WriteTextContent,
    ListFiles,
    CreateDirectory,
    EditTextContent,
    MovePath,
    DeletePath,
    SearchText,
    ReadResult,
    UpdatePlan,
)

registry = RojoToolRegistry([cls() for cls in BUILTIN_TOOLS])

__all__ = [
    "BUILTIN_TOOLS",
    "FunctionTool",
    "RojoTool",
    "RojoToolContext",
    "RojoToolRegistry",
    "ToolCall",
    "ToolError",
    "ToolOutcome",
    "display_args",
    "echoed",
    "parse_arguments",
    "registry",
    "rojo_tool",
]
