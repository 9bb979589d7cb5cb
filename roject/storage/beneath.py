"""Paths opened beneath a project root on directory descriptors, so that no swap redirects them.

A path is resolved from the root's descriptor and the operation then acts on what that
resolution opened: a descriptor, or a name in a directory held open (`dir_fd`), never a path
looked up again. Where the kernel has openat2(2) (Linux >= 5.6) the kernel resolves it with
RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS: no `..`, absolute link or link pointing out can take
it out of the root, whatever changes meanwhile. Elsewhere, and for what openat2 refuses but
the gate allows (an absolute link whose target is inside the root), the path is walked one
component at a time, each opened with O_NOFOLLOW relative to the last, each link read and
followed by hand, `..` going back to the directory the walk came from, never above the root.
"""

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from . import openat2
from .paths import PathError, check_form, link_read, reported

_MAX_LINKS = 40  # what Linux follows in one resolution before ELOOP
_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY
DIRECTORY_MODE, FILE_MODE = 0o755, 0o644


class _Outside(Exception):
    """The path leads out of the root."""


class _Loop(Exception):
    """More links than a resolution follows."""


def _parts(relative: str) -> list[str]:
    """The components still to walk, the next one last."""
    return [part for part in reversed(relative.split("/")) if part not in ("", ".")]


@dataclass
class At:
    """A name in a directory held open: what an operation on an entry acts on."""

    dir_fd: int
    name: str

    def lstat(self) -> os.stat_result | None:
        """The entry itself (a link is not followed); None when nothing is there."""
        try:
            return os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def close(self) -> None:
        os.close(self.dir_fd)

    def __enter__(self) -> "At":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Root:
    """A project root held open: every path below it is resolved from this descriptor.

    Errors: PathError for a path that leads out of the root or into a link loop (naming the
    `label`, the path the caller gave), OSError for the rest (the caller reports it).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        # Never a link itself (a tampered backup's `root` to `/`); one above is the admin's.
        self.fd = os.open(self.path, _DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
        self._real: str | None = None

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> "Root":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self, relative: str, flags: int = _O_PATH, *, label: str | None = None) -> int:
        """A descriptor, opened with `flags`, of what `relative` leads to, links followed."""
        check_form(relative)
        try:
            return self._open(relative, flags)
        except _Outside:
            raise PathError(f"path {label or relative!r} is outside the project root") from None
        except _Loop:
            raise PathError(f"path {label or relative!r} runs into a symlink loop") from None

    def open_dir(self, relative: str, *, label: str | None = None) -> int:
        return self.open(relative, _DIRECTORY, label=label)

    def _open(self, relative: str, flags: int) -> int:
        if openat2.openat2_in_use():
            for _ in range(8):
                try:
                    return openat2.openat2_beneath(self.fd, relative or ".", flags)
                except OSError as exc:
                    if exc.errno == errno.EAGAIN:  # a rename raced with `..`: try again
                        continue
                    # Refused (EXDEV: out of the root, or an absolute link; ELOOP): the walk
                    # says whether it is allowed, and why not.
                    if exc.errno not in (errno.EXDEV, errno.ELOOP):
                        raise
                    break
        return self._walk(relative, flags)

    def _walk(self, relative: str, flags: int) -> int:
        if relative.endswith("/"):
            flags |= os.O_DIRECTORY
        parts, stack, links = _parts(relative), [self.fd], 0
        try:
            while parts:
                name = parts.pop()
                if name == "..":
                    if len(stack) == 1:
                        raise _Outside
                    os.close(stack.pop())
                    continue
                fd = self._step(stack[-1], name, flags if not parts else None)
                if fd is not None:
                    if not parts:
                        return fd
                    stack.append(fd)
                    continue
                links += 1
                if links > _MAX_LINKS:
                    raise _Loop
                target = link_read(stack[-1], name)  # None: no longer a link, step again
                if target is not None and target.startswith("/"):
                    target = self._inside(target)
                    for fd in stack[1:]:
                        os.close(fd)
                    del stack[1:]
                parts.extend(_parts(target) if target is not None else [name])
            return os.open(".", flags | os.O_CLOEXEC, dir_fd=stack[-1])
        finally:
            for fd in stack[1:]:
                os.close(fd)

    @staticmethod
    def _step(dir_fd: int, name: str, flags: int | None) -> int | None:
        """Open one component, never following it; None when it is a link to follow.

        `flags` None: a directory on the way; else the last component, opened with them.
        """
        final = flags is not None
        how = (flags if final else _O_PATH | os.O_DIRECTORY) | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, how, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if not stat.S_ISLNK(st.st_mode):
                raise
            return None
        if final and (how & _O_PATH) == _O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode):
            os.close(fd)  # O_PATH | O_NOFOLLOW opens a link itself
            return None
        return fd

    def _inside(self, target: str) -> str:
        """An absolute link's target as a path from the root, if it names something in it."""
        if self._real is None:
            self._real = os.path.realpath(self.path)
        if target == self._real or target.startswith(self._real.rstrip("/") + "/"):
            return target[len(self._real) :]
        raise _Outside

    def lookup(self, relative: str, *, label: str | None = None) -> At | None:
        """The entry a path names (a last link not followed); None when its directory is not
        there. The root itself is not an entry (PathError)."""
        try:
            return self.entry(relative, label=label)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def entry(self, relative: str, *, make_parents: bool = False, label: str | None = None) -> At:
        """The entry a path names, for operations on names (move, delete): a last link is
        the entry itself, never followed. Its directory is opened (made, with `make_parents`)."""
        check_form(relative)
        pure = PurePosixPath(relative.rstrip("/"))
        if pure.name in ("", ".", ".."):
            raise PathError(f"path {label or relative!r} does not name a file or directory")
        parent = str(pure.parent)
        if make_parents:
            return At(self.make_dirs(parent, label=label or relative), pure.name)
        return At(self.open_dir(parent, label=label or relative), pure.name)

    def final(self, relative: str, *, make_parents: bool = False) -> At | None:
        """The entry a path finally names, following a last link that stays inside, for
        operations on contents (a write through a link writes its target). None when the
        path names a directory itself (the root, or one reached by `..`)."""
        path = relative
        for _ in range(_MAX_LINKS + 1):
            pure = PurePosixPath(path.rstrip("/"))
            if pure.name in ("", ".", ".."):
                return None
            at = self.entry(path, make_parents=make_parents, label=relative)
            st = at.lstat()
            if st is None or not stat.S_ISLNK(st.st_mode):
                return at
            with at:
                target = link_read(at.dir_fd, at.name)
            if target is None:  # no longer a link (swapped meanwhile): look again
                continue
            if target.startswith("/"):
                try:
                    target = self._inside(target)
                except _Outside:
                    raise PathError(f"path {relative!r} is outside the project root") from None
                path = target.lstrip("/")  # from the root: "" names the root itself
            else:
                path = f"{pure.parent}/{target}"
        raise PathError(f"path {relative!r} runs into a symlink loop")

    def make_dirs(self, relative: str, *, label: str | None = None) -> int:
        """Open a directory, making it and its missing parents (0755, whatever the umask)."""
        return self.make_missing(*self.existing_part(relative, label=label or relative))

    @staticmethod
    def make_missing(fd: int, missing: list[str]) -> int:
        """Make the directories `missing` one in the other in the open directory `fd`, which
        is given over (closed, or returned when nothing is missing); returns the last one."""
        try:
            if ".." in missing:  # up through a directory not made yet: refused, not guessed
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
            for name in missing:
                made = True
                try:
                    os.mkdir(name, DIRECTORY_MODE, dir_fd=fd)
                except FileExistsError:
                    made = False  # made meanwhile; or a link, which O_NOFOLLOW refuses
                child = os.open(name, _DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = child
                if made:
                    os.fchmod(fd, DIRECTORY_MODE)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def existing_part(self, relative: str, *, label: str | None = None) -> tuple[int, list[str]]:
        """The deepest directory of the path that exists, open, and the names below it that
        do not (to make with make_missing)."""
        label = label or relative
        with contextlib.suppress(FileNotFoundError):
            return self.open_dir(relative, label=label), []
        names = list(reversed(_parts(relative)))
        fd = os.dup(self.fd)
        for depth in range(1, len(names) + 1):
            try:
                deeper = self.open_dir("/".join(names[:depth]), label=label)
            except FileNotFoundError:
                return fd, names[depth - 1 :]
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
            fd = deeper
        return fd, []

    def contains(self, fd: int, directory: os.stat_result) -> bool:
        """Whether the directory open at `fd` is `directory` or somewhere under it."""
        top = os.fstat(self.fd)
        here = os.dup(fd)
        try:
            for _ in range(4096):
                st = os.fstat(here)
                if os.path.samestat(st, directory):
                    return True
                if os.path.samestat(st, top):
                    return False
                up = os.open("..", _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=here)
                os.close(here)
                here = up
                if os.path.samestat(os.fstat(here), st):  # "/" is its own parent
                    return False
            return False
        finally:
            os.close(here)


@contextlib.contextmanager
def opened(project_root: Path, relative: str) -> Iterator[Root]:
    """The root held open for one operation on `relative`, which names it in every error."""
    check_form(relative)
    with reported(relative), Root(project_root) as root:
        yield root
