"""A question's flow run whose Completed state comes back without its result, as on a busy
Prefect server: the client's request to set the state is answered after the client gave up
on it; the client sends it again, and the server, which already holds Completed, rejects the
second one and returns its own state, which carries no result. The question was answered
and stored all the same: the nightly batch reports its answer from the stored run, as
`dsstar run` does, instead of counting it as failed."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest
from conftest import prefect_api
from scenarios import ANSWER, always_first_time
from tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow  # a whole nightly batch through a proxy


def test_a_question_whose_completed_state_lost_its_result_is_reported_from_storage(
    env, llm, sales, tmp_path
):
    from flows.nightly import ds_star_nightly

    always_first_time(llm)
    question_set = tmp_path / "questions.yaml"
    question_set.write_text(f"- question: Top region and manager?\n  data: {sales}\n")
    api = urlsplit(os.environ["PREFECT_API_URL"])
    proxy = TcpProxy(api.port)
    # The first flow run to complete is the question's (the batch completes after it).
    proxy.lose_reply(rb"^POST \S*/flow_runs/\S+/set_state ", rb'"type":\s*"COMPLETED"')
    try:
        with prefect_api(f"{proxy.url}{api.path}"):
            [result] = ds_star_nightly(questions_file=str(question_set))
    finally:
        proxy.close()
    assert proxy.lost == 1  # the reply was lost, and the state set again
    assert result["status"] == "verified" and result["answer"] == ANSWER, result
    assert result["flow_run_id"]
