"""read_result: a range of a tool result kept because it was too large to hand over whole,
read only in the conversation that kept it, with errors the model can act on."""

import os
import stat
from pathlib import Path

from roject.models import Role
from roject.storage import (
    project_leftovers_remove,
    result_keep,
    results_kept,
    results_remove,
)
from rojos.tools import RojoToolContext, registry

PROJECT, CONVERSATION, OTHER = 7, 11, 12


def ctx_for(root: Path, conversation_id: int | None = CONVERSATION) -> RojoToolContext:
    return RojoToolContext(
        project_id=PROJECT,
        project_root=root,
        role=Role.VIEWER,
        enabled=frozenset({"list_files"}),
        conversation_id=conversation_id,
        results_kept=True,
    )


def keep(text: str, conversation_id: int = CONVERSATION) -> str:
    return result_keep(project_id=PROJECT, conversation_id=conversation_id, text=text)


async def read(ctx: RojoToolContext, **args):
    return await registry.execute("read_result", args, ctx)


async def test_reads_any_range_and_says_where_to_go_on(root, storage_dir):
    text = "".join(f"{n:07}\n" for n in range(1000))  # 8 bytes a line
    handle = keep(text)

    part = await read(ctx_for(root), handle=handle, offset=4000, length=80)

    assert part == {"text": text[4000:4080], "offset": 4000, "end": 4080, "size": 8000}
    assert await read(ctx_for(root), handle=handle, offset=7990) == {
        "text": text[7990:],
        "offset": 7990,
        "end": 8000,
        "size": 8000,
    }


async def test_kept_outside_the_root_and_private(root, storage_dir):
    handle = keep("secret result")

    kept = storage_dir / str(PROJECT) / "results" / str(CONVERSATION) / handle
    assert kept.read_text() == "secret result"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    assert not (storage_dir / str(PROJECT) / "root").exists()
    assert os.listdir(kept.parent) == [handle]  # no temporary file left


async def test_a_range_inside_a_character_returns_whole_characters(root, storage_dir):
    handle = keep("ab" + "é" * 10)  # é is 2 bytes: they start at 2, 4, 6, ...

    part = await read(ctx_for(root), handle=handle, offset=3, length=4)

    assert part == {"text": "é", "offset": 4, "end": 6, "size": 22}


async def test_errors_are_values_the_model_can_act_on(root, storage_dir, settings):
    settings.ROJO_MAX_READ_BYTES = 1000
    handle = keep("x" * 100)
    ctx = ctx_for(root)

    assert await read(ctx, handle=handle, offset=100) == {
        "error": "offset 100 is past the end: the result is 100 bytes"
    }
    assert await read(ctx, handle="r" + "0" * 32) == {
        "error": f"no kept result {'r' + '0' * 32!r} in this conversation"
    }
    assert await read(ctx, handle="../../root/a") == {
        "error": "no kept result '../../root/a' in this conversation"
    }
    assert await read(ctx, handle=handle, length=1001) == {
        "error": "length 1,001 is over the read limit of 1,000 bytes (ROJO_MAX_READ_BYTES); "
        "read in parts"
    }
    assert await read(ctx, handle=handle, offset=-1) == {
        "error": "offset must be 0 or more, and length at least 1"
    }


async def test_another_conversations_result_is_unknown(root, storage_dir):
    """The handle is looked up only among the asking conversation's results."""
    handle = keep("theirs", conversation_id=OTHER)

    assert await read(ctx_for(root), handle=handle) == {
        "error": f"no kept result {handle!r} in this conversation"
    }
    assert (await read(ctx_for(root, OTHER), handle=handle))["text"] == "theirs"


def test_offered_to_every_rojo_only_where_a_result_is_kept(root):
    """Whatever the rojo enables; and never in a conversation without a kept result."""
    with_kept = ctx_for(root)
    without = RojoToolContext(
        project_id=PROJECT, project_root=root, enabled=frozenset({"list_files"})
    )

    assert [t.name for t in registry.available(with_kept)] == ["list_files", "read_result"]
    assert [t.name for t in registry.available(without)] == ["list_files"]


def test_removing_a_conversations_results_leaves_the_others(storage_dir):
    keep("a")
    keep("b", conversation_id=OTHER)
    assert results_kept(project_id=PROJECT, conversation_id=CONVERSATION)

    results_remove(project_id=PROJECT, conversation_id=CONVERSATION)

    assert not results_kept(project_id=PROJECT, conversation_id=CONVERSATION)
    assert results_kept(project_id=PROJECT, conversation_id=OTHER)


def test_the_storage_cleanup_removes_results_past_their_days(storage_dir, settings):
    """Older than ROJO_KEPT_RESULT_DAYS: gone, and a conversation's directory with them once
    nothing in it is newer; newer ones stay."""
    settings.ROJO_KEPT_RESULT_DAYS = 30
    old_handle, new_handle = keep("old"), keep("new")
    other = keep("other old", conversation_id=OTHER)
    results = storage_dir / str(PROJECT) / "results"
    long_ago = 31 * 86400
    for conversation, handle in [(CONVERSATION, old_handle), (OTHER, other)]:
        path = results / str(conversation) / handle
        os.utime(path, (path.stat().st_atime - long_ago,) * 2)

    removed = project_leftovers_remove(PROJECT, whole_root=False)

    assert sorted(removed) == [
        f"{PROJECT}/results/{CONVERSATION}/{old_handle}",
        f"{PROJECT}/results/{OTHER}",
    ]
    assert os.listdir(results) == [str(CONVERSATION)]
    assert os.listdir(results / str(CONVERSATION)) == [new_handle]
