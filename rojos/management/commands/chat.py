import asyncio
import sys

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from roject.members.access import aproject_access
from roject.models import Project
from rojos.context.budgets import BudgetExceeded
from rojos.errors import TurnBusy, TurnNotStarted
from rojos.models import Conversation, Rojo
from rojos.turns.start import turn_start
from rojos.web.transcript import EventPrinter


class Command(BaseCommand):
    help = "Send one message to a rojo in a project, run the turn and print its events."

    def add_arguments(self, parser):
        parser.add_argument("message")
        parser.add_argument("--project", required=True, metavar="SLUG")
        parser.add_argument("--rojo", required=True, metavar="SLUG")
        parser.add_argument("--user", required=True, metavar="USERNAME")
        parser.add_argument("--conversation", type=int)
        parser.add_argument("--format", choices=["text", "ndjson"], default="text")
        parser.add_argument(
            "--yes",
            action="store_true",
            help="Approve calls that need approval (else they are denied: nobody can answer).",
        )

    def handle(self, *args, message, project, rojo, user, conversation, format, yes, **options):
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
                self._chat(user_obj, project_obj, rojo_obj, conversation, message, format, yes)
            )
        except (Http404, PermissionDenied, TurnBusy, BudgetExceeded) as exc:
            raise CommandError(str(exc) or "not allowed") from None
        except TurnNotStarted as exc:
            raise CommandError(
                f"the reply could not start ({exc.__cause__}); "
                f"the message is kept in conversation {exc.conversation_id}"
            ) from exc
        if failed:
            sys.exit(1)

    def write_raw(self, text: str) -> None:
        self.stdout.write(text, ending="")
        self.stdout.flush()

    async def _chat(self, user, project, rojo, conversation_id, message, format, yes) -> bool:
        access = await aproject_access(user=user, project_id=project.pk)
        conversation = None
        if conversation_id is not None:
            conversation = await Conversation.objects.filter(
                pk=conversation_id, project=project
            ).afirst()
            if conversation is None:
                raise Http404(f"no conversation {conversation_id} in project {project.slug!r}")
            if conversation.via_mcp:
                raise PermissionDenied(
                    f"conversation {conversation_id} holds calls made through MCP; chat in another"
                )
        turn = await turn_start(
            access=access,
            user=user,
            rojo=rojo,
            conversation=conversation,
            message=message,
            auto_approve=yes,
            limits=False,  # an operator's command, as before: the limits are the chat API's
        )
        printer = EventPrinter(self.write_raw, format)
        failed = False
        async for event in turn.follow():
            failed = failed or event.type == "ERROR"
            printer.write(event)
        return failed
