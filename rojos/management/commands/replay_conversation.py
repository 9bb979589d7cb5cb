import asyncio
import contextlib
import sys

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Count
from django.utils.translation import ngettext

from roject import storage
from roject.models import Project
from roject.storage import scratch_copy
from rojos.agent.branches import branch_count
from rojos.conversations.replay import (
    conversation_replay,
    conversation_rerun,
    tool_call_differences,
)
from rojos.models import Conversation, Rojo
from rojos.models.key_sources import key_env_refusal
from rojos.web.transcript import EventPrinter

ERROR_EXIT = 2


class Command(BaseCommand):
    help = (
        "Print a stored conversation as the events it produced, list conversations, or re-run "
        "one against a rojo (on a scratch copy of the files) and report where tool calls differ. "
        "Exit status with --rerun: 0 same tool calls, 1 different, 2 error."
    )

    def add_arguments(self, parser):
        parser.add_argument("conversation", nargs="?", type=int, help="The conversation's id.")
        parser.add_argument("--format", choices=["text", "ndjson", "sse"], default="text")
        parser.add_argument("--list", action="store_true", help="List conversations.")
        parser.add_argument(
            "--branch",
            type=int,
            metavar="N",
            help="The branch to replay or re-run (from 1; default: the one the chat shows).",
        )
        parser.add_argument("--project", metavar="SLUG", help="With --list: only this project.")
        parser.add_argument("--rerun", action="store_true", help="Send the user messages again.")
        parser.add_argument("--rojo", metavar="SLUG", help="With --rerun: use this rojo instead.")
        parser.add_argument(
            "--apply",
            action="store_true",
            help="With --rerun: run the tools on the REAL project files, not a scratch copy.",
        )
        parser.add_argument(
            "--yes",
            action="store_true",
            help="With --apply: approve the rojo's Ask-before calls (else they are denied: "
            "nobody can answer).",
        )

    def handle(
        self, *args, conversation, format, list, project, rerun, rojo, apply, yes, **options
    ):
        branch = options.get("branch")
        self.printer = EventPrinter(self.write_raw, format)
        if list:
            return self.list_conversations(project)
        if conversation is None:
            raise CommandError("give a conversation id, or --list", returncode=ERROR_EXIT)
        try:
            conv = Conversation.objects.select_related("project", "rojo", "user").get(
                pk=conversation
            )
        except Conversation.DoesNotExist:
            raise CommandError(f"no conversation {conversation}", returncode=ERROR_EXIT) from None
        if branch is not None and not 1 <= branch <= branch_count(conv):
            raise CommandError(
                f"conversation {conv.pk} has {_branches(branch_count(conv))}", returncode=ERROR_EXIT
            )
        original = conversation_replay(conv, branch=None if branch is None else branch - 1)
        if not rerun:
            self.print_header(conv, None if branch is None else branch - 1)
            self.print_turns(original)
            return
        status = self.rerun(conv, original, rojo_slug=rojo, apply=apply, yes=yes)
        sys.exit(status)

    def write_raw(self, text: str) -> None:
        self.stdout.write(text, ending="")
        self.stdout.flush()

    def note(self, text: str) -> None:
        """Commentary: on stdout for text, on stderr when stdout carries a wire format."""
        (self.stdout if self.printer.format == "text" else self.stderr).write(text)

    def list_conversations(self, project_slug: str | None) -> None:
        conversations = (
            Conversation.objects.select_related("project", "rojo", "user")
            .annotate(message_count=Count("messages"))
            .order_by("-updated")
        )
        if project_slug:
            if not Project.objects.filter(slug=project_slug).exists():
                raise CommandError(f"no project {project_slug!r}", returncode=ERROR_EXIT)
            conversations = conversations.filter(project__slug=project_slug)
        for c in conversations:
            rojo = c.rojo.slug if c.rojo else "(deleted rojo)"
            user = c.user.get_username() if c.user else "(deleted user)"
            messages = f"{c.message_count} {ngettext('message', 'messages', c.message_count)}"
            self.stdout.write(
                f"{c.pk}\t{c.project.slug}\t{rojo}\t{user}\t"
                f"{c.updated:%Y-%m-%d %H:%M}\t{messages}\t"
                + (f"{_branches(branch_count(c))}\t" if c.branches else "")
                + c.title
            )

    def print_header(self, conv: Conversation, branch: int | None = None) -> None:
        rojo = conv.rojo.slug if conv.rojo else "(deleted rojo)"
        user = conv.user.get_username() if conv.user else "(deleted user)"
        shown = conv.branch if branch is None else branch
        branches = f" · branch {shown + 1} of {branch_count(conv)}" if conv.branches else ""
        self.note(
            f"# conversation {conv.pk} · project {conv.project.slug} · rojo {rojo} · "
            f"{user} · {conv.created:%Y-%m-%d %H:%M}{branches} · {conv.title}"
        )

    def print_turns(self, turns) -> None:
        for turn in turns:
            self.printer.user(turn.user.content or "")
            for event in turn.events:
                self.printer.write(event)

    def rerun(
        self, conv: Conversation, original, *, rojo_slug: str | None, apply: bool, yes: bool
    ) -> int:
        if rojo_slug:
            rojo = Rojo.objects.filter(slug=rojo_slug).first()
            if rojo is None:
                raise CommandError(f"no rojo {rojo_slug!r}", returncode=ERROR_EXIT)
        elif conv.rojo is None:
            raise CommandError(
                "the conversation's rojo was deleted; pass --rojo SLUG", returncode=ERROR_EXIT
            )
        else:
            rojo = conv.rojo
        refusal = key_env_refusal(rojo.api_key_env)
        if refusal:  # what a chat with it answers, before anything is sent
            raise CommandError(f"rojo {rojo.slug!r}: {refusal}", returncode=ERROR_EXIT)
        root = storage.project_root(conv.project_id)
        if apply:
            self.stderr.write(
                f"WARNING: --apply: the tools run on the REAL files of project "
                f"{conv.project.slug!r}; they will be changed."
            )
        messages = [turn.user.content or "" for turn in original]

        async def decide(call_id: str) -> bool:
            return yes

        # On a scratch copy every call runs; on the real files, Ask-before calls only with --yes.
        approver = decide if apply else None
        with contextlib.nullcontext(root) if apply else scratch_copy(root) as files:
            rerun = asyncio.run(self._collect(conv, rojo, files, messages, approver))
        self.print_turns(rerun)
        if any(e.type == "ERROR" for turn in rerun for e in turn.events):
            self.note("re-run ended with an error (see ERROR above)")
            return ERROR_EXIT
        differences = tool_call_differences(original, rerun)
        if differences:
            self.note("tool calls differ from the original:\n  " + "\n  ".join(differences))
            return 1
        calls, turns = sum(len(turn.tool_calls) for turn in rerun), len(rerun)
        in_turns = f"{turns} {ngettext('turn', 'turns', turns)}"
        self.note(f"same tool calls as the original ({calls} in {in_turns})")
        return 0

    async def _collect(self, conv, rojo, root, messages, approver):
        return [
            turn
            async for turn in conversation_rerun(
                conversation=conv, rojo=rojo, root=root, user_messages=messages, approver=approver
            )
        ]


def _branches(count: int) -> str:
    return f"{count} {ngettext('branch', 'branches', count)}"
