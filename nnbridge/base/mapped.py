"""Read-only arrays over memory maps of files, and writing such an array out file to file.

Reading a 2 GB weight through a map costs nothing until a page is touched, but writing it back
out through the map makes every page of it resident in the writer. An array that is an untouched
view of a mapped file's bytes is therefore copied by the kernel from that file instead
(``os.copy_file_range``), and a hole of a sparse file stays a hole in the copy (as ``cp`` does):
converting a model whose weights are external data never holds them in memory.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
from pathlib import Path
from typing import BinaryIO

import numpy as np

#: bytes per fallback read/write when the kernel cannot copy between the two files
_CHUNK = 1 << 20
#: errors by which copy_file_range says it cannot copy between these files (not that the copy failed)
_UNSUPPORTED = frozenset({errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM, errno.EBADF})


class FileMap(mmap.mmap):
    """A read-only map of a whole file that knows which file, and which version of it, it maps."""

    path: Path
    identity: tuple[int, int, int, int]
    address: int


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def map_file(path: Path) -> FileMap:
    """``path`` mapped read-only (it must not be empty)."""
    with open(path, "rb") as fh:
        mapped = FileMap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        mapped.path, mapped.identity = Path(path), _identity(os.fstat(fh.fileno()))
    mapped.address = np.frombuffer(mapped, np.uint8, 1).ctypes.data
    return mapped


def file_region(array: np.ndarray) -> tuple[FileMap, int] | None:
    """The map and byte offset whose bytes ``array``'s are, in order; ``None`` when ``array`` is
    not a C-contiguous view of a ``FileMap`` (a computed or reordered array)."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    if not isinstance(base, FileMap) or not array.flags.c_contiguous:
        return None
    offset = array.ctypes.data - base.address
    return (base, offset) if 0 <= offset and offset + array.nbytes <= len(base) else None


def write_array(fh: BinaryIO, array: np.ndarray) -> None:
    """Write ``array``'s bytes in C order at ``fh``'s position, file to file when they are a
    mapped file's region that has not changed since it was mapped (``file_region``)."""
    region = file_region(array) if array.nbytes else None
    if region is None or not _copy_region(region[0], region[1], array.nbytes, fh):
        fh.write(np.ascontiguousarray(array).reshape(-1).view(np.uint8).data)


def _copy_region(mapped: FileMap, offset: int, length: int, fh: BinaryIO) -> bool:
    """Copy ``length`` bytes at ``offset`` of ``mapped``'s file to ``fh``'s position, keeping the
    source's holes when ``fh`` is at its file's end; ``False`` (nothing written) when the file on
    disk is no longer the one mapped, or ``fh`` has no file descriptor or appends."""
    try:
        dst = fh.fileno()
    except (AttributeError, OSError):
        return False
    if fcntl.fcntl(dst, fcntl.F_GETFL) & os.O_APPEND:  # positioned writes would land at the end
        return False
    with open(mapped.path, "rb") as src_fh:
        src = src_fh.fileno()
        if _identity(os.fstat(src)) != mapped.identity:
            return False
        fh.flush()
        start = fh.tell()
        appending = os.fstat(dst).st_size == start
        for data, end in _extents(src, offset, offset + length) if appending else [(offset, offset + length)]:
            _copy(src, data, dst, start + data - offset, end - data)
    if os.fstat(dst).st_size < start + length:  # the region ends in a hole
        os.ftruncate(dst, start + length)
    fh.seek(start + length)
    return True


def _extents(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The (start, end) byte ranges of ``fd`` between ``start`` and ``end`` that hold data, the
    holes left out; the whole range where the file system cannot tell."""
    if not hasattr(os, "SEEK_DATA"):
        return [(start, end)]
    extents, at = [], start
    while at < end:
        try:
            data = os.lseek(fd, at, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole from here to the end of the file
                break
            return [(start, end)]
        if data >= end:
            break
        hole = min(os.lseek(fd, data, os.SEEK_HOLE), end)
        extents.append((data, hole))
        at = hole
    return extents


def _copy(src: int, src_at: int, dst: int, dst_at: int, count: int) -> None:
    """``count`` bytes from ``src`` at ``src_at`` to ``dst`` at ``dst_at``: in the kernel where it
    can, else a chunk at a time (never the whole region in memory)."""
    while count > 0 and hasattr(os, "copy_file_range"):
        try:
            done = os.copy_file_range(src, dst, min(count, 1 << 30), src_at, dst_at)
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
            break
        if done == 0:
            raise OSError(errno.EIO, "the source file ended before the mapped region")
        src_at, dst_at, count = src_at + done, dst_at + done, count - done
    while count > 0:
        chunk = os.pread(src, min(count, _CHUNK), src_at)
        if not chunk:
            raise OSError(errno.EIO, "the source file ended before the mapped region")
        os.pwrite(dst, chunk, dst_at)
        src_at, dst_at, count = src_at + len(chunk), dst_at + len(chunk), count - len(chunk)
