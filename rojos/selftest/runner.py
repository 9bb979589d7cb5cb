"""Running the self-test: each probe in turn, within one set of limits, into one profile."""

from asgiref.sync import sync_to_async
from django.utils import timezone

from rojos.models import Rojo
from rojos.models.capabilities import CAPABILITIES
from rojos.provider.clients import rojo_client
from rojos.selftest.answers import images_probe, reasoning_probe, stream_probe, usage_probe
from rojos.selftest.calls import parallel_calls_probe, tool_call_probe
from rojos.selftest.exchange import Limits, Session
from rojos.selftest.listing import listing_probe
from rojos.selftest.options import options_probe
from rojos.selftest.results import Profile
from rojos.selftest.storage import profile_store

# The options first: a refused one is left out of every request after it.
PROBES = (
    options_probe,
    stream_probe,
    usage_probe,
    reasoning_probe,
    tool_call_probe,
    parallel_calls_probe,
    images_probe,
    listing_probe,
)


async def rojo_selftest(
    *, rojo: Rojo, model: str | None = None, limits: Limits | None = None
) -> Profile:
    """Probe the rojo's provider with `model` (default: the rojo's); nothing is stored."""
    model = model or rojo.model
    session = Session(await rojo_client(rojo), limits or Limits(), rojo=rojo, model=model)
    found = {}
    for probe in PROBES:
        result = await probe(session)
        found[result.capability] = result
    return Profile(
        model=model,
        taken=timezone.now().isoformat(timespec="seconds"),
        results=tuple(found[name] for name in CAPABILITIES),
        requests=session.sent,
    )


async def rojo_selftest_run(
    *, rojo: Rojo, model: str | None = None, limits: Limits | None = None
) -> Profile:
    """Probe, then keep the profile as the model's (rojos.selftest.storage)."""
    profile = await rojo_selftest(rojo=rojo, model=model, limits=limits)
    await sync_to_async(profile_store)(rojo=rojo, profile=profile)
    return profile
