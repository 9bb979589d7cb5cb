"""A project's and a user's budgets, counted again as each turn starts, under a lock on each.

The chat's first check (rojos.context.budgets.budget_check) reads only recorded usage, and a reply
records its usage when its step ends: twelve chats sent at once to a project all read the
same, unspent budget and all started (30 tokens of budget, 135 used); twelve of one user's,
against the user's budget, as many as the user's replies at once allowed (3, or all 12 with
no such limit: 180 tokens of 30). Here, in the transaction that stores the turn
(rojos.turns.begin), every start of the same project takes the project's lock in turn (and
of the same user, the user's: rojos.turns.limits takes it first), and counts, besides the
recorded usage, each running reply of the project (of the user) that has recorded none yet:
it reserves what its rojo may write in one step (rojos.context.window.output_reserve). A
reply that has recorded a step reserves nothing more, so replies in flight can still pass
the budget by their own usage beyond what they reserved (their current step: each step
after the first reads the recorded usage again, rojos.agent.requests); cost budgets
reserve nothing (a price is known only once the tokens are).
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
from rojos.context.model_choice import ModelInUse
from rojos.context.window import output_reserve, window_of
from rojos.models import Conversation, TurnRecord, UsageRecord
from rojos.turns.limits import user_start_lock

__all__ = ["budget_start_check", "unpriced_model_check"]


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


def _reserved(owner: dict) -> int:
    """(Blocking) The tokens the running replies of `owner` (the project's, or the user's)
    that recorded no usage yet may still write in their current step."""
    counted = UsageRecord.objects.filter(
        conversation=OuterRef("conversation"), created__gte=OuterRef("started")
    )
    running = (
        TurnRecord.objects.filter(
            status=TurnRecord.Status.RUNNING,
            conversation__in=Conversation.objects.running(),
            **owner,
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
    if budget.scope == "user":
        return (
            f"The replies you have running now may use the rest of your {period} budget of "
            f"{budget.tokens:,} tokens; send again once they have finished."
        )
    name = Project.objects.filter(pk=budget.owner).values_list("name", flat=True).first()
    return (
        f"The replies running in the project {name!r} now may use the rest of its {period} "
        f"budget of {budget.tokens:,} tokens; send again once they have finished."
    )


def budget_start_check(
    *, user, project_id: int, in_force: list[Budget] | None = None
) -> list[Budget]:
    """(Blocking, in the transaction that stores the turn) Raise BudgetExceeded when a
    budget of the project or of `user` (None: a start with no user) is used up, counting
    what their running replies reserve; nothing is locked for a project or a user without
    a budget. `in_force`: the budgets as the chat's first check read them (else they are
    read here). Returns the budgets that bind this start."""
    if in_force is None:
        in_force = budgets_for(user=user, project_id=project_id)
    user_id = getattr(user, "pk", None)
    budgets = [b for b in in_force if b.scope == "project" or (b.scope == "user" and user_id)]
    if not budgets:
        return budgets
    scopes = {budget.scope for budget in budgets}
    if "user" in scopes:
        user_start_lock(user)  # before the project's, as every start takes them
    if "project" in scopes:
        _project_lock(project_id)
    reserved: dict[str, int] = {}
    for left in budgets_left(user=user, project_id=project_id, budgets=budgets):
        if left.used_up():
            raise BudgetExceeded(budget_message(left))
        if left.tokens is not None:
            scope = left.budget.scope
            if scope not in reserved:
                owner = {"user_id": user_id} if scope == "user" else {}
                reserved[scope] = _reserved(owner or {"conversation__project_id": project_id})
            left.tokens -= reserved[scope]
            if left.used_up():
                raise BudgetExceeded(_reserved_refusal(left))
    return budgets


def unpriced_model_check(*, model: ModelInUse, budgets: list[Budget]) -> None:
    """Raise BudgetExceeded for a model picked from the provider's list that has no price,
    under a cost budget: its use would cost nothing against that budget, so any such model
    would pass it. The rojo's default and the models an administrator offers are theirs to
    price (an empty price there is a free model, a local one)."""
    if model.unpriced_pick and any(budget.cost is not None for budget in budgets):
        raise BudgetExceeded(
            f"The model {model.name!r} has no price, so a cost budget cannot count what it "
            "uses: pick another model, or ask an administrator to set its price (the rojo's "
            "Model options)."
        )
