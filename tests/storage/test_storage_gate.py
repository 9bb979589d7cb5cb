"""The storage gate: resolve() keeps every model-supplied path inside the project root."""

import errno
import os
import re
import stat
from pathlib import Path, PurePosixPath

import pytest

from roject.storage import (
    PathError,
    StorageError,
    list_directory,
    openat2,
    path_meta,
    read_project_file,
    resolve,
    write_project_file,
)
from tests.support.storage_resolvers import RESOLVERS, resolver_use


@pytest.fixture(autouse=True, params=RESOLVERS)
def resolver(request, monkeypatch) -> str:
    """Every test here runs on openat2 and on the walk that replaces it."""
    return resolver_use(request.param, monkeypatch)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project root with files, inward and outward symlinks, and neighbours outside it.

    tmp_path/
      outside/secret.txt
      root_evil/x
      root/
        a/b/
        docs/readme.md
        names with spaces.txt
        données/été.md
        link_in -> a/b                      (inside)
        link_in_file -> docs/readme.md      (inside)
        link_out_file -> outside/secret.txt (absolute, outside)
        link_out_dir -> outside             (absolute, outside)
        chain1 -> chain2 -> ../outside      (relative chain that escapes)
        dangling_out -> outside/missing.txt (target does not exist)
        up -> ..
        loop -> loop
        ping -> pong -> ping
    """
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (tmp_path / "root_evil").mkdir()
    (tmp_path / "root_evil" / "x").write_text("evil")

    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "docs" / "readme.md").write_text("readme")
    (root / "names with spaces.txt").write_text("spaces")
    (root / "données").mkdir()
    (root / "données" / "été.md").write_text("été")

    (root / "link_in").symlink_to("a/b")
    (root / "link_in_file").symlink_to("docs/readme.md")
    (root / "link_out_file").symlink_to(outside / "secret.txt")
    (root / "link_out_dir").symlink_to(outside)
    (root / "chain1").symlink_to("chain2")
    (root / "chain2").symlink_to("../outside")
    (root / "dangling_out").symlink_to(outside / "missing.txt")
    (root / "up").symlink_to("..")
    (root / "loop").symlink_to("loop")
    (root / "ping").symlink_to("pong")
    (root / "pong").symlink_to("ping")
    return root


ATTACKS = [
    pytest.param("..", id="parent"),
    pytest.param("../", id="parent-trailing-slash"),
    pytest.param("../x", id="parent-file"),
    pytest.param("./../x", id="dot-then-parent"),
    pytest.param("a/../../x", id="down-then-up-past-root"),
    pytest.param("a/b/../../../x", id="deep-down-then-up-past-root"),
    pytest.param("nonexistent/../../x", id="missing-dir-then-up-past-root"),
    pytest.param("../root_evil/x", id="sibling-with-root-prefix"),
    pytest.param("../root_evil", id="sibling-dir-with-root-prefix"),
    pytest.param("/etc/passwd", id="absolute-posix"),
    pytest.param("/", id="absolute-slash"),
    pytest.param("//x", id="double-slash"),
    pytest.param("C:\\x", id="windows-drive-backslash"),
    pytest.param("C:/x", id="windows-drive-slash"),
    pytest.param("c:x", id="windows-drive-relative"),
    pytest.param("\\\\server\\share", id="unc-share"),
    pytest.param("a\\b", id="backslash-separator"),
    pytest.param("..\\x", id="backslash-parent"),
    pytest.param("x\x00y", id="nul-byte"),
    pytest.param("\x00", id="only-nul-byte"),
    pytest.param("link_out_file", id="symlink-to-outside-file"),
    pytest.param("link_out_dir", id="symlink-to-outside-dir"),
    pytest.param("link_out_dir/secret.txt", id="through-symlink-to-outside-dir"),
    pytest.param("link_out_dir/new.txt", id="new-file-through-symlink-to-outside-dir"),
    pytest.param("chain1", id="symlink-chain-escaping"),
    pytest.param("chain1/secret.txt", id="through-symlink-chain-escaping"),
    pytest.param("dangling_out", id="dangling-symlink-to-outside"),
    pytest.param("up", id="symlink-to-parent"),
    pytest.param("up/outside/secret.txt", id="through-symlink-to-parent"),
]


@pytest.mark.parametrize("relative_path", ATTACKS)
def test_attack_paths_are_refused(tree, relative_path):
    """Parent escapes, absolute and drive paths, backslashes, NUL and escaping symlinks fail."""
    with pytest.raises(PathError):
        resolve(tree, relative_path)


@pytest.mark.parametrize("relative_path", ATTACKS)
def test_refusal_message_never_reveals_server_path(tree, relative_path):
    """The message names at most what the caller sent, never where the root lives."""
    with pytest.raises(PathError) as excinfo:
        resolve(tree, relative_path)
    message = str(excinfo.value)
    assert str(tree.parent) not in message
    assert str(tree.parent.resolve()) not in message


@pytest.mark.parametrize(
    "relative_path",
    [
        pytest.param(None, id="none"),
        pytest.param(b"docs", id="bytes"),
        pytest.param(1, id="int"),
        pytest.param(["docs"], id="list"),
        pytest.param(PurePosixPath("docs"), id="pure-path"),
        pytest.param(Path("docs"), id="path"),
    ],
)
def test_non_string_paths_are_refused(tree, relative_path):
    """Only str comes in from the model; anything else is refused before it is interpreted."""
    with pytest.raises(PathError, match="must be a string"):
        resolve(tree, relative_path)


LEGITIMATE = [
    pytest.param("", ".", id="empty-is-root"),
    pytest.param(".", ".", id="dot-is-root"),
    pytest.param("./", ".", id="dot-slash-is-root"),
    pytest.param("a/..", ".", id="down-and-back-is-root"),
    pytest.param("./a", "a", id="dot-prefix"),
    pytest.param("a", "a", id="directory"),
    pytest.param("a/b", "a/b", id="nested-directory"),
    pytest.param("a/b/", "a/b", id="nested-trailing-slash"),
    pytest.param("a/./b", "a/b", id="inner-dot"),
    pytest.param("a//b", "a/b", id="double-slash-inside"),
    pytest.param("a/../docs", "docs", id="up-inside-root"),
    pytest.param("a/../b", "b", id="up-then-new-name"),
    pytest.param("docs/", "docs", id="trailing-slash"),
    pytest.param("docs/readme.md", "docs/readme.md", id="file"),
    pytest.param("names with spaces.txt", "names with spaces.txt", id="spaces"),
    pytest.param("données/été.md", "données/été.md", id="non-ascii"),
    pytest.param("link_in", "a/b", id="symlink-inside-to-dir"),
    pytest.param("link_in_file", "docs/readme.md", id="symlink-inside-to-file"),
    pytest.param("~/x", "~/x", id="tilde-is-a-plain-name"),
    pytest.param("...", "...", id="three-dots-is-a-name"),
    pytest.param("..foo", "..foo", id="dotdot-prefixed-name"),
    pytest.param("root_evil", "root_evil", id="sibling-name-inside-root"),
    pytest.param("up/root/docs", "docs", id="out-and-back-in-through-symlink"),
    pytest.param("new/not/yet/there.txt", "new/not/yet/there.txt", id="not-yet-existing"),
]


@pytest.mark.parametrize(("relative_path", "expected"), LEGITIMATE)
def test_legitimate_paths_resolve_inside_root(tree, relative_path, expected):
    """Ordinary relative paths are allowed and land where a POSIX shell would put them."""
    assert resolve(tree, relative_path) == tree.resolve() / expected


def test_root_reached_through_a_symlink_still_confines(tree, tmp_path):
    """A root given via a symlink is compared on its real location."""
    alias = tmp_path / "alias"
    alias.symlink_to(tree)
    assert resolve(alias, "docs/readme.md") == tree.resolve() / "docs" / "readme.md"
    with pytest.raises(PathError):
        resolve(alias, "../outside/secret.txt")


def test_symlink_swapped_to_point_outside_is_refused(tree, tmp_path):
    """The check follows the link as it is now, not as it was when created."""
    assert resolve(tree, "link_in") == tree.resolve() / "a" / "b"
    os.remove(tree / "link_in")
    (tree / "link_in").symlink_to(tmp_path / "outside")
    with pytest.raises(PathError):
        resolve(tree, "link_in")


@pytest.mark.parametrize("operation", [path_meta, read_project_file], ids=lambda f: f.__name__)
@pytest.mark.parametrize("relative_path", ["loop", "loop/x", "ping"])
def test_symlink_loops_fail_as_storage_errors_without_server_path(tree, operation, relative_path):
    """A symlink loop is an ordinary refusal, not a crash that names the server path."""
    with pytest.raises(StorageError) as excinfo:
        operation(tree, relative_path)
    assert str(tree.parent) not in str(excinfo.value)


def test_a_path_that_changes_while_it_is_resolved_is_a_path_error(tmp_path, monkeypatch):
    """A component moved mid-resolve makes realpath fail (EINVAL): the caller gets a PathError
    naming the relative path, which the API answers as 400, not a 500 with a server path."""
    real_resolve = Path.resolve

    def racing(self, strict=False):
        if self.name == "moving":
            raise OSError(errno.EINVAL, "Invalid argument", str(self))
        return real_resolve(self, strict)

    monkeypatch.setattr(Path, "resolve", racing)

    with pytest.raises(PathError) as raised:
        resolve(tmp_path, "moving")

    assert str(raised.value) == "path 'moving' cannot be resolved: Invalid argument"


# The operations: resolved and done on the same descriptors (roject.storage.beneath)


def test_the_resolver_in_use_is_the_one_asked_for(tree, resolver, monkeypatch):
    """The tests run twice for real: openat2 is called in one run and never in the other."""
    calls = []
    beneath = openat2.openat2_beneath

    def counting(*args):
        calls.append(args)
        return beneath(*args)

    monkeypatch.setattr(openat2, "openat2_beneath", counting)
    assert read_project_file(tree, "docs/readme.md") == "readme"
    assert bool(calls) is (resolver == "openat2")


OPERATED = [
    param
    for param in LEGITIMATE
    if param.id not in ("out-and-back-in-through-symlink", "not-yet-existing")
]


@pytest.mark.parametrize(("relative_path", "expected"), OPERATED)
def test_operations_reach_what_resolve_names(tree, relative_path, expected):
    """Every spelling resolve() allows leads the operations to the same file or directory
    (or to the same absence of one)."""
    if not (tree / expected).exists():
        with pytest.raises(StorageError, match="No such file or directory"):
            path_meta(tree, relative_path)
        return
    st = os.stat(tree / expected)
    meta = path_meta(tree, relative_path)
    assert (meta["type"] == "directory") is stat.S_ISDIR(st.st_mode)
    assert meta["size"] == st.st_size


def test_an_absolute_link_into_the_root_is_followed(tree):
    """openat2 refuses every absolute link; the walk follows one whose target is inside."""
    (tree / "abs_in").symlink_to(tree / "docs" / "readme.md")
    (tree / "abs_dir").symlink_to(tree / "docs")
    assert read_project_file(tree, "abs_in") == "readme"
    write_project_file(tree, "abs_dir/new.md", "new")
    assert (tree / "docs" / "new.md").read_text() == "new"


def test_a_path_that_leaves_the_root_and_comes_back_is_refused(tree):
    """Resolution never leaves the root, even on the way: outside, names can change."""
    message = "path 'up/root/docs/readme.md' is outside the project root"
    with pytest.raises(PathError, match=re.escape(message)):
        read_project_file(tree, "up/root/docs/readme.md")


@pytest.mark.parametrize("relative_path", ATTACKS)
def test_attack_paths_neither_read_nor_write_anything(tree, relative_path):
    """Each attack is a StorageError naming no server path; nothing outside is made."""
    before = sorted(p.name for p in tree.parent.iterdir())
    for operation in (read_project_file, path_meta, list_directory):
        with pytest.raises(StorageError) as refused:
            operation(tree, relative_path)
        assert str(tree.parent) not in str(refused.value)
    with pytest.raises(StorageError):
        write_project_file(tree, relative_path, "pwned")
    assert sorted(p.name for p in tree.parent.iterdir()) == before
    assert (tree.parent / "outside" / "secret.txt").read_text() == "secret"


def test_paths_over_the_length_or_depth_limit_are_refused_with_a_clear_error(tree):
    """A path of more than 64 names or 1024 characters is a PathError saying which limit,
    for reads and writes alike; one at the limits is fine."""
    deep, long = "a/" * 65 + "f.txt", "d/" + "x" * 1030
    cases = (
        (deep, "66 names deep, over the limit of 64"),
        (long, "1,032 characters long, over the limit of 1,024"),
    )
    for relative_path, said in cases:
        for operation in (read_project_file, path_meta, list_directory):
            with pytest.raises(PathError, match=said):
                operation(tree, relative_path)
        with pytest.raises(PathError, match=said):
            write_project_file(tree, relative_path, "x")
    write_project_file(tree, "n/" * 63 + "f.txt", "ok")
    assert read_project_file(tree, "n/" * 63 + "f.txt") == "ok"
