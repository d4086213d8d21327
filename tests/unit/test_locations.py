"""One answer everywhere to "is this a local path or a URL": data roots, storage, result
storage and question sets all go through dsstar.locations."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsstar.data.sources import DataSource
from dsstar.errors import DataError
from dsstar.inputs.questions import load_questions
from dsstar.locations import is_remote, local_path, normalize_location
from dsstar.storage import Store


@pytest.mark.parametrize(
    ("location", "remote"),
    [
        ("s3://bucket/prefix", True),
        ("S3://bucket", True),
        ("gs://bucket/x", True),
        ("memory://root", True),
        ("simplecache::s3://bucket", True),  # an fsspec chain
        ("file:///tmp/data", False),
        ("FILE:///tmp/data", False),
        ("/tmp/data", False),
        ("relative/folder", False),
        ("~/data", False),
        ("/tmp/odd://name", False),  # "://" inside a path is not a scheme
        ("1s3://bucket", False),  # a scheme starts with a letter
    ],
)
def test_remote_or_local(location, remote):
    assert is_remote(location) is remote


def test_local_path_drops_file_scheme_and_expands_home():
    assert local_path("file:///tmp/data") == Path("/tmp/data")
    assert local_path("~/data") == Path.home() / "data"
    assert local_path("relative") == Path("relative")  # not resolved: links stay as named
    with pytest.raises(ValueError, match="remote"):
        local_path("s3://bucket")


def test_one_spelling_per_location(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    expected = str(tmp_path.resolve() / "data")
    for spelling in ("data", "data/", "./data", f"file://{tmp_path}/data", str(tmp_path / "data")):
        assert normalize_location(spelling) == expected
    assert normalize_location("s3://bucket/prefix/") == "s3://bucket/prefix"


def test_every_module_agrees(tmp_path, monkeypatch):
    """Storage, data sources and question sets read the same spellings the same way."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("x\n1\n")
    folder = str(tmp_path.resolve() / "data")
    assert Store(f"file://{folder}").url == folder
    assert Store("s3://bucket/prefix/").url == "s3://bucket/prefix"
    source = DataSource(f"file://{folder}", tmp_path / "cache")
    assert not source.is_remote and source.root.path == folder  # the folder it holds open
    with pytest.raises(DataError, match="does not exist"):
        DataSource(str(tmp_path / "odd://name"), tmp_path / "cache")  # a path, not a URL
    sets = tmp_path / "sets"
    sets.mkdir()
    (sets / "q.yaml").write_text(
        "- {question: a, data: ../data}\n"
        "- {question: b, data: 's3://bucket/x/'}\n"
        f"- {{question: c, data: 'file://{folder}'}}\n"
    )
    datas = [q.data for q in load_questions(sets / "q.yaml")]
    assert datas == [folder, "s3://bucket/x", folder]
