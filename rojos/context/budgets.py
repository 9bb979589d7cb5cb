"""Daily and monthly budgets of tokens or cost, per user and per project.

Defaults come from the settings (0: none); a `UsageBudget` row in the admin replaces them
for one user or project and period. A message is refused before any model call while a
budget is used up (429, with which budget and when it resets); a turn that crosses one
finishes its step, and the next model call is refused with the same sentence. Tokens are
prompt and completion tokens, as the `UsageRecord` rows count them.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Q, Sum
from django.utils import timezone

from roject.models import Project
from roject.server.prepared_queries import PreparedQuery
from rojos.errors import TurnError
from rojos.models import UsageBudget, UsageRecord


class BudgetExceeded(TurnError):
    """A user's or project's budget is used up until it resets."""

    code = "budget"


@dataclass(frozen=True, slots=True)
class Budget:
    """One budget in force: whose, for which period, and its limits."""

    scope: str  # "user" or "project"
    owner: str  # the user's name, or the project's id (its name is looked up when said)
    period: str  # "day" or "month"
    tokens: int | None
    cost: Decimal | None


@dataclass(slots=True)
class Left:
    """What is left of one budget."""

    budget: Budget
    tokens: int | None
    cost: Decimal | None

    def used_up(self) -> bool:
        return (self.tokens is not None and self.tokens <= 0) or (
            self.cost is not None and self.cost <= 0
        )

    def spend(self, tokens: int, cost: Decimal | None) -> None:
        if self.tokens is not None:
            self.tokens -= tokens
        if self.cost is not None and cost is not None:
            self.cost -= cost


def _defaults(scope: str, period: str) -> tuple[int | None, Decimal | None]:
    name = f"ROJO_{scope.upper()}_{'DAILY' if period == 'day' else 'MONTHLY'}"
    tokens = getattr(settings, f"{name}_TOKENS", 0)
    cost = getattr(settings, f"{name}_COST", 0)
    return tokens or None, Decimal(str(cost)) if cost else None


# A chat message's: its user's and its project's (roject/server/prepared_queries.py).
_BOTH = PreparedQuery(
    lambda user_id, project_id: UsageBudget.objects.filter(
        Q(project_id=project_id) | Q(user_id=user_id)
    ),
    int,
    int,
)


def budgets_for(*, user, project_id: int | None) -> list[Budget]:
    """(Blocking) The budgets in force for the user and project: one query."""
    user_id = getattr(user, "pk", None)
    if user_id and project_id:
        stored = _BOTH.all(user_id, int(project_id))
    else:
        condition = Q(project_id=project_id) if project_id else Q(pk__in=[])
        if user_id:
            condition |= Q(user_id=user_id)
        stored = UsageBudget.objects.filter(condition)
    rows = {("user" if row.user_id else "project", row.period): row for row in stored}
    found = []
    for scope, owner in (("user", user_id), ("project", project_id)):
        if not owner:
            continue
        for period in (UsageBudget.Period.DAY, UsageBudget.Period.MONTH):
            row = rows.get((scope, period))
            tokens, cost = (row.max_tokens, row.max_cost) if row else _defaults(scope, period)
            if tokens or cost:
                name = user.get_username() if scope == "user" else str(project_id)
                found.append(Budget(scope, name, period, tokens, cost))
    return found


def _period_start(period: str, now: datetime) -> datetime:
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return day if period == "day" else day.replace(day=1)


def _reset(period: str, now: datetime) -> datetime:
    start = _period_start(period, now)
    if period == "day":
        return start + timedelta(days=1)
    return (start + timedelta(days=32)).replace(day=1)


def budgets_left(
    *, user, project_id: int | None, budgets: list[Budget] | None = None
) -> list[Left]:
    """(Blocking) What is left of each budget in force (`budgets`, when read already): at
    most one query per scope more."""
    if budgets is None:
        budgets = budgets_for(user=user, project_id=project_id)
    now = timezone.now()
    month, day = _period_start("month", now), _period_start("day", now)
    used: dict[str, dict] = {}
    for scope in {b.scope for b in budgets}:
        owner = {"user_id": user.pk} if scope == "user" else {"project_id": project_id}
        today = Q(created__gte=day)
        used[scope] = UsageRecord.objects.filter(created__gte=month, **owner).aggregate(
            month_prompt=Sum("prompt_tokens"),
            month_completion=Sum("completion_tokens"),
            month_cost=Sum("cost"),
            day_prompt=Sum("prompt_tokens", filter=today),
            day_completion=Sum("completion_tokens", filter=today),
            day_cost=Sum("cost", filter=today),
        )
    left = []
    for budget in budgets:
        counts = used[budget.scope]
        tokens = (counts[f"{budget.period}_prompt"] or 0) + (
            counts[f"{budget.period}_completion"] or 0
        )
        cost = counts[f"{budget.period}_cost"] or Decimal(0)
        left.append(
            Left(
                budget,
                None if budget.tokens is None else budget.tokens - tokens,
                None if budget.cost is None else budget.cost - cost,
            )
        )
    return left


def budget_message(left: Left, *, crossed: bool = False) -> str:
    """Which budget is used up and when it resets, in one sentence."""
    budget = left.budget
    now = timezone.now()
    reset = _reset(budget.period, now)
    when = "today" if budget.period == "day" else "this month"
    limit = (
        f"{budget.tokens:,} tokens"
        if left.tokens is not None and left.tokens <= 0
        else f"${budget.cost:.2f}"
    )
    if budget.scope == "user":
        whose = "your"
    else:
        name = Project.objects.filter(pk=budget.owner).values_list("name", flat=True).first()
        whose = f"the project {name!r}'s"
    hours, rest = divmod(int((reset - now).total_seconds()), 3600)
    resets = (
        f"at midnight UTC, in {hours} h {rest // 60} min"
        if budget.period == "day"
        else f"on {reset:%B} 1 at 00:00 UTC"
    )
    period = "daily" if budget.period == "day" else "monthly"
    head = "This reply stopped: it used up" if crossed else "You have used up"
    return f"{head} {whose} {period} budget of {limit} ({when}); it resets {resets}."


def budget_check(*, user, project_id: int) -> list[Left]:
    """(Blocking) Raise BudgetExceeded when a budget of the user or project is used up;
    else what is left of each (a turn started now counts its steps against them)."""
    lefts = budgets_left(user=user, project_id=project_id)
    for left in lefts:
        if left.used_up():
            raise BudgetExceeded(budget_message(left))
    return lefts
