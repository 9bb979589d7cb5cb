"""A draft's appends against the database: a retried one does not repeat its text."""

from rojos.agent.drafts import draft_append_blocking
from rojos.models import Conversation, Message
from tests.support.helpers import make_rojo


def test_an_append_written_twice_stores_its_text_once_and_the_end_reads_back_the_whole(
    project, users
):
    """A write retried after its acknowledgement was lost runs the same UPDATE again: the
    draft's text is cut to what it held before, so the text comes once. Non-ASCII text
    counts in characters on both databases."""
    conversation = Conversation.objects.create(
        project=project, rojo=make_rojo("http://127.0.0.1:9/v1"), user=users["editor"]
    )
    draft = Message.objects.create(
        conversation=conversation, position=0, role="assistant", content="héllo ", draft=True
    )
    for _ in range(2):
        assert draft_append_blocking(draft.pk, "wörld ", after=6) is None
    assert Message.objects.get(pk=draft.pk).content == "héllo wörld "
    whole = draft_append_blocking(draft.pk, "ünd mehr", after=12, whole=True, draft=False)
    assert whole == "héllo wörld ünd mehr"
    stored = Message.objects.get(pk=draft.pk)
    assert (stored.content, stored.draft) == (whole, False)
