"""Branches of a conversation: editing a message, or regenerating a reply, forks it there.

Every message belongs to one branch (`Message.branch`); branch 0 starts at the first
message. A fork is an entry of `Conversation.branches`:

- `id`: the new branch's number; `parent`: the branch that held the message it replaces;
- `at`: the position of that message; the new branch shares its parent's path before it;
- `after`: the id of the message before it (None at position 0);
- `first`: the id of the new branch's first message; `replaced`: the message it replaces.

A branch's path is its own messages from `at` on, after its parent's path up to `at`, and so
on up to branch 0: positions along a path run 0, 1, 2, ... . The conversation's active branch
(`Conversation.branch`) is the one turns append to and requests are built from; loading it
is one query, whatever the number of forks, as the table is on the conversation's row.

Forks only start at a user message (an edit sends new text there, a regenerate the same
text again), so the `< 2/3 >` choices sit on user messages: the messages after the same one.
"""

from django.db.models import Q, QuerySet

from roject.server.prepared_queries import PreparedQuery
from rojos.models import Conversation, Message


def _forks(conversation: Conversation) -> dict[int, dict]:
    return {fork["id"]: fork for fork in conversation.branches or ()}


def branch_path(
    conversation: Conversation, branch: int | None = None
) -> list[tuple[int, int, int | None]]:
    """The segments of a branch's path, newest first: (branch, from position, to position or
    None), each covering `from <= position < to`."""
    forks = _forks(conversation)
    number = conversation.branch if branch is None else branch
    segments: list[tuple[int, int, int | None]] = []
    until = None
    while number in forks:
        fork = forks[number]
        segments.append((number, fork["at"], until))
        until = fork["at"]  # a fork never starts before its parent's own part
        number = fork["parent"]
    segments.append((number, 0, until))
    return segments


def branch_filter(conversation: Conversation, branch: int | None = None) -> Q:
    """The messages on a branch's path, as a filter on Message."""
    return _path_filter(branch_path(conversation, branch))


def _path_filter(path: list[tuple]) -> Q:
    condition = Q()
    for number, start, end in path:
        part = Q(branch=number, position__gte=start)
        if end is not None:
            part &= Q(position__lt=end)
        condition |= part
    return condition


def branch_messages(conversation: Conversation, branch: int | None = None) -> QuerySet[Message]:
    """The messages of the active branch (or `branch`), in order: one query."""
    return Message.objects.filter(conversation=conversation).filter(
        branch_filter(conversation, branch)
    )


def branch_messages_list(conversation: Conversation, branch: int | None = None) -> list[Message]:
    """(Blocking) branch_messages' rows, by a query compiled once for each shape of path
    (its segments, and which of them end): read at every turn's start and every opening of
    a conversation, where Django built and compiled it each time."""
    path = branch_path(conversation, branch)
    shape = tuple(end is not None for _, _, end in path)
    query = _paths.get(shape) or _paths.setdefault(shape, _path_query(shape))
    values = [value for segment in path for value in segment if value is not None]
    return query.all(conversation.pk, *values)


_paths: dict[tuple[bool, ...], PreparedQuery] = {}


def _path_query(shape: tuple[bool, ...]) -> PreparedQuery:
    def build(conversation_id: int, *values: int) -> QuerySet[Message]:
        given = iter(values)
        path = [(next(given), next(given), next(given) if ends else None) for ends in shape]
        return Message.objects.filter(conversation_id=conversation_id).filter(_path_filter(path))

    return PreparedQuery(build, int, *(int for ends in shape for _ in range(3 if ends else 2)))


def branch_fork(conversation: Conversation, *, messages: list[Message], replaced: Message) -> int:
    """Make a branch that replaces `replaced`, a user message of the active path `messages`;
    return its number, now the active branch. The caller stores the new branch's first
    message (then `branch_started`) and saves the conversation, holding its claim."""
    index = messages.index(replaced)
    number = max((fork["id"] for fork in conversation.branches or ()), default=0) + 1
    conversation.branches = [
        *(conversation.branches or ()),
        {
            "id": number,
            "parent": replaced.branch,
            "at": replaced.position,
            "after": messages[index - 1].pk if index else None,
            "first": None,
            "replaced": replaced.pk,
        },
    ]
    conversation.branch = number
    return number


def branch_started(conversation: Conversation, *, first: Message) -> None:
    """Record the first message of the branch just forked."""
    for fork in conversation.branches:
        if fork["id"] == first.branch:
            fork["first"] = first.pk


def branch_choices(conversation: Conversation, messages: list[Message]) -> dict[int, list[int]]:
    """For each message of the active path `messages` that has alternatives: the ids of the
    messages that follow the same message, oldest first (the message itself among them)."""
    siblings: dict[int | None, list[int]] = {}
    for fork in sorted(conversation.branches or (), key=lambda f: f["id"]):
        group = siblings.setdefault(fork["after"], [fork["replaced"]])
        if fork["first"] is not None:
            group.append(fork["first"])
    choices: dict[int, list[int]] = {}
    before: int | None = None
    for message in messages:
        group = siblings.get(before)
        if group and message.pk in group:
            choices[message.pk] = group
        before = message.pk
    return choices


def branch_leaf(conversation: Conversation, *, message: Message) -> int:
    """The branch to show for a message: the newest branch whose path goes through it."""
    children: dict[int, list[dict]] = {}
    for fork in conversation.branches or ():
        children.setdefault(fork["parent"], []).append(fork)
    best = message.branch
    stack = [f for f in children.get(message.branch, ()) if f["at"] > message.position]
    while stack:
        fork = stack.pop()
        best = max(best, fork["id"])
        stack.extend(children.get(fork["id"], ()))
    return best


def branch_count(conversation: Conversation) -> int:
    return len(conversation.branches or ()) + 1
