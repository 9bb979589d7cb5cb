"""rojos' admin, one module per part; importing them registers their ModelAdmins."""

from .records import ConversationAdmin, FileChangeAdmin, ReadOnly
from .rojo import RojoAdmin, RojoForm
from .usage import UsageBudgetAdmin, UsageRecordAdmin

__all__ = [
    "ConversationAdmin",
    "FileChangeAdmin",
    "ReadOnly",
    "RojoAdmin",
    "RojoForm",
    "UsageBudgetAdmin",
    "UsageRecordAdmin",
]
