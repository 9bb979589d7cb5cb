"""The storage gate: every file operation on a project's storage goes through here.

Every model-supplied path is resolved from the project root's descriptor and the operation
acts on what that opened (`beneath`): no `..`, link or swap made meanwhile leads it outside.
Files with other hard links are neither read nor changed; modes do not depend on the umask.
Errors name only the relative path the caller gave. The gate owns the layout on disk too:
the root, the undo copies and the change lock (`layout`), snapshots and their atomic
restores, scratch copies for re-runs, tool results too large to hand over whole
(`results`), images and PDFs attached to messages (`images`, `pdfs`, on `kept`). Nothing
outside it touches a project's files.
The functions are blocking unless async; async callers run them with `asyncio.to_thread`.
"""

from .archives import Unpacked, ZipLimits, zip_unpack
from .browser import project_file_read, project_file_show, project_files_list
from .changes import delete_path, move_path, paths_under
from .entries import entry_exists
from .files import (
    create_directory,
    list_directory,
    open_regular_file,
    path_meta,
    read_project_file,
    temp_files_remove,
    text_start,
    write_project_file,
)
from .images import (
    IMAGE_TYPES,
    StoredImage,
    image_keep,
    image_read,
    image_type,
    images_remove,
)
from .kept import PARTS as KEPT_PARTS
from .kept import kept_remove, kept_unused
from .layout import (
    project_root,
    project_root_create,
    project_storage_remove,
    undo_dir,
)
from .leftovers import (
    project_leftovers_remove,
    scratch_leftovers_remove,
    storage_project_ids,
    storage_sweep,
)
from .locks import change_lock_open, changes_locked, removal_when_unlocked, under_changes_lock
from .paths import (
    TEMP_PREFIX,
    TEMP_SUFFIX,
    DiskFull,
    EntryExists,
    PathError,
    StorageError,
    TooLarge,
    is_temp_file,
    reported,
    resolve,
    resolve_entry,
    resolved_relative,
)
from .pdfs import pdf_keep, pdf_read, pdfs_remove
from .reading import MAX_MATCHES, read_lines, search_text
from .restores import snapshot_path_restore, snapshot_restore
from .results import (
    ResultPart,
    result_download_open,
    result_keep,
    result_read,
    results_kept,
    results_remove,
)
from .scratch import scratch_copy
from .snapshots import (
    Snapshot,
    digest,
    digests,
    snapshot_digests,
    snapshot_discard,
    snapshot_of,
    snapshot_take,
    snapshot_text,
)
from .staging_leftovers import staging_leftovers_remove
from .uploads import Incoming, file_download_open, incoming_discard, upload_place, upload_receive
from .versions import file_version, same_version
from .zip_downloads import zip_write

__all__ = [
    "IMAGE_TYPES",
    "KEPT_PARTS",
    "MAX_MATCHES",
    "TEMP_PREFIX",
    "TEMP_SUFFIX",
    "DiskFull",
    "EntryExists",
    "Incoming",
    "PathError",
    "ResultPart",
    "Snapshot",
    "StorageError",
    "StoredImage",
    "TooLarge",
    "Unpacked",
    "ZipLimits",
    "change_lock_open",
    "changes_locked",
    "create_directory",
    "delete_path",
    "digest",
    "digests",
    "entry_exists",
    "file_download_open",
    "file_version",
    "image_keep",
    "image_read",
    "image_type",
    "images_remove",
    "incoming_discard",
    "is_temp_file",
    "kept_remove",
    "kept_unused",
    "list_directory",
    "move_path",
    "open_regular_file",
    "path_meta",
    "paths_under",
    "pdf_keep",
    "pdf_read",
    "pdfs_remove",
    "project_file_read",
    "project_file_show",
    "project_files_list",
    "project_leftovers_remove",
    "project_root",
    "project_root_create",
    "project_storage_remove",
    "read_lines",
    "read_project_file",
    "removal_when_unlocked",
    "reported",
    "resolve",
    "resolve_entry",
    "resolved_relative",
    "result_download_open",
    "result_keep",
    "result_read",
    "results_kept",
    "results_remove",
    "same_version",
    "scratch_copy",
    "scratch_leftovers_remove",
    "search_text",
    "snapshot_digests",
    "snapshot_discard",
    "snapshot_of",
    "snapshot_path_restore",
    "snapshot_restore",
    "snapshot_take",
    "snapshot_text",
    "staging_leftovers_remove",
    "storage_project_ids",
    "storage_sweep",
    "temp_files_remove",
    "text_start",
    "under_changes_lock",
    "undo_dir",
    "upload_place",
    "upload_receive",
    "write_project_file",
    "zip_unpack",
    "zip_write",
]
