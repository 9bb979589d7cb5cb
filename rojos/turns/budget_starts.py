"""A project's budgets, counted again as each turn starts, under a lock on the project.

The chat's first check (rojos.context.budgets.budget_check) reads only recorded usage, and a reply
records its usage when its step ends: twelve chats sent at once to a project all read the
same, unspent budget and all started (30 tokens of budget, 135 used). Here, in the
transaction that stores the turn (rojos.turns.begin), every start of the same project takes
the project's lock in turn, and counts, besides the recorded usage, each reply of the
project still running that has recorded none yet: it reserves what its rojo may write in
one step (rojos.context.window.output_reserve). A reply that has recorded a step reserves
nothing more, so replies in flight can still pass the budget by their own usage beyond what
they reserved (their later steps); cost budgets reserve nothing (a price is known only once
the tokens are).
"""

from django.db import connection
from django.db.models import Exists, OuterRef

from roject.models import Project
from rojos.context.budgets import (
    Budget,
    BudgetExceeded,
    Left,
    budget_message,
    budgets_for,
    budgets_left,
)
from rojos.context.window import output_reserve, window_of
from rojos.models import Conversation, TurnRecord, UsageRecord

__all__ = ["project_budget_start_check"]


def _project_lock(project_id: int) -> None:
    """Hold the project's start lock until the transaction ends, across server processes.

    PostgreSQL: the project's row, FOR NO KEY UPDATE (as rojos.turns.limits locks the user's);
    SQLite's transactions begin IMMEDIATE, holding the database's write lock already.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("project budgets are counted in the transaction that starts the turn")
    if connection.features.has_select_for_update:
        locked = Project.objects.select_for_update(
            no_key=connection.features.has_select_for_no_key_update
        )
        list(locked.filter(pk=project_id).values_list("pk"))


def _reserved(project_id: int) -> int:
    """(Blocking) The tokens the project's running replies that recorded no usage yet may
    still write in their current step."""
    counted = UsageRecord.objects.filter(
        conversation=OuterRef("conversation"), created__gte=OuterRef("started")
    )
    running = (
        TurnRecord.objects.filter(
            status=TurnRecord.Status.RUNNING,
            conversation__project_id=project_id,
            conversation__in=Conversation.objects.running(),
        )
        .exclude(Exists(counted))
        .select_related("rojo")
    )
    return sum(output_reserve(turn.rojo, window_of(turn.rojo)) for turn in running if turn.rojo)


def _reserved_refusal(left: Left) -> str:
    """The sentence when the recorded usage leaves some, and the running replies' reserve
    takes it."""
    budget = left.budget
    period = "daily" if budget.period == "day" else "monthly"
    name = Project.objects.filter(pk=budget.owner).values_list("name", flat=True).first()
    return (
        f"The replies running in the project {name!r} now may use the rest of its {period} "
        f"budget of {budget.tokens:,} tokens; send again once they have finished."
    )


def project_budget_start_check(*, project_id: int, in_force: list[Budget] | None = None) -> None:
    """(Blocking, in the transaction that stores the turn) Raise BudgetExceeded when a
    budget of the project is used up, counting what its running replies reserve; nothing
    is locked for a project without a budget. `in_force`: the budgets as the chat's first
    check read them (else they are read here)."""
    if in_force is None:
        in_force = budgets_for(user=None, project_id=project_id)
    budgets = [budget for budget in in_force if budget.scope == "project"]
    if not budgets:
        return
    _project_lock(project_id)
    reserved = None
    for left in budgets_left(user=None, project_id=project_id, budgets=budgets):
        if left.used_up():
            raise BudgetExceeded(budget_message(left))
        if left.tokens is not None:
            if reserved is None:
                reserved = _reserved(project_id)
            left.tokens -= reserved
            if left.used_up():
                raise BudgetExceeded(_reserved_refusal(left))
