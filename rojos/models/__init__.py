"""Rojos (configured agents) and the conversations people have with them.

A package by subject; migrations and callers import everything from here.
"""

from .approval import PendingApproval
from .conversation import Conversation, ConversationQuerySet, FileChange, Message, TurnRecord
from .mcp import McpAccount, McpServer, McpSignInPending, RojoMcpServer
from .model_option import ModelOption
from .rojo import (
    Rojo,
    default_approval_tools,
    default_instruction_files,
    default_tools,
    validate_base_url,
    validate_instruction_files,
    validate_request_options,
)
from .usage import UsageBudget, UsageRecord

__all__ = [
    "Conversation",
    "ConversationQuerySet",
    "FileChange",
    "McpAccount",
    "McpServer",
    "McpSignInPending",
    "Message",
    "ModelOption",
    "PendingApproval",
    "Rojo",
    "RojoMcpServer",
    "TurnRecord",
    "UsageBudget",
    "UsageRecord",
    "default_approval_tools",
    "default_instruction_files",
    "default_tools",
    "validate_base_url",
    "validate_instruction_files",
    "validate_request_options",
]
