"""The worker decides what a run form may choose (dsstar.inputs.trust): the policy itself, and the
attack of issue 19 driven through a real Prefect API against `dsstar serve` in its own
process. Flow runs created through the API ask for `sandbox=none`, a foreign `api_base`
(an attacker's server, which would receive the worker's key) and `data=/etc/shadow`; each is
refused by the worker before any model call, and allowed only when its environment says so."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import forked_cli
import pytest
from conftest import EXAMPLE, REPO
from fake_llm import FakeLLM
from prefect import get_client
from prefect.deployments import run_deployment
from prefect.exceptions import PrefectHTTPStatusError
from processes import stop
from pydantic import ValidationError

import dsstar.inputs.trust as trust
from dsstar.errors import DataError, ForbiddenError
from dsstar.inputs.form import RunForm, explain, grouped
from dsstar.settings import Settings

QUESTION = "Which region had the highest revenue in 2024 H1?"
SECRET = "sk-worker-secret-do-not-leak"


@pytest.fixture
def worker(monkeypatch):
    """The policy as a worker applies it (not the CLI's local user)."""
    for name in [k for k in os.environ if k.startswith("DSSTAR_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DSSTAR_MODEL", "openai/gpt-4o-mini")
    monkeypatch.setenv("DSSTAR_API_BASE", "http://127.0.0.1:9/v1")
    return monkeypatch


def test_guarded_settings_are_refused_unless_the_worker_allows_them(worker):
    for chosen in (
        {"sandbox": "none"},
        {"sandbox": "process"},  # the old name of none
        {"api_base": "http://attacker.example/v1"},
        {"embedding_api_base": "http://attacker.example/v1"},
        {"agent_models": {"coder": "anthropic/claude-x"}},
        {"model": "ollama/llama3"},
        {"storage": "/etc"},
        {"work_dir": "/root"},
        {"dask_address": "tcp://10.0.0.5:8786"},
        {"exec_uid_base": 1_300_000},  # another process's range, higher or lower
        {"exec_uid_base": 100_000},
    ):
        with pytest.raises(ForbiddenError, match="DSSTAR_FORM_ALLOW=" + next(iter(chosen))):
            trust.check_form(chosen, Settings())
        worker.setenv("DSSTAR_FORM_ALLOW", next(iter(chosen)))
        trust.check_form(chosen, Settings())  # allowed by name
        worker.delenv("DSSTAR_FORM_ALLOW")
    worker.setenv("DSSTAR_FORM_ALLOW", "*")
    trust.check_form({"sandbox": "none", "api_base": "http://x/v1"}, Settings())


def test_what_the_worker_uses_anyway_and_harmless_settings_pass(worker):
    worker.setenv("DSSTAR_STORAGE", "/srv/runs")
    harmless = {
        "sandbox": "bwrap",  # another isolating mode
        "api_base": "http://127.0.0.1:9/v1",  # the worker's own
        "model": "openai/gpt-4o",  # the provider the worker already talks to
        "agent_models": {"verifier": "openai/gpt-4o"},
        "storage": "/srv/runs/",
        "max_rounds": 3,
        "exec_timeout": 10.0,
        "exec_uid_base": 1_200_000,  # the worker's own range
    }
    trust.check_form(harmless, Settings())
    worker.setenv("DSSTAR_SANDBOX", "none")  # a container that is its own isolation
    trust.check_form({"sandbox": "none"}, Settings())


def test_a_recorded_model_a_form_may_choose_reads_only_under_the_data_roots(worker, tmp_path):
    # Allowing a form to choose the model does not let it make the worker read any file as
    # replies (and run the scripts in it): a recording is data, under DSSTAR_DATA_ROOTS.
    worker.setenv("DSSTAR_FORM_ALLOW", "model,agent_models")
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / "replies.yaml").write_text("coder r00: print(1)\n")
    worker.setenv("DSSTAR_DATA_ROOTS", str(lake))
    for chosen in (
        {"model": "recorded//etc/passwd"},
        {"agent_models": {"coder": f"recorded/{tmp_path}/elsewhere.yaml"}},
    ):
        with pytest.raises(ForbiddenError, match="recorded replies .* not under"):
            trust.check_form(chosen, Settings())
    trust.check_form({"model": f"recorded/{lake}/replies.yaml"}, Settings())


def test_data_must_lie_under_the_worker_roots_links_resolved(worker, tmp_path):
    root = tmp_path / "lake"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.csv").write_text("x\n1\n")
    (root / "escape").symlink_to("/etc")
    (root / "inside").symlink_to(root / "sub")
    (tmp_path / "lake2").mkdir()
    with pytest.raises(ForbiddenError, match="DSSTAR_DATA_ROOTS"):
        trust.check_data_location(str(root), Settings())  # no roots declared: nothing
    worker.setenv("DSSTAR_DATA_ROOTS", f"{root}, s3://bucket/lake")
    settings = Settings()
    assert trust.check_data_location(str(root / "sub"), settings) == str(root / "sub")
    assert trust.check_data_location(str(root / "inside"), settings) == str(root / "sub")
    assert trust.check_data_location("s3://bucket/lake/day1/", settings) == "s3://bucket/lake/day1"
    for refused in (
        "/etc/shadow",
        str(root / "escape"),  # a link under the root that leads out
        str(root / "escape" / "shadow"),
        str(root / ".." / "lake2"),
        str(tmp_path / "lake2"),  # a sibling that shares the root's name as a prefix
        "s3://bucket/lake2",
        "s3://bucket/lake/../secrets",
        "s3://other/lake",
    ):
        with pytest.raises(ForbiddenError):
            trust.check_data_location(refused, settings)


def test_a_link_swapped_while_it_is_resolved_is_refused_in_words(worker, tmp_path):
    """realpath looks at a link (lstat), then reads it (readlink): a link replaced by a
    folder between the two made readlink fail with EINVAL, and the run crash with a bare
    OSError. The swap is made exactly there, by a hook on the real lstat."""
    root = tmp_path / "lake"
    (root / "real").mkdir(parents=True)
    sub = root / "sub"
    sub.symlink_to(root / "real")
    worker.setenv("DSSTAR_DATA_ROOTS", str(root))
    settings = Settings()
    real_lstat = os.lstat

    def lstat_then_swap(path, *args, **kwargs):
        found = real_lstat(path, *args, **kwargs)
        if os.fspath(path) == str(sub) and stat.S_ISLNK(found.st_mode):
            sub.unlink()
            sub.mkdir()  # the link is a folder by the time realpath reads it
        return found

    worker.setattr(os, "lstat", lstat_then_swap)
    with pytest.raises(DataError, match=f"data {sub} changed while it was being checked"):
        trust.hold_data_location(str(sub), settings)


def test_a_folder_setting_whose_link_is_swapped_is_refused_by_name(worker, tmp_path):
    """A form's work_dir is compared with the worker's by real path; a link replaced while
    it is resolved is refused like any other foreign folder, not a crash of the flow run."""
    (tmp_path / "real").mkdir()
    work = tmp_path / "work"
    work.symlink_to(tmp_path / "real")
    real_lstat = os.lstat

    def lstat_then_swap(path, *args, **kwargs):
        found = real_lstat(path, *args, **kwargs)
        if os.fspath(path) == str(work) and stat.S_ISLNK(found.st_mode):
            work.unlink()
            work.mkdir()
        return found

    worker.setattr(os, "lstat", lstat_then_swap)
    with pytest.raises(ForbiddenError, match="DSSTAR_FORM_ALLOW=work_dir"):
        trust.check_form({"work_dir": str(work)}, Settings())


def test_a_nightly_question_set_lies_under_the_roots_or_in_deployments(worker, tmp_path):
    (tmp_path / "lake").mkdir()
    questions = tmp_path / "lake" / "questions.yaml"
    questions.write_text("- question: q\n  data: .\n")
    worker.setenv("DSSTAR_DATA_ROOTS", str(tmp_path / "lake"))
    assert trust.check_question_set(str(questions), Settings()) == str(questions)
    shipped = REPO / "deployments" / "questions.yaml"
    assert trust.check_question_set(str(shipped), Settings()) == str(shipped.resolve())
    with pytest.raises(ForbiddenError, match="question set /etc/passwd"):
        trust.check_question_set("/etc/passwd", Settings())


def test_a_form_cannot_set_the_worker_policy():
    for name in ("form_allow", "data_roots"):
        with pytest.raises(ValueError, match="worker's environment"):
            RunForm(question="q", data="d", **{name: ["*"]})
        assert name not in RunForm.model_fields


def test_a_flow_run_s_job_variables_may_name_and_label_it_only(worker):
    trust.check_job_variables(None)
    trust.check_job_variables({"name": "nightly-eu", "labels": {"team": "finance"}, "env": {}})
    hostile = {
        "env": {"DSSTAR_FORM_ALLOW": "*", "DSSTAR_DATA_ROOTS": "/", "LD_PRELOAD": "/x.so"},
        "command": "sh -c 'id > /tmp/x'",
        "env.PYTHONPATH": "/tmp",
        "image": "evil:latest",
        "volumes": ["/:/host"],
        "name": "fine",
    }
    with pytest.raises(ForbiddenError) as refused:
        trust.check_job_variables(hostile)
    message = str(refused.value)
    for name in ("env.DSSTAR_FORM_ALLOW", "env.DSSTAR_DATA_ROOTS", "env.LD_PRELOAD", "command",
                 "env.PYTHONPATH", "image", "volumes"):  # fmt: skip
        assert name in message, name
    assert "may set only labels and name" in message
    # The CLI's user has no job variables to set, and no exception.
    with pytest.raises(ForbiddenError, match="env.PREFECT_API_URL"):
        trust.check_job_variables({"env": {"PREFECT_API_URL": "http://elsewhere/api"}})


def test_a_flow_run_s_retry_policy_is_its_flow_s_or_narrower():
    trust.check_retry_policy(None, None, 0, 0)  # unset: the flow's
    trust.check_retry_policy(1, 5, 2, 10)  # fewer, sooner
    with pytest.raises(ForbiddenError) as refused:
        trust.check_retry_policy(50, 1_000_000, 0, 0)
    message = str(refused.value)
    assert "empirical_policy.retries=50 (the flow's own: 0)" in message
    assert "empirical_policy.retry_delay=1000000 (the flow's own: 0)" in message


def test_the_local_user_is_not_limited():
    # Their own form (the CLI, the Python API): no worker's Settings judge it.
    trust.check_form({"sandbox": "none", "api_base": "http://x/v1"}, None)
    assert trust.check_data_location("/etc/shadow", None) == "/etc/shadow"


# -- the attack, through the Prefect API ---------------------------------------------------


@contextmanager
def serving(root: Path, llm: FakeLLM, python: str = sys.executable, **policy: str):
    """`dsstar serve` as root would run it, in `python`: the worker's key in OPENAI_API_KEY,
    its model server `llm`, and `policy` (DSSTAR_DATA_ROOTS, DSSTAR_FORM_ALLOW) in its
    environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSSTAR_")}
    env.update(
        OPENAI_API_KEY=SECRET,
        DSSTAR_MODEL="openai/gpt-4o-mini",
        DSSTAR_API_BASE=llm.base_url,
        DSSTAR_STORAGE=str(root / "storage"),
        DSSTAR_DATABASE_URL=f"sqlite:///{root / 'ledger.db'}",
        DSSTAR_WORK_DIR=str(root),
        DSSTAR_LLM_RETRIES="0",
        DSSTAR_MAX_DEBUG_ATTEMPTS="0",
        DSSTAR_MAX_ROUNDS="1",
        PREFECT_RUNNER_POLL_FREQUENCY="1",
    )
    env.update(policy)  # over the defaults above (a work folder of its own, say)
    log_path = root / f"serve-{len(list(root.glob('serve-*')))}.log"
    with open(log_path, "w") as log:
        proc = forked_cli.start(
            [python, "-m", "dsstar", "serve"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            _wait_deployed(proc, log_path)
            yield log_path
        finally:
            stop(proc)


def _wait_deployed(proc: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + 120
    with get_client(sync_client=True) as client:
        while True:
            try:
                deployment = client.read_deployment_by_name("ds-star/on-demand")
                if "serving" in log_path.read_text():  # this process's registration
                    return deployment
            except Exception:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(log_path.read_text()[-3000:])
            time.sleep(0.5)


def attack(**parameters: object):
    """A flow run created through the API, as any local user can (settings in the form's
    sections, which the deployment's schema asks for); its final state."""
    flow_run = run_deployment(
        "ds-star/on-demand", parameters=grouped({"question": QUESTION, **parameters}, RunForm),
        timeout=240, poll_interval=1,
    )  # fmt: skip
    return flow_run.state


@pytest.mark.slow
def test_the_prefect_api_attack_is_refused_then_allowed_by_the_worker(
    tmp_path, plain_python, open_work
):
    lake = tmp_path / "lake"
    shutil.copytree(EXAMPLE, lake)
    (lake / "escape").symlink_to("/etc")
    with FakeLLM() as own, FakeLLM() as attacker:
        with serving(tmp_path, own, DSSTAR_DATA_ROOTS=str(lake)) as log:
            assert "accepts requests without credentials" in log.read_text()
            refusals = {
                "sandbox": attack(data=str(lake), sandbox="none"),
                "api_base": attack(data=str(lake), api_base=attacker.base_url),
                "shadow": attack(data="/etc/shadow"),
                "link": attack(data=str(lake / "escape" / "shadow")),
            }
            # A secret is no field of the served form: Prefect's server refuses it, and
            # records nothing of it.
            with pytest.raises(PrefectHTTPStatusError, match="409") as refused:
                attack(data=str(lake), api_key="sk-from-a-form")
            assert "'api_key' was unexpected" in refused.value.response.text
        for what, state in refusals.items():
            assert state.is_failed(), (what, state)
        assert "DSSTAR_FORM_ALLOW=sandbox" in refusals["sandbox"].message
        assert "DSSTAR_FORM_ALLOW=api_base" in refusals["api_base"].message
        shadow = "data /etc/shadow (resolved: /etc/shadow) is not under"
        assert shadow in refusals["shadow"].message
        assert "(resolved: /etc/shadow) is not under" in refusals["link"].message
        # Refused before anything ran: no model call anywhere, nothing stored.
        assert attacker.requests == [] and own.requests == []
        assert not list((tmp_path / "storage").glob("runs/*"))

        policy = {
            "DSSTAR_DATA_ROOTS": str(lake),
            "DSSTAR_FORM_ALLOW": "api_base,sandbox",
            # As root, mode none runs scripts as a uid of their own: one it can reach.
            "DSSTAR_SCRIPT_PYTHON": plain_python,
            "DSSTAR_WORK_DIR": str(open_work),
        }
        # As root, mode none runs scripts, the offline profiler's too, as a uid of their own:
        # dsstar runs from a Python that uid may run.
        with serving(tmp_path, own, plain_python, **policy):
            allowed = attack(data=str(lake), api_base=attacker.base_url, sandbox="none")
        assert "DSSTAR_FORM_ALLOW" not in (allowed.message or "")
        # The worker's operator allowed it: the form's server now gets the worker's key.
        assert attacker.requests, allowed
        auth = {r["headers"].get("authorization") for r in attacker.requests}
        assert auth == {f"Bearer {SECRET}"}


@pytest.mark.slow
def test_a_flow_run_with_its_own_retry_policy_fails_once_and_is_not_retried(tmp_path):
    """Prefect lets whoever creates a flow run give it retries and a retry delay (its
    `empirical_policy`); its engine waited in the worker's process for the retry, holding a
    slot for the 12 days asked. The run is refused at once, its policy set back to the flow's."""
    lake = tmp_path / "lake"
    shutil.copytree(EXAMPLE, lake)
    with FakeLLM() as own, serving(tmp_path, own, DSSTAR_DATA_ROOTS=str(lake)):
        with get_client(sync_client=True) as client:
            deployment = client.read_deployment_by_name("ds-star/on-demand")
            created = client.request(
                "POST", "/deployments/{id}/create_flow_run",
                path_params={"id": deployment.id},
                json={"parameters": {"question": QUESTION, "data": str(lake)},
                      "empirical_policy": {"retries": 50, "retry_delay": 1_000_000}},
            ).json()  # fmt: skip
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                flow_run = client.read_flow_run(created["id"])
                if flow_run.state.is_final() or flow_run.state.name == "AwaitingRetry":
                    break
                time.sleep(1)
    assert flow_run.state.is_failed(), flow_run.state  # not AwaitingRetry for 12 days
    assert "empirical_policy.retries=50" in flow_run.state.message
    assert "empirical_policy.retry_delay=1000000" in flow_run.state.message
    assert flow_run.empirical_policy.retries == 0  # set back to the flow's
    assert own.requests == []  # before any model call


def test_a_form_may_lower_the_budget_never_raise_it():
    worker = Settings(max_cost=1.0, max_tokens=1000)
    trust.check_form({"max_cost": 0.5, "max_tokens": 10}, worker)  # a question's share
    for name, value in (("max_cost", 5.0), ("max_tokens", 5000)):
        with pytest.raises(ForbiddenError, match=f"above this worker's own {name}="):
            trust.check_form({name: value}, worker)
    trust.check_form({"max_cost": 5.0}, Settings())  # the worker set no ceiling


def test_each_refusal_says_what_the_form_may_choose(worker):
    """A uid range other than the worker's is refused, lower as well as higher, and the
    refusal says the one value allowed (never "or lower"); a cap says its range; a value
    outside a setting's own bounds says both ends."""
    for base in (100_000, 1_300_000):
        with pytest.raises(ForbiddenError) as refused:
            trust.check_form({"exec_uid_base": base}, Settings())
        assert "allowed only this worker's own, 1200000" in str(refused.value)
        assert "lower" not in str(refused.value)
    with pytest.raises(ForbiddenError) as refused:
        trust.check_form({"exec_memory_mb": 99_999, "exec_timeout": 1e6}, Settings())
    assert "exec_memory_mb=99999 (above this worker's own exec_memory_mb=" in str(refused.value)
    assert f"): allowed 64 to {Settings().exec_memory_mb};" in str(refused.value)
    assert "(above this worker's own exec_timeout=120.0): allowed above 0, at most 120.0." in (
        str(refused.value)
    )
    with pytest.raises(ForbiddenError, match=r"allowed a mode that isolates \(auto, bwrap"):
        trust.check_form({"sandbox": "none"}, Settings())
    with pytest.raises(ForbiddenError, match="another of a provider it uses: openai"):
        trust.check_form({"model": "ollama/llama3"}, Settings())
    with pytest.raises(ValidationError) as caught:
        Settings(exec_uid_base=5)
    assert "(allowed: 100000 to 4294967039)" in explain(caught.value)
