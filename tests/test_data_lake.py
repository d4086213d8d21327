"""The data root as scripts see it: a safe view with archives expanded in place, on real
files, links, FIFOs and archives written to tmp_path."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from dsstar.data.lake import ArchiveLimits
from dsstar.data.lake.root import DataRoot
from dsstar.data.lake.walk import Skipped, walk
from dsstar.data.sources import DataSource
from dsstar.errors import DataError

SECRET = "s3cr3t-value-outside-the-root"


def source(root: Path, tmp_path: Path, **limits) -> DataSource:
    return DataSource(str(root), tmp_path / "cache", ArchiveLimits(**limits))


def listing(src: DataSource) -> dict[str, str]:
    return {f.path: f.format for f in src.files()}


def reasons(src: DataSource) -> dict[str, str]:
    return {s.path: s.reason for s in src.skipped}


def view_text(src: DataSource) -> str:
    return "".join(p.read_text(errors="replace") for p in src.mount_dir.rglob("*") if p.is_file())


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    root = tmp_path / "lake"
    (root / "sub").mkdir(parents=True)
    (root / "a.csv").write_text("x,y\n1,2\n")
    (root / "sub" / "b.json").write_text('{"k": 1}')
    (root / ".hidden").write_text("not data")
    outside = tmp_path / "secret.txt"
    outside.write_text(SECRET)
    (root / "leak.txt").symlink_to(outside)
    (root / "leakdir").symlink_to(tmp_path)
    (root / "inside.csv").symlink_to(root / "a.csv")
    (root / "broken").symlink_to(root / "missing")
    os.mkfifo(root / "pipe")
    return root


@pytest.mark.timeout(60)  # a FIFO that is opened would block forever
def test_view_keeps_only_regular_files_inside_the_root(lake, tmp_path):
    src = source(lake, tmp_path)
    assert listing(src) == {"a.csv": "csv", "inside.csv": "csv", "sub/b.json": "json"}
    why = reasons(src)
    assert why["leak.txt"] == "a symbolic link that leads outside the data root"
    assert why["leakdir"] == "a symbolic link that leads outside the data root"
    assert why["broken"] == "a broken symbolic link"
    assert why["pipe"] == "a FIFO (named pipe): not opened"
    assert SECRET not in view_text(src)
    assert not any(p.is_symlink() for p in src.mount_dir.rglob("*"))
    assert (src.mount_dir / "inside.csv").read_text() == "x,y\n1,2\n"


def test_a_root_renamed_over_and_over_loses_nothing_and_lets_nothing_in(tmp_path):
    # A walk compares where each entry lies with where the root lies now; a root renamed
    # between the two readings must not make an entry inside look as if it were outside.
    lake = tmp_path / "lake"
    (lake / "sub").mkdir(parents=True)
    (lake / "a.csv").write_text("x,y\n1,2\n")
    (lake / "sub" / "b.json").write_text('{"k": 1}')
    (tmp_path / "secret.txt").write_text(SECRET)
    (lake / "inside.csv").symlink_to("a.csv")  # relative links: the same whatever the name
    (lake / "leak.txt").symlink_to("../secret.txt")
    # The attacker is another process, renaming the root every half millisecond.
    renames = f"""
import os, time
while True:
    os.rename({str(lake)!r}, {str(tmp_path / "moved")!r})
    time.sleep(0.0005)
    os.rename({str(tmp_path / "moved")!r}, {str(lake)!r})
    time.sleep(0.0005)
"""
    root = DataRoot.open(str(lake))
    renamer = subprocess.Popen([sys.executable, "-c", renames])
    try:
        time.sleep(0.2)  # its interpreter started
        assert renamer.poll() is None
        listings = []
        for _ in range(5000):
            skipped: list[Skipped] = []
            listings.append(([relative for relative, fd in walk(root, skipped) if not os.close(fd)],
                             [s.path for s in skipped]))  # fmt: skip
    finally:
        renamer.kill()
        renamer.wait()
        root.close()
    wrong = [
        listing
        for listing in listings
        if listing != (["a.csv", "inside.csv", "sub/b.json"], ["leak.txt"])
    ]
    assert wrong == [], f"{len(wrong)} of {len(listings)} walks wrong, e.g. {wrong[:3]}"


def test_regular_files_are_hard_linked_not_copied(lake, tmp_path):
    src = source(lake, tmp_path)
    assert (src.mount_dir / "a.csv").stat().st_ino == (lake / "a.csv").stat().st_ino


def test_view_copies_when_hard_links_cannot_be_made(lake, tmp_path):
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.fail("this test needs /dev/shm on another device than tmp_path")
    cache = shm / f"dsstar-test-{os.getpid()}"
    try:
        src = DataSource(str(lake), cache)
        assert (src.mount_dir / "a.csv").read_text() == "x,y\n1,2\n"
        assert (src.mount_dir / "a.csv").stat().st_ino != (lake / "a.csv").stat().st_ino
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def test_socket_is_skipped(tmp_path):
    root = tmp_path / "s"
    root.mkdir()
    (root / "ok.txt").write_text("fine")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "sock"))
    try:
        src = source(root, tmp_path)
        assert listing(src) == {"ok.txt": "text"}
        assert reasons(src) == {"sock": "a socket: not opened"}
    finally:
        server.close()


def test_a_root_of_only_unsafe_entries_is_a_data_error(tmp_path):
    root = tmp_path / "bad"
    root.mkdir()
    os.mkfifo(root / "pipe")
    with pytest.raises(DataError) as raised:
        source(root, tmp_path).files()
    [reason] = reasons(source(root, tmp_path)).values()
    assert str(raised.value) == f"no files found under {root}: skipped pipe ({reason})"
    for n in range(7):
        os.mkfifo(root / f"pipe{n}")
    with pytest.raises(DataError, match=r": skipped pipe \(.+\), pipe0 \(.+ and 3 more$"):
        source(root, tmp_path).files()


def test_single_file_root_shows_that_file_alone(lake, tmp_path):
    src = source(lake / "a.csv", tmp_path)
    assert listing(src) == {"a.csv": "csv"}
    assert sorted(p.name for p in src.mount_dir.iterdir()) == ["a.csv"]


def test_close_removes_the_view_but_not_the_data(lake, tmp_path):
    src = source(lake, tmp_path)
    view = src.mount_dir
    src.close()
    assert not view.exists() and (lake / "a.csv").exists()


# -- archives -------------------------------------------------------------------------------


def tar_bytes(members: dict[str, bytes], mode: str = "w") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


CSV = b"city,temp\nOslo,3\nRome,18\n"


def test_every_archive_kind_is_expanded_in_place(tmp_path):
    root = tmp_path / "arch"
    root.mkdir()
    (root / "bundle.zip").write_bytes(zip_bytes({"inner/table.csv": CSV, "notes.md": b"# Hi\n"}))
    (root / "plain.tar").write_bytes(tar_bytes({"t.csv": CSV}))
    (root / "pack.tar.gz").write_bytes(tar_bytes({"deep/g.csv": CSV}, "w:gz"))
    (root / "pack.tgz").write_bytes(tar_bytes({"h.csv": CSV}, "w:gz"))
    (root / "metrics.csv.gz").write_bytes(gzip.compress(CSV))
    (root / "m.csv.bz2").write_bytes(bz2.compress(CSV))
    (root / "m.json.xz").write_bytes(lzma.compress(b'{"a": [1, 2]}'))
    src = source(root, tmp_path)
    assert listing(src) == {
        "bundle.zip/inner/table.csv": "csv",
        "bundle.zip/notes.md": "markdown",
        "m.csv.bz2/m.csv": "csv",
        "m.json.xz/m.json": "json",
        "metrics.csv.gz/metrics.csv": "csv",
        "pack.tar.gz/deep/g.csv": "csv",
        "pack.tgz/h.csv": "csv",
        "plain.tar/t.csv": "csv",
    }
    assert (src.mount_dir / "metrics.csv.gz/metrics.csv").read_bytes() == CSV
    assert src.skipped == []


def test_nested_archives_one_level_then_left_packed(tmp_path):
    root = tmp_path / "nest"
    root.mkdir()
    inner = zip_bytes({"x.csv": CSV})
    (root / "outer.tar").write_bytes(
        tar_bytes({"in.zip": inner, "gz/y.csv.gz": gzip.compress(CSV)})
    )
    assert listing(source(root, tmp_path)) == {
        "outer.tar/gz/y.csv.gz/y.csv": "csv",
        "outer.tar/in.zip/x.csv": "csv",
    }
    deeper = tmp_path / "deeper"
    deeper.mkdir()
    (deeper / "a.zip").write_bytes(zip_bytes({"b.zip": zip_bytes({"c.zip": inner})}))
    assert listing(source(deeper, tmp_path)) == {"a.zip/b.zip/c.zip": "archive"}


def test_unsafe_members_are_rejected_with_reasons(tmp_path):
    root = tmp_path / "unsafe"
    root.mkdir()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tf:
        for name in ("ok.csv", "../escape.csv", "/abs.csv"):
            info = tarfile.TarInfo(name)
            info.size = len(CSV)
            tf.addfile(info, io.BytesIO(CSV))
        link = tarfile.TarInfo("link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)
        device = tarfile.TarInfo("dev")
        device.type = tarfile.CHRTYPE
        tf.addfile(device)
    (root / "t.tar").write_bytes(buffer.getvalue())
    (root / "z.zip").write_bytes(zip_bytes({"../../up.csv": CSV, "fine.csv": CSV}))
    src = source(root, tmp_path)
    assert listing(src) == {"t.tar/ok.csv": "csv", "z.zip/fine.csv": "csv"}
    why = reasons(src)
    assert why["t.tar/../escape.csv"].startswith("unsafe member path")
    assert why["t.tar//abs.csv"].startswith("unsafe member path")
    assert why["t.tar/link"] == "a link inside the archive (not followed)"
    assert why["t.tar/dev"] == "a device, FIFO or special member"
    assert why["z.zip/../../up.csv"].startswith("unsafe member path")
    assert not (tmp_path / "escape.csv").exists() and not (tmp_path / "up.csv").exists()


def test_bombs_stop_at_the_byte_and_member_bounds(tmp_path):
    root = tmp_path / "bombs"
    root.mkdir()
    (root / "big.gz").write_bytes(gzip.compress(b"0" * 2_000_000))
    (root / "many.zip").write_bytes(zip_bytes({f"m{i}.txt": b"x" for i in range(50)}))
    (root / "ok.txt").write_text("fine")
    src = source(root, tmp_path, max_bytes=1_000_000, max_members=20)
    assert listing(src) == {"ok.txt": "text"}
    why = reasons(src)
    assert why["big.gz"] == (
        "archive not expanded: expands to more than 1,000,000 bytes (DSSTAR_ARCHIVE_MAX_BYTES)"
    )
    assert why["many.zip"] == (
        "archive not expanded: more than 20 members (DSSTAR_ARCHIVE_MAX_MEMBERS)"
    )


def a_gzip_whose_bytes_read_as_a_tar_header(data: bytes) -> bytes:
    """`data` gzipped with a timestamp under which the raw file also parses as a plain tar
    header (about one timestamp in 250 does, for long runs of one byte)."""
    blob = bytearray(gzip.compress(data, mtime=0))
    for mtime in range(1_800_000_000, 1_800_100_000):
        blob[4:8] = mtime.to_bytes(4, "little")  # the header's MTIME field; no header CRC
        try:
            tarfile.TarInfo.frombuf(bytes(blob[:512]), "utf-8", "surrogateescape")
        except tarfile.TarError:
            continue
        return bytes(blob)
    raise AssertionError("no such timestamp")


def test_a_gzip_stream_is_never_read_as_a_plain_tar(tmp_path):
    # The bombs test failed once: its big.gz, gzipped at that second, was listed as a tar
    # holding a member named by the gzip header's bytes, and its byte bound went unchecked.
    root = tmp_path / "streams"
    root.mkdir()
    payload = b"0" * 2_000_000
    (root / "big.gz").write_bytes(a_gzip_whose_bytes_read_as_a_tar_header(payload))
    (root / "ok.txt").write_text("fine")
    assert listing(source(root, tmp_path)) == {"big.gz/big": "text", "ok.txt": "text"}
    assert (source(root, tmp_path).mount_dir / "big.gz" / "big").read_bytes() == payload
    bounded = source(root, tmp_path / "bounded", max_bytes=1_000_000)
    assert listing(bounded) == {"ok.txt": "text"}
    assert reasons(bounded)["big.gz"].startswith("archive not expanded: expands to more than")


def test_damaged_archive_is_skipped_with_a_reason(tmp_path):
    root = tmp_path / "dmg"
    root.mkdir()
    (root / "bad.gz").write_bytes(gzip.compress(CSV)[:15])
    (root / "ok.txt").write_text("fine")
    src = source(root, tmp_path)
    assert listing(src) == {"ok.txt": "text"}
    assert reasons(src)["bad.gz"].startswith("archive not expanded: damaged or unreadable")


def test_a_damaged_workbook_is_said_to_be_an_unreadable_workbook_not_an_archive(tmp_path):
    root = tmp_path / "books"
    root.mkdir()
    book = io.BytesIO()
    with zipfile.ZipFile(book, "w") as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("xl/workbook.xml", "<workbook/>" * 100)
    (root / "sales.xlsx").write_bytes(book.getvalue()[:60])  # cut short: its directory is gone
    (root / "ok.txt").write_text("fine")
    src = source(root, tmp_path)
    assert listing(src) == {"ok.txt": "text"}
    why = reasons(src)["sales.xlsx"]
    assert why.startswith("the workbook is unreadable (BadZipFile"), why
    assert "archive" not in why


def test_expansions_are_cached_by_content(tmp_path):
    root = tmp_path / "cached"
    root.mkdir()
    (root / "bundle.zip").write_bytes(zip_bytes({"t.csv": CSV}))
    first = source(root, tmp_path)
    first.files()
    cache = tmp_path / "cache" / "archives"
    (expansion,) = [p for p in cache.iterdir() if p.is_dir()]
    member = expansion / "tree" / "t.csv"
    inode = member.stat().st_ino
    second = source(root, tmp_path)
    assert listing(second) == {"bundle.zip/t.csv": "csv"}
    assert [p for p in cache.iterdir() if p.is_dir()] == [expansion]
    assert member.stat().st_ino == inode  # linked from the cache, not unpacked again
    assert (second.mount_dir / "bundle.zip/t.csv").stat().st_ino == inode


def test_remote_root_is_snapshotted_then_viewed(s3, tmp_path):
    import fsspec

    fs = fsspec.filesystem("s3")
    bucket = s3.removeprefix("s3://").split("/", 1)[0]
    fs.pipe(f"{bucket}/lake/a.csv", b"x,y\n1,2\n")
    fs.pipe(f"{bucket}/lake/deep/bundle.zip", zip_bytes({"inner/t.csv": CSV}))
    fs.pipe(f"{bucket}/lake/m.csv.gz", gzip.compress(CSV))
    folder = DataSource(f"s3://{bucket}/lake", tmp_path / "cache")
    assert listing(folder) == {
        "a.csv": "csv",
        "deep/bundle.zip/inner/t.csv": "csv",
        "m.csv.gz/m.csv": "csv",
    }
    single = DataSource(f"s3://{bucket}/lake/m.csv.gz", tmp_path / "cache")
    assert listing(single) == {"m.csv.gz/m.csv": "csv"}
