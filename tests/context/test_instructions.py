"""A project's instruction files (AGENTS.md): sent after the system prompt on every request,
a sub-folder's once the rojo works in it, read through the storage gate."""

import asyncio
import json

import pytest

from roject import storage
from rojos.context.compaction import compact
from rojos.context.instructions import MAX_FILE_BYTES, instruction_files_read
from tests.support.agent_run import rojo_for, run_turn, valid_history
from tests.support.fake_provider import stream, text_chunks, tool_call_chunks
from tests.support.helpers import PAGE, STORY, make_rojo
from tests.support.live_server import ApiClient

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "You are the project's writer."
FOOTER = "-- Written by the docs team --"
ROOT_RULES = f"Every page ends with the footer line: {FOOTER}"
DOCS_RULES = "Pages under docs/ use British spelling."


async def write(project, path: str, text: str) -> None:
    root = await asyncio.to_thread(storage.project_root_create, project.pk)
    await asyncio.to_thread(storage.write_project_file, root, path, text)


def system_of(request: dict) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return first["content"]


async def test_the_story_with_agents_md_sends_it_after_the_prompt_and_a_folder_joins(
    fake_provider, project, users
):
    """The root's AGENTS.md goes with every request right after the system prompt; the
    page written follows it; docs/AGENTS.md joins once the rojo creates a folder in docs,
    and that call's result names it."""
    await write(project, "AGENTS.md", ROOT_RULES)
    await write(project, "docs/AGENTS.md", DOCS_RULES)
    page = {"path": "docs/intro/index.page", "text": f"{PAGE}\n{FOOTER}\n"}
    fake_provider.add(
        stream(tool_call_chunks([("create_directory", {"path": "docs/intro"})])),
        stream(tool_call_chunks([("write_text_content", page)])),
        stream(text_chunks("Done.")),
    )
    rojo = await rojo_for(fake_provider, system_prompt=PROMPT)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"], message=STORY)

    assert run.error is None and run.text == "Done."
    first, second, third = fake_provider.requests
    for request in (first, second, third):
        system = system_of(request)
        assert system.startswith(PROMPT)
        assert system.index(ROOT_RULES) > len(PROMPT)
        assert request["messages"][-1]["role"] != "system"
    assert DOCS_RULES not in system_of(first)
    assert DOCS_RULES in system_of(second) and DOCS_RULES in system_of(third)
    assert system_of(second).index(DOCS_RULES) > system_of(second).index(ROOT_RULES)
    created, written = run.results
    assert created.ok and "docs/AGENTS.md" in created.result["instructions"]
    assert written.ok and "instructions" not in written.result  # docs was entered already
    text = await asyncio.to_thread(storage.read_project_file, run.root, "docs/intro/index.page")
    assert text.rstrip().endswith(FOOTER)
    history = await valid_history(run.conversation)
    assert "docs/AGENTS.md" in json.loads(history[2].content)["instructions"]


async def test_an_edit_applies_from_the_next_request_and_a_rojo_may_name_other_files(
    fake_provider, project, users
):
    """The files are read for each request: the second turn sends the edited text. A rojo
    set to read CLAUDE.md as well sends both; one set to none sends no system message."""
    await write(project, "AGENTS.md", "Version one.")
    await write(project, "CLAUDE.md", "Claude's rules.")
    fake_provider.add(*(stream(text_chunks("Ok.")) for _ in range(3)))
    rojo = await rojo_for(fake_provider, instruction_files=["AGENTS.md", "CLAUDE.md"])

    first = await run_turn(project=project, rojo=rojo, user=users["editor"])
    await write(project, "AGENTS.md", "Version two.")
    await run_turn(
        project=project, rojo=rojo, user=users["editor"], conversation=first.conversation
    )
    rojo.instruction_files = []
    await rojo.asave()
    await run_turn(project=project, rojo=rojo, user=users["editor"])

    one, two, none = fake_provider.requests
    assert "Version one." in system_of(one) and "Claude's rules." in system_of(one)
    assert "Version two." in system_of(two) and "Version one." not in system_of(two)
    assert [m["role"] for m in none["messages"]] == ["user"]


async def test_a_folder_file_in_a_read_result_is_named_below_the_text(
    fake_provider, project, users
):
    """A read that enters a folder keeps the file's text whole, the note on a last line."""
    await write(project, "notes/AGENTS.md", "Notes are short.")
    await write(project, "notes/a.md", "alpha\n")
    fake_provider.add(
        stream(tool_call_chunks([("get_text_content", {"path": "notes/a.md"})])),
        stream(text_chunks("Read.")),
    )
    rojo = await rojo_for(fake_provider)

    run = await run_turn(project=project, rojo=rojo, user=users["editor"])

    (result,) = run.results
    assert result.result.startswith("alpha\n\n[") and "notes/AGENTS.md" in result.result
    assert "Notes are short." in system_of(fake_provider.requests[1])
    assert all(m["role"] != "system" for m in fake_provider.requests[0]["messages"])


def test_the_api_names_the_files_in_force_for_the_chat_header(
    asgi_server, fake_provider, project, users
):
    """The conversation's usage (which the chat header shows) lists the root's files and
    those of the folders entered; a binary one, left out of the request, is not listed."""
    root = storage.project_root_create(project.pk)
    storage.write_project_file(root, "AGENTS.md", ROOT_RULES)
    storage.write_project_file(root, "docs/AGENTS.md", DOCS_RULES)
    (root / "CLAUDE.md").write_bytes(b"\x00binary")
    storage.write_project_file(root, "other/AGENTS.md", "Not entered.")
    fake_provider.add(
        stream(tool_call_chunks([("list_files", {"path": "docs"})])),
        stream(text_chunks("Listed.")),
    )
    rojo = make_rojo(fake_provider.base_url, instruction_files=["AGENTS.md", "CLAUDE.md"])
    client = ApiClient(asgi_server, users["editor"])
    try:
        events = client.chat(project.pk, rojo=rojo.slug, message="List docs")
        conversation = events[0].data["conversation"]
        usage = client.get(f"/api/conversations/{conversation}/usage").json()
        detail = client.get(f"/api/conversations/{conversation}").json()
    finally:
        client.close()

    assert usage["instructions"] == ["AGENTS.md", "docs/AGENTS.md"]
    assert detail["usage"]["instructions"] == usage["instructions"]
    assert "[left out:" in system_of(fake_provider.requests[0])  # CLAUDE.md, with its note


def test_files_are_read_through_the_gate_missing_cut_or_left_out(tmp_path):
    """Missing: nothing. Over the bound: its start, with a note. Binary or not UTF-8: left
    out, with a note. A name that leads outside the root is refused by the gate."""
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "AGENTS.md").write_text("é" * MAX_FILE_BYTES)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "AGENTS.md").write_bytes(b"\x00\x01rules")
    (tmp_path / "latin").mkdir()
    (tmp_path / "latin" / "AGENTS.md").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "big" / "up").symlink_to(tmp_path.parent)

    found = instruction_files_read(
        project_root=tmp_path, names=["AGENTS.md"], folders=["", "big", "bin", "latin", "big/up"]
    )

    big, binary, latin, outside = found
    assert big.path == "big/AGENTS.md" and big.text == "é" * (MAX_FILE_BYTES // 2)
    assert big.note.startswith("cut: the first")
    assert (binary.text, latin.text) == ("", "")
    assert "binary" in binary.note and "UTF-8" in latin.note
    assert outside.text == "" and "outside" in outside.note


def test_the_instructions_count_in_the_window_like_the_prompt():
    """Compaction counts them in the system message, so a request that fits without them
    is compacted (or refused) with them."""
    plain = compact([], system_prompt="p", model=None, budget_chars=10_000)
    with_rules = compact(
        [], system_prompt="p", model=None, budget_chars=10_000, instructions="r" * 5_000
    )
    assert with_rules.chars - plain.chars >= 5_000
    assert with_rules.messages == [{"role": "system", "content": "p\n\n" + "r" * 5_000}]
