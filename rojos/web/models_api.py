"""The models of a rojo and of a conversation: what the rojo bar's model picker lists, the
provider's list fetched again on demand, and the conversation's pick. Thin, like
rojos/web/api.py, which mounts this router."""

from datetime import datetime

from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from ninja import Field, Router, Schema

from roject.api_answers import answers
from roject.members.selectors import membership_any
from rojos.context.model_choice import models_offered
from rojos.context.model_listing import provider_models_refresh
from rojos.conversations.services import conversation_model_change
from rojos.models import Rojo
from rojos.web import selectors

router = Router(tags=["rojos"])


class RojoModelsOut(Schema):
    default: str = Field(description="The rojo's default model.")
    models: list[str] = Field(description="The models people may pick, the default first.")
    any_listed: bool = Field(description="It offers any model its provider lists.")
    fetched: datetime | None = Field(description="When the provider's list was last fetched.")


class ConversationModelIn(Schema):
    model: str = Field(min_length=1, max_length=200)


class ConversationModelOut(Schema):
    model: str = Field(description="The model the conversation's next turns ask.")


def _models_out(rojo: Rojo) -> dict:
    return {
        "default": rojo.model,
        "models": models_offered(rojo),
        "any_listed": rojo.any_listed_model,
        "fetched": rojo.provider_models_fetched,
    }


def _rojo_for_refresh(*, user, rojo: str) -> Rojo:
    """(Blocking) The rojo, for a user who may chat with it (a member of some project) or an
    administrator who may change rojos: a refresh sends its key to its provider."""
    found = selectors.rojo_get(rojo)
    may_change = user.is_staff and user.has_perm("rojos.change_rojo")
    if not (user.is_active and (may_change or membership_any(user=user))):
        raise PermissionDenied("Only a member of a project can ask for a rojo's models.")
    return found


@router.get("/rojos/{rojo}/models", response=answers(RojoModelsOut, 404, 422))
def rojo_models(request: HttpRequest, rojo: str):
    """The models people may pick on the rojo (its id or slug), its default first."""
    return _models_out(selectors.rojo_get(rojo))


@router.post(
    "/rojos/{rojo}/models/refresh", response=answers(RojoModelsOut, 400, 403, 404, 422, 502)
)
async def rojo_models_refresh(request: HttpRequest, rojo: str):
    """Fetch the provider's model list again (a rojo that offers any model it lists): its
    `GET /models`, with the rojo's key, bounded; 502 when the provider refuses or is down.
    For members of a project and administrators who may change rojos (403 for others)."""
    found = await sync_to_async(_rojo_for_refresh)(user=request.auth, rojo=rojo)
    if found.any_listed_model:
        await provider_models_refresh(found)
    return await sync_to_async(_models_out)(found)


@router.post(
    "/conversations/{conversation_id}/model",
    response=answers(ConversationModelOut, 400, 403, 404, 422),
    tags=["chat"],
)
def conversation_model(request: HttpRequest, conversation_id: int, payload: ConversationModelIn):
    """Pick the model of the conversation's next turns, one its rojo offers (the rojo bar)."""
    conversation, access = selectors.conversation_access(
        user=request.auth, conversation_id=conversation_id
    )
    selectors.conversation_steer_check(conversation=conversation, access=access, user=request.auth)
    return {"model": conversation_model_change(conversation=conversation, model=payload.model)}
