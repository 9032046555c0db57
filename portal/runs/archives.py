"""Reading an uploaded archive (zip, or tar with any compression) into files, safely: limits on
its size, its number of entries and their unpacked size; no links, devices or paths that
climb out. A bad archive is refused whole; a bad entry is refused alone, with its reason."""

from __future__ import annotations

import io
import lzma
import posixpath
import tarfile
import zipfile
import zlib
from dataclasses import dataclass

from django.conf import settings

from portal.submissions.validation import SubmissionError


# What a damaged archive raises besides the formats' own errors (a bad CRC, an encrypted entry,
# an unknown compression method, a cut stream): each was a 500 before; they are a bad archive.
STREAM_DAMAGE = (EOFError, OSError, zlib.error, lzma.LZMAError)
ZIP_DAMAGE = (zipfile.BadZipFile, RuntimeError, NotImplementedError, *STREAM_DAMAGE)


@dataclass
class Entry:
    path: str  # normalized, relative, "/"-separated
    data: bytes | None  # None: refused, see code and message
    code: str = ""
    message: str = ""


def read_archive(raw: bytes) -> list[Entry]:
    if len(raw) > settings.PKB_RUN_MAX_ARCHIVE_BYTES:
        raise SubmissionError("archive_too_large", f"The archive is {len(raw):,} bytes; the limit "
                              f"is {settings.PKB_RUN_MAX_ARCHIVE_BYTES:,}. Split it over several "
                              "requests.", status=413, field="archive")
    if zipfile.is_zipfile(io.BytesIO(raw)):
        try:
            return _checked(_zip_entries(raw))
        except ZIP_DAMAGE as exc:
            raise SubmissionError("bad_archive", f"The zip archive cannot be read: {str(exc)[:200]}",
                                  field="archive") from None
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:*") as tar:
            return _checked(_tar_entries(tar))
    except (tarfile.TarError, *STREAM_DAMAGE):
        raise SubmissionError("bad_archive", "The archive is neither a zip nor a tar file "
                              "(.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz), or it is damaged.",
                              field="archive") from None


def _zip_entries(raw: bytes) -> list[tuple[str, str, int, bytes | None]]:
    found = []
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        _check_counts(len(infos), sum(i.file_size for i in infos))
        for info in infos:
            kind = "link" if (info.external_attr >> 16) & 0o170000 == 0o120000 else "file"
            data = zf.read(info) if kind == "file" and _readable(info.file_size) else None
            found.append((info.filename, kind, info.file_size, data))
    return found


def _tar_entries(tar: tarfile.TarFile) -> list[tuple[str, str, int, bytes | None]]:
    # Header by header, each limit checked as it is passed. tar.getmembers() read every header
    # first (and decompressed every member's data to skip it): 150 KB of xz holding 2,000,000
    # empty members took a web process 39 s and 1.1 GB to refuse; 32 MiB of it, 200 times that.
    # Sizes are summed for every member whose data tarfile skips, not only regular files, and
    # directories count too (at twice the file limit), so nothing is read far past a limit.
    members, entries, declared = [], 0, 0
    for member in tar:
        entries += 1
        declared += 0 if member.isdir() else member.size
        if not member.isdir():
            members.append(member)
        _check_counts(max(len(members), entries // 2), declared)
    found = []
    for member in members:
        kind = "file" if member.isfile() else ("link" if member.issym() or member.islnk() else "special")
        reader = tar.extractfile(member) if kind == "file" and _readable(member.size) else None
        found.append((member.name, kind, member.size, reader.read() if reader else None))
    return found


def _readable(size: int) -> bool:
    return size <= settings.PKB_MAX_SOURCE_BYTES


def _check_counts(files: int, unpacked: int) -> None:
    """Before anything is unpacked: how many entries, and how big together (a tar: so far)."""
    if files > settings.PKB_RUN_MAX_ARCHIVE_FILES:
        raise SubmissionError("too_many_files", f"The archive holds {files} files or more; the limit "
                              f"is {settings.PKB_RUN_MAX_ARCHIVE_FILES}.", status=413, field="archive")
    if unpacked > settings.PKB_RUN_MAX_UNPACKED_BYTES:
        raise SubmissionError("archive_too_large", f"The archive unpacks to {unpacked:,} bytes or more; the "
                              f"limit is {settings.PKB_RUN_MAX_UNPACKED_BYTES:,}.", status=413,
                              field="archive")


def _checked(found: list[tuple[str, str, int, bytes | None]]) -> list[Entry]:
    entries = []
    for name, kind, size, data in found:
        path = posixpath.normpath(name.replace("\\", "/")).lstrip("/")
        if name.startswith("/") or path.startswith("..") or ":" in path.split("/")[0]:
            entries.append(Entry(name, None, "bad_path", "an absolute path or one that climbs out "
                                 "of the archive: not read"))
        elif kind != "file":
            entries.append(Entry(path, None, "not_a_file", f"a {kind} entry, not a regular file: "
                                 "not read"))
        elif size > settings.PKB_MAX_SOURCE_BYTES:
            entries.append(Entry(path, None, "source_too_large", f"{size:,} bytes; the limit is "
                                 f"{settings.PKB_MAX_SOURCE_BYTES:,}"))
        else:
            entries.append(Entry(path, data))
    return entries


def is_noise(path: str) -> bool:
    """Files archivers add that nobody meant to submit (macOS resource forks, caches)."""
    parts = path.split("/")
    return any(p in ("__MACOSX", "__pycache__", ".DS_Store") for p in parts) or parts[-1].startswith("._")
