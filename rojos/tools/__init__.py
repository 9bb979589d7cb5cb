"""Tools the rojos call, one module each, and the registry that holds the built-ins."""

from .base import RojoTool, RojoToolContext
from .create_directory import CreateDirectory
from .get_text_content import GetTextContent
from .list_files import ListFiles
from .read_path_meta import ReadPathMeta
from .registry import RojoToolRegistry, is_error, parse_arguments, tool_error
from .write_text_content import WriteTextContent

BUILTIN_TOOLS: tuple[type[RojoTool], ...] = (
    ReadPathMeta,
    GetTextContent,
    WriteTextContent,
    ListFiles,
    CreateDirectory,
)

registry = RojoToolRegistry([cls() for cls in BUILTIN_TOOLS])

__all__ = [
    "BUILTIN_TOOLS",
    "RojoTool",
    "RojoToolContext",
    "RojoToolRegistry",
    "is_error",
    "parse_arguments",
    "registry",
    "tool_error",
]
