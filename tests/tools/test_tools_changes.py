"""move_path, delete_path and edit_text_content: changes that stay inside the project root."""

import os
import re
from pathlib import Path

import pytest

from roject.models import Role
from roject.storage import PathError, delete_path, move_path
from rojos.models import Rojo, default_tools
from rojos.tools import diff, registry
from rojos.tools.diff import MAX_PAIRS
from tests.support.helpers import context, error_message


@pytest.fixture
def outside(tmp_path: Path, root: Path) -> Path:
    """A directory next to the root, reachable from it through the symlink `out`."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root / "out").symlink_to(outside, target_is_directory=True)
    return outside


def tree(directory: Path) -> dict[str, object]:
    """Every entry under `directory`: file bytes, "dir", or "-> target" for a symlink."""
    snapshot: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            relative = path.relative_to(directory).as_posix()
            if path.is_symlink():
                snapshot[relative] = f"-> {os.readlink(path)}"
            elif path.is_dir():
                snapshot[relative] = "dir"
            else:
                snapshot[relative] = path.read_bytes()
    return snapshot


def temp_files(directory: Path) -> list[str]:
    return [p.name for p in directory.rglob(".rojo-*.tmp")]


# move_path


async def test_move_renames_a_file(root, ctx):
    """A file moves to its new name with its content, and the old name is gone."""
    (root / "a.txt").write_text("A")
    result = await registry.execute("move_path", {"source": "a.txt", "destination": "b.txt"}, ctx)
    assert result == {"ok": True}
    assert tree(root) == {"b.txt": b"A"}


async def test_move_creates_missing_parents_of_the_destination(root, ctx):
    """Moving into directories that do not exist yet creates them."""
    (root / "a.txt").write_text("A")
    args = {"source": "a.txt", "destination": "x/y/z/a.txt"}
    assert await registry.execute("move_path", args, ctx) == {"ok": True}
    assert tree(root) == {"x": "dir", "x/y": "dir", "x/y/z": "dir", "x/y/z/a.txt": b"A"}


async def test_move_directory_takes_its_content_along(root, ctx):
    """A directory moves whole, with nested files and subdirectories."""
    (root / "src" / "sub").mkdir(parents=True)
    (root / "src" / "f.txt").write_text("F")
    (root / "src" / "sub" / "g.txt").write_text("G")
    args = {"source": "src", "destination": "dst/moved"}
    assert await registry.execute("move_path", args, ctx) == {"ok": True}
    assert tree(root) == {
        "dst": "dir",
        "dst/moved": "dir",
        "dst/moved/f.txt": b"F",
        "dst/moved/sub": "dir",
        "dst/moved/sub/g.txt": b"G",
    }


async def test_move_onto_existing_destination_needs_overwrite(root, ctx):
    """An existing destination is refused, telling the model about overwrite; nothing moves."""
    (root / "a.txt").write_text("A")
    (root / "b.txt").write_text("B")
    result = await registry.execute("move_path", {"source": "a.txt", "destination": "b.txt"}, ctx)
    assert error_message(result) == ("'b.txt' already exists; pass overwrite: true to replace it")
    assert tree(root) == {"a.txt": b"A", "b.txt": b"B"}


async def test_move_with_overwrite_replaces_a_file(root, ctx):
    """overwrite: true replaces the destination file with the source."""
    (root / "a.txt").write_text("A")
    (root / "b.txt").write_text("B")
    args = {"source": "a.txt", "destination": "b.txt", "overwrite": True}
    assert await registry.execute("move_path", args, ctx) == {"ok": True}
    assert tree(root) == {"b.txt": b"A"}


async def test_move_with_overwrite_replaces_an_empty_directory_by_a_directory(root, ctx):
    """An empty directory may give way to a directory."""
    (root / "src").mkdir()
    (root / "src" / "f.txt").write_text("F")
    (root / "dst").mkdir()
    args = {"source": "src", "destination": "dst", "overwrite": True}
    assert await registry.execute("move_path", args, ctx) == {"ok": True}
    assert tree(root) == {"dst": "dir", "dst/f.txt": b"F"}


@pytest.mark.parametrize(
    "source_is_dir", [True, False], ids=["directory-over-full-directory", "file-over-directory"]
)
async def test_move_cannot_replace_a_directory_that_would_lose_content(root, ctx, source_is_dir):
    """Even with overwrite, a non-empty directory is not replaced, nor any directory by a file."""
    if source_is_dir:
        (root / "src").mkdir()
        (root / "src" / "f.txt").write_text("F")
        (root / "dst").mkdir()
        (root / "dst" / "keep.txt").write_text("K")
    else:
        (root / "src").write_text("F")
        (root / "dst").mkdir()
    before = tree(root)
    args = {"source": "src", "destination": "dst", "overwrite": True}
    result = await registry.execute("move_path", args, ctx)
    assert error_message(result) == "'dst' is a directory that cannot be replaced by this move"
    assert tree(root) == before


@pytest.mark.parametrize(
    ("destination", "expected"),
    [
        ("a/b", "cannot move 'a' into itself"),
        ("a/b/c", "cannot move 'a' into itself"),
        ("inner/b", "cannot move 'a' into itself"),
        ("a/", "source and destination are the same path"),
    ],
)
async def test_directory_cannot_move_into_itself(root, ctx, destination, expected):
    """A directory cannot become its own descendant, also not through a symlink into it."""
    (root / "a").mkdir()
    (root / "a" / "f.txt").write_text("F")
    (root / "inner").symlink_to("a", target_is_directory=True)
    before = tree(root)
    args = {"source": "a", "destination": destination, "overwrite": True}
    result = await registry.execute("move_path", args, ctx)
    assert error_message(result) == expected
    assert tree(root) == before


@pytest.mark.parametrize("destination", ["a.txt", "./a.txt", "b/../a.txt", "a.txt/"])
async def test_move_onto_the_same_path_is_refused(root, ctx, destination):
    """Moving a path onto itself, however spelled, is an error and the file stays."""
    (root / "a.txt").write_text("A")
    (root / "b").mkdir()
    args = {"source": "a.txt", "destination": destination, "overwrite": True}
    result = await registry.execute("move_path", args, ctx)
    assert error_message(result) == "source and destination are the same path"
    assert tree(root) == {"a.txt": b"A", "b": "dir"}


async def test_move_of_missing_source_is_an_error_and_creates_nothing(root, ctx):
    """A missing source is named, and the destination's parents are not created."""
    args = {"source": "nope.txt", "destination": "new/dir/nope.txt"}
    result = await registry.execute("move_path", args, ctx)
    assert error_message(result) == "No such file or directory: 'nope.txt'"
    assert tree(root) == {}


@pytest.mark.parametrize(
    ("source", "destination"),
    [
        pytest.param("../outside/secret.txt", "stolen.txt", id="source-dotdot"),
        pytest.param("{outside}/secret.txt", "stolen.txt", id="source-absolute"),
        pytest.param("out/secret.txt", "stolen.txt", id="source-through-symlink"),
        pytest.param("a.txt", "../outside/a.txt", id="destination-dotdot"),
        pytest.param("a.txt", "{outside}/a.txt", id="destination-absolute"),
        pytest.param("a.txt", "/etc/a.txt", id="destination-etc"),
        pytest.param("a.txt", "out/a.txt", id="destination-through-symlink"),
        pytest.param("a.txt", "out/new/dir/a.txt", id="destination-new-dirs-through-symlink"),
        pytest.param("docs", "out/docs", id="directory-through-symlink"),
    ],
)
async def test_move_outside_the_root_is_refused(root, ctx, outside, source, destination):
    """Neither end of a move may leave the root; nothing moves on either side."""
    (root / "a.txt").write_text("A")
    (root / "docs").mkdir()
    (root / "docs" / "d.txt").write_text("D")
    before_root, before_outside = tree(root), tree(outside)
    args = {
        "source": source.format(outside=outside),
        "destination": destination.format(outside=outside),
        "overwrite": True,
    }
    result = await registry.execute("move_path", args, ctx)
    message = error_message(result)
    assert "outside the project root" in message or "is absolute" in message
    assert message.startswith((f"path {args['source']!r} ", f"path {args['destination']!r} "))
    assert tree(root) == before_root
    assert tree(outside) == before_outside


async def test_move_of_a_symlink_moves_the_link_not_its_target(root, ctx):
    """Renaming a link leaves the file it points to where it was."""
    (root / "target.txt").write_text("T")
    (root / "link").symlink_to("target.txt")
    args = {"source": "link", "destination": "renamed"}
    assert await registry.execute("move_path", args, ctx) == {"ok": True}
    assert tree(root) == {"target.txt": b"T", "renamed": "-> target.txt"}
    assert (root / "renamed").read_text() == "T"


@pytest.mark.parametrize(
    ("links", "source", "leaving"),
    [
        ({"out_link": "OUTSIDE/secret.txt"}, "out_link", "out_link"),
        ({"x/y/up": "../.."}, "x/y/up", "x/y/up"),
        ({"x/y/up": "../.."}, "x", "x/y/up"),
        ({"x/y/same": "../../x/y/f.txt"}, "x", "x/y/same"),
    ],
    ids=["points-outside", "climbs", "directory-holding-one", "climbs-but-inside-now"],
)
async def test_a_link_that_leads_or_could_lead_outside_is_not_moved(
    root, ctx, outside, links, source, leaving
):
    """Swapped in for a directory a read has just checked, such a link would be followed out
    of the root (another project's files are next door). Tools make no links; files may."""
    (root / "x" / "y").mkdir(parents=True)
    (root / "x" / "y" / "f.txt").write_text("F")
    for path, target in links.items():
        (root / path).symlink_to(target.replace("OUTSIDE", str(outside)))
    before = tree(root)

    result = await registry.execute("move_path", {"source": source, "destination": "evil"}, ctx)

    assert error_message(result) == (
        f"cannot move {source!r}: {leaving!r} is a link that points, or could point once "
        "moved, outside the project root"
    )
    assert tree(root) == before
    assert tree(outside) == {"secret.txt": b"secret"}


async def test_a_directory_with_links_that_stay_inside_moves_with_them(root, ctx):
    (root / "docs" / "v2").mkdir(parents=True)
    (root / "docs" / "v2" / "a.md").write_text("A")
    (root / "docs" / "current").symlink_to("v2", target_is_directory=True)
    (root / "docs" / "abs").symlink_to(root / "docs" / "v2" / "a.md")

    result = await registry.execute("move_path", {"source": "docs", "destination": "d"}, ctx)

    assert result == {"ok": True}
    assert (root / "d" / "current" / "a.md").read_text() == "A"
    assert (root / "d" / "abs").is_symlink()


async def test_move_of_a_symlink_to_a_directory_moves_the_link(root, ctx):
    """A link to a directory is moved as a link; the directory keeps its content."""
    (root / "real").mkdir()
    (root / "real" / "f.txt").write_text("F")
    (root / "alias").symlink_to("real", target_is_directory=True)
    args = {"source": "alias", "destination": "alias2"}
    assert await registry.execute("move_path", args, ctx) == {"ok": True}
    assert tree(root) == {"real": "dir", "real/f.txt": b"F", "alias2": "-> real"}


@pytest.mark.parametrize("root_path", ["", ".", "./", "a/.."])
async def test_project_root_cannot_be_moved(root, ctx, root_path):
    """The root is neither a source nor a destination of a move."""
    (root / "a").mkdir()
    (root / "f.txt").write_text("F")
    before = tree(root)
    as_source = await registry.execute(
        "move_path", {"source": root_path, "destination": "elsewhere"}, ctx
    )
    as_destination = await registry.execute(
        "move_path", {"source": "f.txt", "destination": root_path, "overwrite": True}, ctx
    )
    expected = f"path {root_path!r} does not name a file or directory"
    assert error_message(as_source) == expected
    assert error_message(as_destination) == expected
    assert tree(root) == before


def test_move_path_refuses_the_root_with_a_path_error(root):
    """The storage function itself refuses the root, before touching anything."""
    (root / "f.txt").write_text("F")
    with pytest.raises(PathError):
        move_path(root, ".", "elsewhere", overwrite=True)
    assert tree(root) == {"f.txt": b"F"}


# delete_path


async def test_delete_a_file(root, ctx):
    """A file is deleted and named in "deleted"."""
    (root / "a.txt").write_text("A")
    (root / "b.txt").write_text("B")
    result = await registry.execute("delete_path", {"path": "a.txt"}, ctx)
    assert result == {"ok": True, "deleted": ["a.txt"]}
    assert tree(root) == {"b.txt": b"B"}


async def test_delete_an_empty_directory(root, ctx):
    """An empty directory needs no recursive flag."""
    (root / "empty").mkdir()
    result = await registry.execute("delete_path", {"path": "empty"}, ctx)
    assert result == {"ok": True, "deleted": ["empty"]}
    assert tree(root) == {}


def make_docs(root: Path) -> None:
    (root / "docs" / "sub").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("A")
    (root / "docs" / "sub" / "b.md").write_text("B")


async def test_delete_a_full_directory_needs_recursive(root, ctx):
    """Without recursive, a non-empty directory is refused with its entry count; all stays."""
    make_docs(root)
    before = tree(root)
    result = await registry.execute("delete_path", {"path": "docs"}, ctx)
    assert error_message(result) == (
        "'docs' is a directory with 3 entries; "
        "pass recursive: true to delete it with everything in it"
    )
    assert tree(root) == before


async def test_delete_recursive_removes_everything_and_lists_it(root, ctx):
    """With recursive, the directory and its content go, each named relative to the root."""
    make_docs(root)
    (root / "keep.txt").write_text("K")
    result = await registry.execute("delete_path", {"path": "docs", "recursive": True}, ctx)
    assert result == {
        "ok": True,
        "deleted": ["docs/a.md", "docs/sub", "docs/sub/b.md", "docs"],
    }
    assert tree(root) == {"keep.txt": b"K"}


@pytest.mark.parametrize("root_path", ["", ".", "./", "a/..", "a/../"])
async def test_project_root_can_never_be_deleted(root, ctx, root_path):
    """However it is spelled, the root is refused, even with recursive."""
    (root / "a").mkdir()
    (root / "f.txt").write_text("F")
    result = await registry.execute("delete_path", {"path": root_path, "recursive": True}, ctx)
    assert error_message(result) == f"path {root_path!r} does not name a file or directory"
    assert tree(root) == {"a": "dir", "f.txt": b"F"}
    with pytest.raises(PathError):
        delete_path(root, root_path, recursive=True)
    assert tree(root) == {"a": "dir", "f.txt": b"F"}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("../outside/secret.txt", "is outside the project root", id="dotdot-file"),
        pytest.param("../outside", "is outside the project root", id="dotdot-directory"),
        pytest.param("..", "does not name a file or directory", id="parent"),
        pytest.param("{outside}/secret.txt", "is absolute", id="absolute"),
        pytest.param("out/secret.txt", "is outside the project root", id="through-symlink"),
    ],
)
async def test_delete_outside_the_root_is_refused(root, ctx, outside, path, expected):
    """Paths leaving the root are refused, naming the path given; nothing outside is touched."""
    before_root = tree(root)
    args = {"path": path.format(outside=outside), "recursive": True}
    result = await registry.execute("delete_path", args, ctx)
    message = error_message(result)
    assert message.startswith(f"path {args['path']!r} ")
    assert expected in message
    assert tree(outside) == {"secret.txt": b"secret"}
    assert tree(root) == before_root


@pytest.mark.parametrize("recursive", [False, True])
async def test_delete_of_symlinks_pointing_outside_removes_only_the_links(
    root, ctx, outside, recursive
):
    """Deleting a link to an outside file or directory removes the link, never the target."""
    (root / "file_link").symlink_to(outside / "secret.txt")
    for path in ("file_link", "out"):
        result = await registry.execute("delete_path", {"path": path, "recursive": recursive}, ctx)
        assert result == {"ok": True, "deleted": [path]}
    assert tree(root) == {}
    assert tree(outside) == {"secret.txt": b"secret"}


async def test_delete_of_symlink_to_inside_directory_removes_only_the_link(root, ctx):
    """A link to a directory in the root goes; the directory and its files stay."""
    make_docs(root)
    (root / "alias").symlink_to("docs", target_is_directory=True)
    result = await registry.execute("delete_path", {"path": "alias", "recursive": True}, ctx)
    assert result == {"ok": True, "deleted": ["alias"]}
    assert tree(root) == {
        "docs": "dir",
        "docs/a.md": b"A",
        "docs/sub": "dir",
        "docs/sub/b.md": b"B",
    }


async def test_delete_of_missing_path_is_an_error(root, ctx):
    """A missing path is named in the error."""
    result = await registry.execute("delete_path", {"path": "nope/gone.txt"}, ctx)
    assert error_message(result) == "No such file or directory: 'nope/gone.txt'"


def test_new_rojos_do_not_get_delete_path():
    """delete_path is off by default; every other built-in tool is on, but read_result,
    which no rojo chooses: a conversation with a kept result offers it."""
    assert "delete_path" not in default_tools()
    assert "delete_path" not in Rojo().tools
    assert set(default_tools()) == set(registry.names()) - {"delete_path", "read_result"}


async def test_delete_path_is_refused_unless_the_rojo_enables_it(root):
    """With the default tool set the call is refused; enabling it makes it work."""
    (root / "a.txt").write_text("A")
    default = context(root, role=Role.OWNER, enabled=default_tools())
    result = await registry.execute("delete_path", {"path": "a.txt"}, default)
    assert error_message(result) == "tool 'delete_path' is not enabled for this rojo"
    assert tree(root) == {"a.txt": b"A"}

    enabled = context(root, role=Role.OWNER, enabled={*default_tools(), "delete_path"})
    result = await registry.execute("delete_path", {"path": "a.txt"}, enabled)
    assert result == {"ok": True, "deleted": ["a.txt"]}
    assert tree(root) == {}


# Roles


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("move_path", {"source": "a.txt", "destination": "b.txt"}),
        ("delete_path", {"path": "a.txt"}),
        ("edit_text_content", {"path": "a.txt", "edits": [{"old_text": "A", "new_text": "B"}]}),
    ],
)
async def test_viewer_cannot_change_files(root, name, args):
    """The changing tools are marked as writes, so a viewer's call is refused untouched."""
    (root / "a.txt").write_text("A")
    result = await registry.execute(name, args, context(root, role=Role.VIEWER))
    assert error_message(result) == (
        f"tool {name!r} changes files, and your role in this project is read-only"
    )
    assert tree(root) == {"a.txt": b"A"}


# edit_text_content


def edit(old: str, new: str) -> dict:
    return {"old_text": old, "new_text": new}


async def test_edit_replaces_one_occurrence(root, ctx):
    """A single edit changes the file and answers ok with a diff."""
    (root / "notes.md").write_text("hello world\n")
    args = {"path": "notes.md", "edits": [edit("world", "there")]}
    result = await registry.execute("edit_text_content", args, ctx)
    assert result["ok"] is True
    assert (root / "notes.md").read_text() == "hello there\n"


async def test_edits_apply_in_order_on_the_result_of_the_previous(root, ctx):
    """A later edit may match text that only an earlier edit produced."""
    (root / "notes.md").write_text("one two\nend\n")
    edits = [edit("one", "three"), edit("three two", "four"), edit("end", "fin")]
    result = await registry.execute("edit_text_content", {"path": "notes.md", "edits": edits}, ctx)
    assert result["ok"] is True
    assert (root / "notes.md").read_text() == "four\nfin\n"


@pytest.mark.parametrize(
    ("content", "edits", "expected"),
    [
        pytest.param(
            "alpha beta\n",
            [edit("gamma", "x")],
            "edit 1: old_text does not occur in the file",
            id="missing",
        ),
        pytest.param(
            "beta alpha beta\n",
            [edit("beta", "x")],
            "edit 1: old_text occurs 2 times in the file",
            id="twice",
        ),
        pytest.param(
            "aaa\n", [edit("aa", "b")], "edit 1: old_text occurs 2 times in the file", id="overlap"
        ),
        pytest.param(
            "alpha beta\n",
            [edit("alpha", "ALPHA"), edit("alpha", "x")],
            "edit 2: old_text does not occur in the file",
            id="second-fails",
        ),
        pytest.param(
            "alpha beta\n",
            [edit("alpha", "beta"), edit("beta", "x")],
            "edit 2: old_text occurs 2 times in the file",
            id="second-ambiguous-after-first",
        ),
    ],
)
async def test_edit_that_does_not_match_once_writes_nothing(root, ctx, content, edits, expected):
    """Each old_text must match exactly once; otherwise the file is left completely unchanged."""
    (root / "notes.md").write_text(content)
    result = await registry.execute("edit_text_content", {"path": "notes.md", "edits": edits}, ctx)
    message = error_message(result)
    assert message.startswith(expected)
    assert message.endswith("Nothing was written.")
    assert tree(root) == {"notes.md": content.encode()}


async def test_edit_with_empty_old_text_is_refused(root, ctx):
    """An empty old_text matches everywhere and is refused."""
    (root / "notes.md").write_text("text\n")
    args = {"path": "notes.md", "edits": [edit("text", "new"), edit("", "x")]}
    result = await registry.execute("edit_text_content", args, ctx)
    assert error_message(result) == "edit 2: old_text must not be empty"
    assert tree(root) == {"notes.md": b"text\n"}


async def test_edit_answers_a_unified_diff(root, ctx):
    """The diff has a/ and b/ headers, a hunk header, context and -/+ lines."""
    (root / "docs").mkdir()
    (root / "docs" / "notes.md").write_text("one\ntwo\nthree\n")
    args = {"path": "docs/notes.md", "edits": [edit("two", "TWO")]}
    result = await registry.execute("edit_text_content", args, ctx)
    assert result == {
        "ok": True,
        "diff": (
            "--- a/docs/notes.md\n+++ b/docs/notes.md\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
        ),
    }


async def test_edit_diff_of_a_file_without_final_newline_stays_line_based(root, ctx):
    """A last line without newline is marked as in git, not glued to the next diff line."""
    (root / "notes.md").write_text("first\nhello")
    args = {"path": "notes.md", "edits": [edit("hello", "world")]}
    result = await registry.execute("edit_text_content", args, ctx)
    assert result["diff"] == (
        "--- a/notes.md\n"
        "+++ b/notes.md\n"
        "@@ -1,2 +1,2 @@\n"
        " first\n"
        "-hello\n"
        "\\ No newline at end of file\n"
        "+world\n"
        "\\ No newline at end of file\n"
    )
    assert (root / "notes.md").read_text() == "first\nworld"


async def test_edit_diff_splits_lines_only_at_newlines(root, ctx):
    """A form feed inside a line does not break the diff into extra lines."""
    (root / "notes.txt").write_text("page one\x0cpage two\nend\n")
    args = {"path": "notes.txt", "edits": [edit("end", "END")]}
    result = await registry.execute("edit_text_content", args, ctx)
    assert result["diff"] == (
        "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n page one\x0cpage two\n-end\n+END\n"
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param("café\n".encode("latin-1"), "'data.txt' is not UTF-8 text", id="latin-1"),
        pytest.param(b"text\x00more", "'data.txt' is a binary file, not text", id="binary"),
    ],
)
async def test_edit_of_non_text_file_is_refused(root, ctx, content, expected):
    """Binary and non-UTF-8 files are not edited."""
    (root / "data.txt").write_bytes(content)
    args = {"path": "data.txt", "edits": [edit("text", "x")]}
    result = await registry.execute("edit_text_content", args, ctx)
    assert error_message(result) == expected
    assert tree(root) == {"data.txt": content}


async def test_edit_of_missing_file_is_an_error_and_creates_nothing(root, ctx):
    """Editing a file that does not exist does not create it."""
    args = {"path": "nope.md", "edits": [edit("a", "b")]}
    result = await registry.execute("edit_text_content", args, ctx)
    assert error_message(result) == "No such file or directory: 'nope.md'"
    assert tree(root) == {}


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        pytest.param([{"old_text": "a"}], "missing required argument 'new_text'", id="no-new"),
        pytest.param([{"new_text": "b"}], "missing required argument 'old_text'", id="no-old"),
        pytest.param("a->b", "argument 'edits' must be of type array", id="string"),
        pytest.param({"old_text": "a", "new_text": "b"}, "must be of type array", id="object"),
        pytest.param(["a"], "argument 'edits'[0] must be of type object", id="string-item"),
        pytest.param(
            [{"old_text": "a", "new_text": 2}],
            "argument 'new_text' must be of type string",
            id="int-new",
        ),
        pytest.param(
            [{"old_text": "a", "new_text": "b", "count": 2}],
            "unexpected argument 'count' (allowed: 'old_text', 'new_text')",
            id="extra-key",
        ),
    ],
)
async def test_edit_arguments_follow_the_schema(root, ctx, edits, expected):
    """edits must be an array of {old_text, new_text} objects; anything else changes nothing."""
    (root / "notes.md").write_text("a\n")
    result = await registry.execute("edit_text_content", {"path": "notes.md", "edits": edits}, ctx)
    assert expected in error_message(result)
    assert tree(root) == {"notes.md": b"a\n"}


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("../outside/secret.txt", id="dotdot"),
        pytest.param("{outside}/secret.txt", id="absolute"),
        pytest.param("out/secret.txt", id="through-directory-symlink"),
        pytest.param("secret_link", id="through-file-symlink"),
    ],
)
async def test_edit_outside_the_root_is_refused(root, ctx, outside, path):
    """A file outside the root is neither read nor changed."""
    (root / "secret_link").symlink_to(outside / "secret.txt")
    args = {"path": path.format(outside=outside), "edits": [edit("secret", "leaked")]}
    result = await registry.execute("edit_text_content", args, ctx)
    message = error_message(result)
    assert message.startswith(f"path {args['path']!r} ")
    assert "outside the project root" in message or "is absolute" in message
    assert tree(outside) == {"secret.txt": b"secret"}


async def test_edit_is_atomic_and_keeps_the_file_mode(root, ctx):
    """The edit goes through a temporary file that does not stay behind; the mode survives."""
    (root / "run.sh").write_text("echo hi\n")
    (root / "run.sh").chmod(0o750)
    args = {"path": "run.sh", "edits": [edit("hi", "bye")]}
    assert (await registry.execute("edit_text_content", args, ctx))["ok"] is True
    assert tree(root) == {"run.sh": b"echo bye\n"}
    assert temp_files(root) == []
    assert (root / "run.sh").stat().st_mode & 0o777 == 0o750


def patched(before: str, diff: str) -> str:
    """`before` with a unified diff applied: what the diff says the change made."""
    old = before.split("\n")
    new, at = [], 0
    lines = iter(diff.split("\n")[2:])
    for line in lines:
        header = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@$", line)
        if header:
            start = int(header.group(1)) - (1 if header.group(2) != "0" else 0)
            new += old[at:start]
            at = start
        elif line.startswith(" "):
            new.append(line[1:])
            at += 1
        elif line.startswith("-"):
            at += 1
        elif line.startswith("+"):
            new.append(line[1:])
    return "\n".join(new + old[at:])


def numbered(count: int, changed_every: int = 0) -> str:
    return "".join(
        f"LINE {i}\n" if changed_every and i % changed_every == 0 else f"line {i}\n"
        for i in range(count)
    )


@pytest.mark.parametrize("max_pairs", [MAX_PAIRS, 0], ids=["compared", "one-block"])
@pytest.mark.parametrize(
    ("before", "after"),
    [
        (numbered(50), numbered(50, changed_every=7)),
        (numbered(50), numbered(50).replace("line 20\n", "")),
        (numbered(50), numbered(50).replace("line 20\n", "line 20\nnew\n")),
        ("", numbered(5)),
        (numbered(5), ""),
    ],
    ids=["changes", "removal", "insertion", "new", "emptied"],
)
def test_a_diff_applied_to_the_old_text_gives_the_new(monkeypatch, before, after, max_pairs):
    monkeypatch.setattr(diff, "MAX_PAIRS", max_pairs)
    assert patched(before, diff.unified_diff("notes.md", before, after)) == after


def test_a_diff_of_many_changed_lines_is_quick_and_cut_to_a_readable_size(monkeypatch):
    """difflib took 93 s to compare 40,000 changed lines, under the project's change lock:
    it is never asked to compare more than MAX_PAIRS pairs of lines."""
    before, after = numbered(40_000), numbered(40_000, changed_every=2)
    compared: list[int] = []
    unified = diff.difflib.unified_diff

    def counted(a, b, *args, **kwargs):
        compared.append(len(a) * len(b))
        return unified(a, b, *args, **kwargs)

    monkeypatch.setattr(diff.difflib, "unified_diff", counted)
    text = diff.unified_diff("big.txt", before, after)

    assert all(pairs <= diff.MAX_PAIRS for pairs in compared)
    assert text.startswith("--- a/big.txt\n+++ b/big.txt\n@@ -1,40000 +1,40000 @@\n-line 0\n")
    assert len(text) < diff.MAX_CHARS + 100
    assert text.endswith(" more lines\n")
