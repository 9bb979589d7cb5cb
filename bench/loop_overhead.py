"""1. Loop overhead: CPU per conversation of the verification story, three ways, interleaved.

(a) reference: a minimal hand-written loop on the SDK's typed stream, with the same tools;
(b) the project's agent loop in this process (history in the database, changes recorded);
(c) the full path: HTTP POST to the server process, SSE back, every event parsed here.
The provider answers at once and runs in a process of its own, so its CPU counts nowhere.
A fourth variant, `reader`, for reading the others, only streams the story's three responses
through the project's stream reader: the floor that the SDK's HTTP transport sets under (b).
"""

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import openai
from asgiref.sync import sync_to_async

from . import client as http
from .env import project_new
from .provider import STORY_MESSAGE, STORY_REPLY
from .stats import median

VARIANTS = ("reference", "loop", "http", "reader")


@dataclass
class World:
    sdk: openai.AsyncOpenAI  # the reference's client, made once as a script would
    rojo: object
    user: object
    target: http.Target
    server: object


@dataclass
class LoopResult:
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)
    server_ms: list[float] = field(default_factory=list)
    client_ms: list[float] = field(default_factory=list)
    # CPU of making and closing one client: the SDK's default one, and the project's.
    client_construction_ms: dict[str, float] = field(default_factory=dict)

    def median_ms(self, variant: str) -> float:
        return median(self.cpu_ms[variant])


async def reference_conversation(
    sdk: openai.AsyncOpenAI, model: str, root: Path, project_id: int
) -> str:
    """A minimal agent loop on the SDK's typed stream, with the same tools, on a kept client."""
    from roject.models import Role
    from rojos.tools import RojoToolContext, registry

    ctx = RojoToolContext(project_id=project_id, project_root=root, role=Role.OWNER)
    tools = [tool.definition for tool in registry.available(ctx) if tool.default_enabled]
    messages: list[dict] = [{"role": "user", "content": STORY_MESSAGE}]
    while True:
        response = await sdk.chat.completions.create(
            model=model, messages=messages, tools=tools, stream=True
        )
        text: list[str] = []
        calls: dict[int, dict] = {}
        async for chunk in response:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                text.append(delta.content)
            for part in delta.tool_calls or ():
                call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = part.id or call["id"]
                if part.function:
                    call["name"] = part.function.name or call["name"]
                    call["arguments"] += part.function.arguments or ""
        reply = "".join(text)
        if not calls:
            return reply
        messages.append(
            {
                "role": "assistant",
                "content": reply or None,
                "tool_calls": [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": call["arguments"]},
                    }
                    for call in calls.values()
                ],
            }
        )
        for call in calls.values():
            result = await registry.execute(call["name"], call["arguments"], ctx)
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
            )


async def loop_turn(rojo, user, project, *, conversation=None, mark=None, lane: bool = True) -> str:
    """The project's agent loop as the turn runner drives it, minus HTTP and the channel layer.

    `mark(name)` is called as the turn reaches "start" (loading the history) and "loop".
    Without `lane`, its database calls run where sync_to_async sends them (section 5 counts
    them on its own thread).
    """
    from roject.models import Role
    from roject.server.db_threads import db_context
    from roject.storage import project_root_create
    from rojos.agent.events import ChatEvent
    from rojos.agent.history import History
    from rojos.agent.loop import agent_loop
    from rojos.models import Conversation
    from rojos.provider.clients import rojo_client
    from rojos.tools import RojoToolContext

    mark = mark or (lambda name: None)
    if conversation is None:
        conversation = await Conversation.objects.acreate(project=project, rojo=rojo, user=user)
    root = await asyncio.to_thread(project_root_create, project.pk)
    # Its database calls go to a lane of the database threads, as a turn's do (the runner's
    # db_context); asgiref's one executor thread, used without it, cost 3 to 4 ms less of
    # this story's CPU (7 December 2026): not what a turn costs.
    async with db_context() if lane else contextlib.nullcontext():
        mark("start")
        history = await History.load(conversation, user_message=STORY_MESSAGE)
        mark("loop")
        ctx = RojoToolContext(
            project_id=project.pk,
            project_root=root,
            user=user,
            role=Role.OWNER,
            enabled=frozenset(rojo.tools),
        )
        text = []
        client = await rojo_client(rojo)
        # The role is given, as the chat request's check hands it to the runner; the budgets
        # the loop reads itself (the request reads them in its check, which this leaves out).
        async for event in agent_loop(
            history=history, rojo=rojo, ctx=ctx, client=client, record_changes=True,
            role_read=True,
        ):  # fmt: skip
            if isinstance(event, ChatEvent):
                text.append(event.text)
    return "".join(text)


async def reader_only(rojo) -> str:
    """The story's three responses through rojo_client and the stream reader, nothing else."""
    from rojos.provider.accumulator import StreamAccumulator
    from rojos.provider.clients import rojo_client
    from rojos.provider.stream import provider_chunks
    from rojos.tools import registry

    tools = [registry.get(name).definition for name in rojo.tools]
    messages = [{"role": "user", "content": STORY_MESSAGE}]
    text = ""
    client = await rojo_client(rojo)
    for _step in range(3):
        accumulator = StreamAccumulator()
        request = {"model": rojo.model, "messages": messages, "tools": tools, "stream": True}
        async for batch in provider_chunks(client, request):
            for chunk in batch:
                accumulator.feed(chunk)
        text = accumulator.text
        # Each tool message after the user's moves the fake provider to its next step.
        messages = [*messages, {"role": "tool", "tool_call_id": "x", "content": "{}"}]
    return text


async def http_conversation(target: http.Target, rojo_slug: str, project_id: int) -> str:
    events = await http.chat(target, project_id, rojo_slug, STORY_MESSAGE)
    kinds = [e.type for e in events]
    if kinds[-1] != "DONE" or "ERROR" in kinds or kinds.count("TOOL_RESULT") != 2:
        raise RuntimeError(f"the story over HTTP went wrong: {kinds[:8]}...{kinds[-3:]}")
    return "".join(e.data["text"] for e in events if e.type == "CHAT")


async def client_construction(rojo, times: int = 9) -> dict[str, float]:
    """Median CPU of a turn's SDK client: the SDK's default one (made and closed), and
    rojo_client's, made on the loop's shared connection pool (and not closed)."""
    from rojos.provider.clients import rojo_client

    async def sdk_default() -> None:
        await openai.AsyncOpenAI(base_url=rojo.base_url, api_key="bench-key").close()

    async def shared_pool() -> None:
        await rojo_client(rojo)

    costs = {}
    for name, make in (("sdk_default", sdk_default), ("rojo_client", shared_pool)):
        samples = []
        for _ in range(times):
            start = time.process_time_ns()
            await make()
            samples.append((time.process_time_ns() - start) / 1e6)
        costs[name] = median(samples)
    return costs


async def run_once(variant: str, world: World, result: LoopResult) -> None:
    """One conversation of one variant in a fresh project; its CPU goes into `result`."""
    from roject.storage import project_root

    project = await sync_to_async(project_new)(f"loop {variant} {time.monotonic_ns()}")
    root = project_root(project.pk)
    if variant == "http":
        server_before = await asyncio.to_thread(world.server.cpu_ns)
    if variant == "loop":
        # A conversation is made once, before its first message, as the reference's list of
        # messages exists before its loop; the turn loads its (empty) history from it.
        from rojos.models import Conversation

        conversation = await Conversation.objects.acreate(
            project=project, rojo=world.rojo, user=world.user
        )
    start = time.process_time_ns()
    if variant == "reference":
        reply = await reference_conversation(world.sdk, world.rojo.model, root, project.pk)
    elif variant == "loop":
        reply = await loop_turn(world.rojo, world.user, project, conversation=conversation)
    elif variant == "http":
        reply = await http_conversation(world.target, world.rojo.slug, project.pk)
    else:
        reply = await reader_only(world.rojo)
    own_ms = (time.process_time_ns() - start) / 1e6
    if reply != STORY_REPLY:
        raise RuntimeError(f"{variant}: the reply came back wrong ({len(reply)} chars)")
    if variant != "reader" and not (root / "docs" / "intro" / "index.page").is_file():
        raise RuntimeError(f"{variant}: the page was not written")
    if variant == "http":
        await asyncio.sleep(0.005)  # let the turn's cleanup after DONE finish
        server_ms = (await asyncio.to_thread(world.server.cpu_ns) - server_before) / 1e6
        result.server_ms.append(server_ms)
        result.client_ms.append(own_ms)
        own_ms += server_ms
    result.cpu_ms.setdefault(variant, []).append(own_ms)


async def loop_overhead(world: World, *, runs: int, warmup: int = 3) -> LoopResult:
    """`runs` conversations of each variant, interleaved, the order rotating every round."""
    result = LoopResult(client_construction_ms=await client_construction(world.rojo))
    for _ in range(warmup):
        for variant in VARIANTS:
            await run_once(variant, world, LoopResult())
    for n in range(runs):
        order = VARIANTS[n % len(VARIANTS) :] + VARIANTS[: n % len(VARIANTS)]
        for variant in order:
            await run_once(variant, world, result)
    return result
