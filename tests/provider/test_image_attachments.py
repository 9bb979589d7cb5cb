"""An attached image: attachments carry text, so it is refused, in the words of what the
rojo's model was found to take (its self-test)."""

import pytest

from roject.storage import project_root_create
from rojos.selftest.asks import red_square_png
from tests.support.helpers import make_rojo

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("images", "said"),
    [
        ("does_not", "does not take images (its self-test)"),
        ("works", "takes images (its self-test), but attachments carry text only"),
        (None, "is a binary file, not text"),
    ],
)
def test_an_attached_image_is_refused_in_the_words_of_the_models_self_test(
    client_for, users, project, fake_provider, images, said
):
    (project_root_create(project.pk) / "shot.png").write_bytes(red_square_png())
    results = {"images": {"status": images, "reason": "", "detail": {}}} if images else {}
    profiles = {"fake-model": {"taken": "2026-12-05T10:00:00+00:00", "results": results}}
    rojo = make_rojo(fake_provider.base_url, capability_profiles=profiles)
    url = f"/api/projects/{project.pk}/chat"

    response = client_for(users["editor"]).post(
        url, json={"rojo": rojo.slug, "message": "x", "attachments": ["shot.png"]}
    )

    assert response.status_code == 400 and said in response.json()["detail"]
    assert fake_provider.requests == []
