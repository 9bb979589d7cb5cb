"""The provider self-test over the API: for those who may change rojos (the admin's right).

Anyone may list the rojos, so a rojo that does not exist is a 404 and one the user may not
test a 403. The test's requests go to the rojo's own endpoint, with its key, and nothing
of the key comes back (the stream reader scrubs every provider message of it).
"""

from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest
from ninja import Field, Router, Schema

from roject.api_answers import answers
from roject.members.access import LoginRequired
from rojos.models import Rojo
from rojos.selftest.results import LABELS, Profile

router = Router(tags=["rojos"])


class ProbeOut(Schema):
    capability: str
    label: str = Field(description="What was tried, as the admin's table says it.")
    status: str = Field(description="works, does_not or unknown (the test could not tell).")
    reason: str
    detail: dict = Field(description="What the app acts on: window, reasoning shape, refused.")


class SelfTestIn(Schema):
    model: str | None = Field(None, description="Another model on the rojo's provider.")


class SelfTestOut(Schema):
    rojo: str
    model: str
    taken: str
    requests: int
    results: list[ProbeOut]


class NothingVerifiedOut(SelfTestOut):
    """502: the test ran, but every check is unknown (a provider out of reach, a key refused);
    the table says each check's reason."""

    detail: str = Field(description="Nothing was verified, and the first reason.")


def _rojo_for_test(*, user, slug: str) -> Rojo:
    """(Blocking) The rojo, for a user who may change rojos."""
    if user is None or not user.is_authenticated:
        raise LoginRequired
    try:
        rojo = Rojo.objects.get(slug=slug)
    except Rojo.DoesNotExist:
        raise Http404 from None
    if not (user.is_active and user.is_staff and user.has_perm("rojos.change_rojo")):
        raise PermissionDenied("Only an administrator who may change rojos can test one.")
    return rojo


@router.post(
    "/{slug}/selftest", response={**answers(SelfTestOut, 400, 403, 404), 502: NothingVerifiedOut}
)
async def rojo_selftest(request: HttpRequest, slug: str, payload: SelfTestIn | None = None):
    """Test the rojo's provider and model (a short, bounded set of requests); the table is
    kept as the model's capability profile, which turns then use. 502 with the table when
    nothing was verified (every check unknown), as `test_rojo` exits 3: never a pass."""
    rojo = await sync_to_async(_rojo_for_test)(user=request.auth, slug=slug)
    model = (payload.model if payload else None) or None
    # Here, not at the top: the runner brings the provider's SDK, and the URLconf (so every
    # management command) imports this module; a server imports it at start (rojos/eager.py).
    from rojos.selftest.runner import rojo_selftest_run

    profile = await rojo_selftest_run(rojo=rojo, model=model)
    table = _table(rojo, profile)
    if profile.verified_nothing:
        return 502, {"detail": profile.nothing_verified_text(), **table}
    return table


def _table(rojo: Rojo, profile: Profile) -> dict:
    return {
        "rojo": rojo.slug,
        "model": profile.model,
        "taken": profile.taken,
        "requests": profile.requests,
        "results": [
            {"capability": r.capability, "label": LABELS[r.capability], **r.as_json()}
            for r in profile.results
        ],
    }
