import asyncio
import json
import sys

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from roject.access import aproject_access
from roject.models import Project
from rojos import turns
from rojos.errors import TurnBusy
from rojos.models import Conversation, Rojo
from rojos.wire import encode_ndjson


def _text_line(event) -> str | None:
    data = event.data
    match event.type:
        case "START":
            return f"[conversation {data['conversation']}]"
        case "TOOL_CALL":
            return f"⚙ {data['name']}({json.dumps(data['args'], ensure_ascii=False)})"
        case "TOOL_RESULT":
            outcome = "ok" if data["ok"] else f"error: {data['result'].get('error')}"
            return f"  → {outcome}"
        case "ERROR":
            return f"ERROR: {data['message']}"
    return None


class Command(BaseCommand):
    help = "Send one message to a rojo in a project, run the turn and print its events."

    def add_arguments(self, parser):
        parser.add_argument("message")
        parser.add_argument("--project", required=True, metavar="SLUG")
        parser.add_argument("--rojo", required=True, metavar="SLUG")
        parser.add_argument("--user", required=True, metavar="USERNAME")
        parser.add_argument("--conversation", type=int)
        parser.add_argument("--format", choices=["text", "ndjson"], default="text")

    def handle(self, *args, message, project, rojo, user, conversation, format, **options):
        try:
            user_obj = get_user_model().objects.get(username=user)
            project_obj = Project.objects.get(slug=project)
            rojo_obj = Rojo.objects.get(slug=rojo)
        except (get_user_model().DoesNotExist, Project.DoesNotExist, Rojo.DoesNotExist) as exc:
            raise CommandError(
                str(exc).replace("matching query does not exist.", "not found")
            ) from None
        try:
            failed = asyncio.run(
                self._chat(user_obj, project_obj, rojo_obj, conversation, message, format)
            )
        except (Http404, PermissionDenied, TurnBusy) as exc:
            raise CommandError(str(exc) or "not allowed") from None
        if failed:
            sys.exit(1)

    async def _chat(self, user, project, rojo, conversation_id, message, format) -> bool:
        access = await aproject_access(user=user, project_id=project.pk)
        if conversation_id is None:
            conversation = await turns.conversation_create(
                access=access, rojo=rojo, user=user, message=message
            )
        else:
            conversation = await Conversation.objects.filter(
                pk=conversation_id, project=project
            ).afirst()
            if conversation is None:
                raise Http404(f"no conversation {conversation_id} in project {project.slug!r}")
        turn = await turns.turn_start(
            access=access, user=user, rojo=rojo, conversation=conversation, message=message
        )
        failed = False
        text_open = False
        async for event in turn.follow():
            failed = failed or event.type == "ERROR"
            if format == "ndjson":
                self.stdout.write(encode_ndjson(event).decode(), ending="")
                continue
            if event.type == "CHAT":
                self.stdout.write(event.data["text"], ending="")
                text_open = True
                continue
            line = _text_line(event)
            if line is not None:
                self.stdout.write(("\n" if text_open else "") + line)
                text_open = False
        if format == "text" and text_open:
            self.stdout.write("")
        self.stdout.flush()
        return failed
