"""What a chat message sends (POST /api/projects/{id}/chat): the API's largest input, apart
from the other schemas (rojos/web/schemas.py). The classes' names are the schema names in the
OpenAPI document."""

from ninja import Field, Schema


class PdfIn(Schema):
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    name: str = Field("", max_length=1000, description="How the message shows it.")


class ChatIn(Schema):
    rojo: int | str = Field(description="The rojo's id or slug.")
    message: str = Field(min_length=1, max_length=100_000)
    conversation: int | None = None
    images: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="Images uploaded with POST /api/projects/{id}/images, by their sha256: "
        "sent to the model as image parts, refused (400) before any request when it takes none.",
    )
    pdfs: list[PdfIn] = Field(
        default_factory=list,
        max_length=100,
        description="PDFs uploaded with POST /api/projects/{id}/pdfs: their text, with "
        "`[page N of M]` markers, goes to the model with the message, within the read limit.",
    )
    replace: int | None = Field(
        None,
        description="The id of a user message of the conversation's active branch: the "
        "message replaces it on a new branch (an edit; the same text regenerates the reply).",
    )
    model: str = Field(
        "",
        max_length=200,
        description="The model to answer with, one the rojo offers (`GET /api/rojos/{id}/"
        "models`); empty: the conversation's. It becomes the conversation's model, but with "
        "`replace` (a regenerate with another model: a branch beside the other answer).",
    )
    attachments: list[str] = Field(
        default_factory=list,
        max_length=10,
        description="Project files whose text goes to the model with the message (`@path`).",
    )
    key: str = Field(
        "",
        max_length=64,
        pattern=r"^[A-Za-z0-9_-]*$",
        description="A key the client makes for this message, so that if no answer comes "
        "(the server died before the reply started) it can find the conversation the "
        "message is in: `GET /api/projects/{id}/conversations?key=`.",
    )
