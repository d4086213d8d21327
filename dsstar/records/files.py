"""The files a script wrote, stored once, and referred to everywhere else.

The sandbox hands a script's files back with its result (ExecResult.outputs, base64). Before
that result is cached or kept, `store_outputs` writes the files that will be stored with the
run (every figure; every file of a script that may be the final one, the deliverables:
`dsstar.algorithm.repair.keeps_files`) under the run's folder by content (`files/<sha256>`),
and leaves references in their place: name, bytes, sha256, key (where the bytes are), chart
and preview. Files no one stores (the tables of a round that states no answer) keep only
their name, size, hash and preview. So a cached execution is small, and a run holds no file
in memory from one round to the next.

Whoever needs the bytes reads them back, bounded (`read_output`), or has the storage copy
them where they belong (`source`: final/outputs/, a round's figures/). When a run ends with
an answer, its `files/` go (`forget_files`): its executions will never be read back again.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import replace
from typing import Any

from dsstar import keys
from dsstar.errors import StorageError
from dsstar.execution.sandbox import ExecResult
from dsstar.execution.sandbox.keep import is_figure
from dsstar.storage import Store, Stored

__all__ = ["forget_files", "read_output", "source", "store_outputs"]


def store_outputs(result: ExecResult, store: Store, run_id: str, everything: bool) -> ExecResult:
    """`result` with its outputs' bytes written to storage (every file when `everything`,
    else the figures) and references in their place; see the module."""
    outputs = []
    for item in result.outputs:
        if "data" not in item:  # a reference already
            outputs.append(item)
            continue
        data = base64.b64decode(item["data"])
        digest = hashlib.sha256(data).hexdigest()
        kept = {k: v for k, v in item.items() if k != "data"} | {"sha256": digest}
        if everything or is_figure(item["name"]):
            kept["key"] = keys.run_file(run_id, digest)
            if not store.exists(kept["key"]):  # the same content is stored once
                store.write_bytes(kept["key"], data)
        outputs.append(kept)
        del data
    return replace(result, outputs=outputs)


def source(item: dict[str, Any]) -> Stored | bytes:
    """What to store for an output elsewhere (final/outputs/, figures/): the object its
    reference names, copied by the storage; the bytes themselves when it carries them (the
    result of a run made before outputs were stored by reference)."""
    if item.get("key"):
        return Stored(item["key"])
    if "data" in item:
        return base64.b64decode(item["data"])
    raise StorageError(f"{item.get('name')}: the file was not stored")


def read_output(store: Store, item: dict[str, Any]) -> bytes:
    """The bytes of an output, read back from storage: no more than the size its result
    states."""
    if "data" in item and not item.get("key"):
        return base64.b64decode(item["data"])
    if not item.get("key"):
        raise StorageError(f"{item.get('name')}: the file was not stored")
    return store.read_bytes(item["key"], most=int(item["bytes"]))


def forget_files(store: Store, run_id: str) -> None:
    """Delete the run's stored files (files/): what they held is under final/ and rounds/."""
    store.remove([keys.files_folder(run_id)], recursive=True)
