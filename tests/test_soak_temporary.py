"""The chaos soak (tests/soak.py) on a command's temporary server:
its events (soak.EVENTS) on one PREFECT_HOME, each killed run resumed; at the end no slot
is counted and nothing is left behind."""

import pytest
from soak import play

pytestmark = pytest.mark.slow


@pytest.mark.timeout(900)
def test_chaos_soak_on_a_temporary_server(request, tmp_path, llm, sales):
    play(request, "temporary-server", tmp_path, llm, sales)
