"""Images in the message box: uploaded (type by its bytes, within the limits), sent to a
model that takes images as image parts, refused before any request for one that does not,
listed with the message and served back for its thumbnail, to members only."""

import base64

import pytest

from roject.storage import project_root_create
from rojos.models import Conversation, Rojo
from rojos.selftest.asks import red_square_png
from tests.support.fake_provider import stream, text_chunks
from tests.support.helpers import make_rojo

pytestmark = pytest.mark.django_db(transaction=True)

RAW = {"Content-Type": "application/octet-stream"}
PNG = red_square_png()
GIF = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"


def profile(images: str) -> dict:
    results = {"images": {"status": images, "reason": "", "detail": {}}}
    return {"taken": "2026-12-05T10:00:00+00:00", "results": results}


def upload(client, project, body: bytes):
    return client.post(f"/api/projects/{project.pk}/images", content=body, headers=RAW)


def image_parts(request: dict) -> list[dict]:
    user = [m for m in request["messages"] if m["role"] == "user"][-1]
    assert isinstance(user["content"], list), user
    return [p for p in user["content"] if p["type"] == "image_url"]


def test_an_uploaded_image_goes_to_a_model_that_takes_images_as_an_image_part(
    client_for, users, project, fake_provider
):
    rojo = make_rojo(fake_provider.base_url, capability_profiles={"fake-model": profile("works")})
    fake_provider.add(stream(*text_chunks("A red square.")), stream(*text_chunks("Still red.")))
    editor = client_for(users["editor"])
    uploaded = upload(editor, project, PNG)
    assert uploaded.status_code == 200, uploaded.text
    image = uploaded.json()
    assert image["type"] == "image/png" and image["size"] == len(PNG)

    events = editor.chat(
        project.pk, rojo=rojo.slug, message="What is it?", images=[image["sha256"]]
    )

    assert events[-1].type == "DONE"
    data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert image_parts(fake_provider.requests[0]) == [
        {"type": "image_url", "image_url": {"url": data_url}}
    ]
    user = [m for m in fake_provider.requests[0]["messages"] if m["role"] == "user"][-1]
    assert user["content"][0] == {"type": "text", "text": "What is it?"}
    conversation = events[0].data["conversation"]
    detail = editor.get(f"/api/conversations/{conversation}").json()
    asked = next(m for m in detail["messages"] if m["role"] == "user")
    assert asked["images"] == [image]
    # The next request sends the history's image again.
    editor.chat(project.pk, rojo=rojo.slug, message="And now?", conversation=conversation)
    first_user = next(m for m in fake_provider.requests[1]["messages"] if m["role"] == "user")
    assert first_user["content"][1]["image_url"]["url"] == data_url
    exported = editor.get(f"/api/conversations/{conversation}/export").json()
    stored = next(m for m in exported["messages"] if m["role"] == "user")
    assert stored["extra"]["images"] == [image]
    transcript = editor.get(f"/api/conversations/{conversation}/export?format=markdown").text
    assert f"image/png, {len(PNG)} bytes, sha256 `{image['sha256']}`" in transcript


def test_the_image_is_served_as_its_type_and_never_as_a_page(client_for, users, project):
    viewer = client_for(users["viewer"])
    sha256 = upload(viewer, project, GIF).json()["sha256"]

    served = viewer.get(f"/api/projects/{project.pk}/images/{sha256}")

    assert served.status_code == 200 and served.content == GIF
    assert served.headers["content-type"] == "image/gif"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["content-security-policy"] == "default-src 'none'; sandbox"


def test_a_model_that_takes_no_images_refuses_before_any_request_naming_those_that_do(
    client_for, users, project, fake_provider
):
    profiles = {"fake-model": profile("does_not"), "vision-model": profile("works")}
    rojo = make_rojo(fake_provider.base_url, capability_profiles=profiles)
    editor = client_for(users["editor"])
    sha256 = upload(editor, project, PNG).json()["sha256"]

    response = editor.post(
        f"/api/projects/{project.pk}/chat",
        json={"rojo": rojo.slug, "message": "Look", "images": [sha256]},
    )

    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "'fake-model' does not take images" in detail and "'vision-model'" in detail
    assert fake_provider.requests == []
    assert not Conversation.objects.exists()


def test_an_untested_model_takes_images_only_when_the_rojo_says_so(
    client_for, users, project, fake_provider
):
    rojo = make_rojo(fake_provider.base_url)
    editor = client_for(users["editor"])
    sha256 = upload(editor, project, PNG).json()["sha256"]
    chat = {"rojo": rojo.slug, "message": "Look", "images": [sha256]}
    refused = editor.post(f"/api/projects/{project.pk}/chat", json=chat)
    assert refused.status_code == 400 and "None of this rojo's models" in refused.text
    assert fake_provider.requests == []

    Rojo.objects.filter(pk=rojo.pk).update(images=Rojo.Images.YES)
    fake_provider.add(stream(*text_chunks("Red.")))
    events = editor.chat(project.pk, **chat)
    assert events[-1].type == "DONE" and len(image_parts(fake_provider.requests[0])) == 1


def test_an_image_over_the_size_limit_of_another_type_or_too_many_is_refused(
    client_for, users, project, fake_provider, settings
):
    rojo = make_rojo(fake_provider.base_url, images=Rojo.Images.YES)
    editor = client_for(users["editor"])
    settings.ROJO_MAX_IMAGE_BYTES = len(PNG) - 1
    assert upload(editor, project, PNG).status_code == 413
    settings.ROJO_MAX_IMAGE_BYTES = 1 << 20
    # A text file is no image, whatever a client calls it.
    wrong = upload(editor, project, b"<html><script>alert(1)</script></html>")
    assert wrong.status_code == 400 and "PNG, JPEG, WebP or GIF" in wrong.text
    settings.ROJO_MAX_IMAGES_PER_MESSAGE = 1
    ids = [upload(editor, project, body).json()["sha256"] for body in (PNG, GIF)]
    too_many = editor.post(
        f"/api/projects/{project.pk}/chat", json={"rojo": rojo.slug, "message": "x", "images": ids}
    )
    assert too_many.status_code == 400 and "at most 1 image;" in too_many.text
    unknown = editor.post(
        f"/api/projects/{project.pk}/chat",
        json={"rojo": rojo.slug, "message": "x", "images": ["0" * 64]},
    )
    assert unknown.status_code == 400
    assert fake_provider.requests == []


def test_outsiders_get_404_and_a_viewer_attaches_to_their_own_conversation(
    client_for, users, project, fake_provider
):
    rojo = make_rojo(fake_provider.base_url, images=Rojo.Images.YES)
    viewer = client_for(users["viewer"])
    sha256 = upload(viewer, project, PNG).json()["sha256"]
    outsider = client_for(users["outsider"])
    assert upload(outsider, project, PNG).status_code == 404
    assert outsider.get(f"/api/projects/{project.pk}/images/{sha256}").status_code == 404
    missing = viewer.get(f"/api/projects/{project.pk}/images/{'0' * 64}")
    assert missing.status_code == 404

    fake_provider.add(stream(*text_chunks("Red.")))
    events = viewer.chat(project.pk, rojo=rojo.slug, message="Look", images=[sha256])

    assert events[-1].type == "DONE" and len(image_parts(fake_provider.requests[0])) == 1


def test_an_image_file_of_the_project_mentioned_goes_as_an_image(
    client_for, users, project, fake_provider
):
    (project_root_create(project.pk) / "shot.png").write_bytes(PNG)
    (project_root_create(project.pk) / "fake.png").write_text("not an image")
    rojo = make_rojo(fake_provider.base_url, images=Rojo.Images.YES)
    editor = client_for(users["editor"])
    fake_provider.add(stream(*text_chunks("Red.")))

    events = editor.chat(project.pk, rojo=rojo.slug, message="@shot.png", attachments=["shot.png"])

    assert events[-1].type == "DONE"
    assert image_parts(fake_provider.requests[0])[0]["image_url"]["url"].startswith(
        "data:image/png;base64,"
    )
    refused = editor.post(
        f"/api/projects/{project.pk}/chat",
        json={"rojo": rojo.slug, "message": "x", "attachments": ["fake.png"]},
    )
    assert refused.status_code == 400 and "'fake.png'" in refused.text
    assert len(fake_provider.requests) == 1


def test_a_model_switched_to_that_takes_no_images_gets_a_note_in_their_place(
    client_for, users, project, fake_provider
):
    rojo = make_rojo(fake_provider.base_url, images=Rojo.Images.YES)
    fake_provider.add(stream(*text_chunks("Red.")), stream(*text_chunks("Ok.")))
    editor = client_for(users["editor"])
    sha256 = upload(editor, project, PNG).json()["sha256"]
    events = editor.chat(project.pk, rojo=rojo.slug, message="Look", images=[sha256])
    Rojo.objects.filter(pk=rojo.pk).update(images=Rojo.Images.NO)

    conversation = events[0].data["conversation"]
    editor.chat(project.pk, rojo=rojo.slug, message="Go on", conversation=conversation)

    first_user = next(m for m in fake_provider.requests[1]["messages"] if m["role"] == "user")
    assert first_user["content"][1]["type"] == "text"
    assert "does not take images" in first_user["content"][1]["text"]


def test_user_messages_in_a_row_join_as_parts_and_an_image_counts_towards_the_window():
    """After a failed turn two user messages go as one: with images, as one list of parts.
    An image part counts as IMAGE_PART_CHARS in the request's size, not as nothing."""
    from rojos.context.window import IMAGE_PART_CHARS, item_chars
    from rojos.provider.images import image_parts
    from rojos.provider.request import assembled

    parts = image_parts("Look", [{"sha256": "a" * 64}])
    wire = assembled([{"role": "user", "content": "Hi"}, {"role": "user", "content": parts}])

    assert wire == [{"role": "user", "content": [{"type": "text", "text": "Hi"}, *parts]}]
    assert item_chars(wire[0]) >= IMAGE_PART_CHARS + len("HiLook")


def test_an_image_goes_with_the_last_conversation_that_shows_it(
    client_for, users, project, fake_provider
):
    rojo = make_rojo(fake_provider.base_url, images=Rojo.Images.YES)
    fake_provider.add(*(stream(*text_chunks("Red.")) for _ in range(2)))
    editor = client_for(users["editor"])
    sha256 = upload(editor, project, PNG).json()["sha256"]
    chat = {"rojo": rojo.slug, "message": "Look", "images": [sha256]}
    first = editor.chat(project.pk, **chat)[0].data["conversation"]
    second = editor.chat(project.pk, **chat)[0].data["conversation"]
    url = f"/api/projects/{project.pk}/images/{sha256}"

    assert editor.http.delete(f"/api/conversations/{first}").status_code in (200, 204)
    assert editor.get(url).status_code == 200  # the second still shows it
    assert editor.http.delete(f"/api/conversations/{second}").status_code in (200, 204)
    assert editor.get(url).status_code == 404
