"""Sandbox backends are classes behind one protocol (dsstar.execution.sandbox.backends), kept in
one table (modes.py): a backend defined here, outside dsstar/, is registered and then chosen by
name through settings, preflight, the run form's policy and the executor, like a built-in one."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from pydantic import ValidationError

import dsstar.inputs.trust as trust
from dsstar import sandbox_names
from dsstar.errors import ConfigError, ForbiddenError
from dsstar.execution.sandbox import Backend, Limits, modes, register, run_script, unregister
from dsstar.execution.sandbox.host import boot_python
from dsstar.inputs.preflight import check_isolation
from dsstar.settings import Settings

NAME = "plain-test"
LIMITS = Limits(timeout_s=10, memory_mb=1024, output_bytes=20_000, disk_mb=64)


class Plain:
    """Starts the boot program as a plain child of the host: no isolation, and says so."""

    name = NAME
    isolates = False
    fix = ""

    def __init__(self) -> None:
        self.started: list[str] = []  # the roles it started the boot program in

    def available(self) -> bool:
        return True

    def argv(self, stage, data_dir, spec):  # type: ignore[no-untyped-def]
        self.started.append(spec["role"])
        return [*boot_python(spec.get("python")), json.dumps(spec)]


@pytest.fixture
def plain():
    backend: Backend = Plain()  # the protocol is all it must satisfy
    yield register(backend)
    unregister(NAME)


def test_the_built_in_backends_fill_the_table_under_the_names_settings_know():
    assert modes.MODES == (sandbox_names.AUTO, *sandbox_names.BUILT_IN)
    table = {name: modes.backend(name) for name in sandbox_names.BUILT_IN}
    assert {name: b.name for name, b in table.items()} == {n: n for n in table}
    assert [n for n, b in table.items() if b.isolates] == ["bwrap", "unshare"]
    assert not modes.isolates("none") and modes.isolates("auto")
    with pytest.raises(ConfigError, match="built in"):
        unregister("none")


def test_settings_know_the_names_without_importing_the_sandbox():
    code = "import sys, dsstar.settings; print(sorted(m for m in sys.modules if 'execution' in m))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_backend_from_the_test_folder_is_registered_and_chosen_by_name(
    plain, tmp_path, monkeypatch, caplog, plain_python, open_work
):
    # As root, a backend that does not isolate runs each script as a uid of its own: a
    # Python and a work folder that uid may reach (pytest's folders are root's alone), and
    # dsstar's own Python, which runs the offline profiler, as if it were one too.
    settings = Settings(sandbox=NAME, script_python=plain_python, work_dir=open_work)
    monkeypatch.setattr(sys, "executable", plain_python)
    assert settings.sandbox == NAME
    with caplog.at_level(logging.WARNING):
        assert check_isolation(settings) == NAME
    assert f"sandbox {NAME!r}: generated scripts run WITHOUT isolation" in caplog.text

    data = tmp_path / "data"
    data.mkdir()
    (data / "table.csv").write_text("a,b\n1,2\n")
    code = "print(open('data/table.csv').read())"
    result = run_script(code, data_dir=data, limits=LIMITS, mode=NAME, work_root=open_work,
                        python=plain_python)  # fmt: skip
    assert result.ok, result.output
    assert "a,b\n1,2" in result.output
    assert (result.sandbox, result.start) == (NAME, "cold")  # recorded; no warm pool unisolated
    assert plain.started == ["cold"]
    assert f"no warm pool in mode {NAME!r}" in result.note

    # A run form, as a worker judges it.
    with pytest.raises(ForbiddenError, match="DSSTAR_FORM_ALLOW=sandbox"):
        trust.check_form({"sandbox": NAME}, Settings())
    trust.check_form({"sandbox": NAME}, settings)  # what the worker uses anyway

    monkeypatch.setattr(modes, "_usable", lambda name: False)  # no isolation here
    with pytest.raises(ConfigError, match="no usable isolation"):
        modes.resolve_mode("auto")  # 'auto' never falls back to a backend that does not isolate
    with pytest.raises(ConfigError, match="already taken"):
        register(Plain())


def test_an_unregistered_name_is_unknown_again(plain):
    unregister(NAME)
    with pytest.raises(ValidationError, match=f"unknown sandbox mode {NAME!r}"):
        Settings(sandbox=NAME)
    register(plain)  # for the fixture to take it away
