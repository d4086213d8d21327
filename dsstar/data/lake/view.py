"""The mount view: the folder generated scripts see read-only as `data/`.

Regular files are hard-linked from the data root (copied when a hard link cannot be made,
e.g. across devices), in-root symbolic links appear as the files they point to, unsafe
entries are absent, and archives appear as folders of their members under their own name:
`bundle.zip/inner/table.csv`, `metrics.csv.gz/metrics.csv`."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from dsstar.data.lake.archives import ArchiveError, ArchiveLimits, expand_cached
from dsstar.data.lake.walk import Skipped, walk
from dsstar.data.profiler import archive_kind

__all__ = ["build_view"]


def _link(source: str, target: Path) -> None:
    """Hard-link `source` at `target`, else copy it; never follows a link swapped in."""
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as src:
            if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                raise OSError(f"{source} is no longer a regular file") from None
            with open(target, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
    if not stat.S_ISREG(os.lstat(target).st_mode):  # replaced between listing and linking
        target.unlink()
        raise OSError("not a regular file any more")


def _link_tree(tree: Path, target: Path) -> None:
    for folder, _dirs, names in os.walk(tree):
        relative = Path(folder).relative_to(tree)
        (target / relative).mkdir(parents=True, exist_ok=True)
        for name in names:
            _link(os.path.join(folder, name), target / relative / name)


def build_view(source: Path, view: Path, cache: Path, limits: ArchiveLimits) -> list[Skipped]:
    """Fill the empty folder `view` from the data root `source` (a folder or one file);
    returns the entries left out, with reasons."""
    files, skipped = walk(source)
    made: set[Path] = {view}
    for relative, real in files:
        target = view / relative
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        kind = archive_kind(real)
        try:
            if kind:
                tree, rejected = expand_cached(real, kind, cache, limits, name=Path(relative).name)
                _link_tree(tree, target)
                skipped += [Skipped(f"{relative}/{name}", why) for name, why in rejected]
            else:
                _link(real, target)
        except ArchiveError as exc:
            shutil.rmtree(target, ignore_errors=True)
            skipped.append(Skipped(relative, f"archive not expanded: {exc}"))
        except OSError as exc:
            skipped.append(Skipped(relative, f"could not be staged: {exc.strerror or exc}"))
    return sorted(skipped, key=lambda s: s.path)
