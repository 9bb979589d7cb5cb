"""openat2(2) through ctypes (Linux >= 5.6): open a path that the kernel keeps beneath a
directory, whatever `..`, links or renames the path meets while it is resolved."""

import contextlib
import ctypes
import os
import sys

# None: used where the kernel has it (one probe finds out); False: never (the gate walks).
ENABLED: bool | None = None

_SYS_OPENAT2 = 437  # the same on every architecture since Linux 5.6 (alpha aside)
_RESOLVE_NO_MAGICLINKS = 0x02  # no /proc/<pid>/fd/... style links
_RESOLVE_BENEATH = 0x08  # nothing above the directory, no absolute path or link
_AT_FDCWD = -100


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_syscall = None
_works: bool | None = None


def openat2_beneath(dir_fd: int, path: str, flags: int) -> int:
    """A descriptor of `path` opened with `flags`, resolved beneath `dir_fd`; OSError as the
    kernel says (EXDEV: it would leave, or is an absolute link; ELOOP; EAGAIN: a rename
    raced with `..`, try again)."""
    how = _OpenHow(flags | os.O_CLOEXEC, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    fd = _syscall(_SYS_OPENAT2, dir_fd, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


def openat2_in_use() -> bool:
    """Whether the gate uses openat2: not when ENABLED is False, nor where the kernel (or a
    seccomp filter) refuses it."""
    global _syscall, _works
    if ENABLED is False:
        return False
    if _works is None:
        _works = False
        if sys.platform == "linux":
            _syscall = ctypes.CDLL(None, use_errno=True).syscall
            _syscall.restype = ctypes.c_long
            _syscall.argtypes = [
                ctypes.c_long,
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_void_p,
                ctypes.c_size_t,
            ]
            with contextlib.suppress(OSError):
                os.close(openat2_beneath(_AT_FDCWD, ".", getattr(os, "O_PATH", 0)))
                _works = True
    return _works
