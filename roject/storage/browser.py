"""What the file browser shows people: a directory's entries and a file's text."""

from django.conf import settings

from .files import list_directory, path_meta, read_project_file
from .layout import project_root_create
from .paths import StorageError


def project_files_list(*, project_id: int, path: str) -> list[dict]:
    """(Blocking) The entries of a directory in the project, sorted by name."""
    return list_directory(project_root_create(project_id), path)


def project_file_show(*, project_id: int, path: str) -> dict:
    """(Blocking) A text file's content with its size and modification time."""
    root = project_root_create(project_id)
    meta = path_meta(root, path)
    limit = settings.ROJO_MAX_READ_BYTES
    if meta["type"] == "file" and meta["size"] > limit:  # said for people, not a model
        raise StorageError(
            f"{path!r} is {meta['size']:,} bytes, too big to show here (the limit is "
            f"{limit:,} bytes)"
        )
    text = read_project_file(root, path)
    return {"path": path, "text": text, "size": meta["size"], "modifiedAt": meta["modifiedAt"]}
