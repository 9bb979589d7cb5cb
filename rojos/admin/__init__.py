"""rojos' admin, one module per part; importing them registers their ModelAdmins."""

from .model_options import ModelOptionAdmin
from .records import ConversationAdmin, FileChangeAdmin, ReadOnly
from .rojo import RojoAdmin
from .rojo_form import RojoForm
from .usage import UsageBudgetAdmin, UsageRecordAdmin

__all__ = [
    "ConversationAdmin",
    "FileChangeAdmin",
    "ModelOptionAdmin",
    "ReadOnly",
    "RojoAdmin",
    "RojoForm",
    "UsageBudgetAdmin",
    "UsageRecordAdmin",
]
