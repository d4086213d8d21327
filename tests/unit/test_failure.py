"""A script's failure in one line, read from real outputs: scripts run in the sandbox and fail
the ways generated scripts fail (pandas, numpy, syntax, a stop, a cap, a long traceback)."""

from __future__ import annotations

import pytest

from dsstar.execution.failure import exception_line, failure_line
from dsstar.execution.sandbox import Limits, run_script

LIMITS = Limits(timeout_s=20, memory_mb=1024, output_bytes=20_000, disk_mb=64)


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "sales.csv").write_text('region,amount\nnorth,1\nsouth,"2\nwest,3,4,5\n' * 3)
    (folder / "prices.csv").write_text("item,price\npen,1.5\nbook,abc\n")
    return folder


def failed(code, data, tmp_path, **caps):
    limits = Limits(**{**vars(LIMITS), **caps})
    result = run_script(code, data_dir=data, limits=limits, mode="auto", work_root=tmp_path)
    assert not result.ok, result.output
    return result


def line_of(result, script="solution.py"):
    line = failure_line(result.output, script, result.exit_code)
    assert "\n" not in line and "Traceback" not in line, line
    return line


def test_pandas_error_deep_in_the_library_names_the_scripts_line(data, tmp_path):
    code = "import pandas as pd\n\nprint('loading')\ndf = pd.read_csv('data/sales.csv')\n"
    result = failed(code, data, tmp_path)
    line = line_of(result)
    assert line.startswith("pandas.errors.ParserError: Error tokenizing data.")
    assert line.endswith("(solution.py line 4)")
    assert "engine)" not in line  # the tail of an inner frame is never what is shown


def test_value_error_from_a_conversion(data, tmp_path):
    code = (
        "import pandas as pd\n"
        "df = pd.read_csv('data/prices.csv')\n"
        "total = 0.0\n"
        "for price in df['price']:\n"
        "    total += float(price)\n"
    )
    line = line_of(failed(code, data, tmp_path))
    assert line == "ValueError: could not convert string to float: 'abc' (solution.py line 5)"


def test_numpy_error_in_a_function_of_the_script(data, tmp_path):
    code = (
        "import numpy as np\n\n"
        "def combine(a, b):\n"
        "    return np.dot(a, b)\n\n"
        "combine(np.ones((2, 3)), np.ones((2, 3)))\n"
    )
    line = line_of(failed(code, data, tmp_path), "round 02")
    assert line.startswith("ValueError: shapes (2,3) and (2,3) not aligned")
    assert line.endswith("(round 02 line 4)")  # the frame nearest the error, not the call


def test_key_error_of_a_missing_column(data, tmp_path):
    code = "import pandas as pd\ndf = pd.read_csv('data/prices.csv')\nprint(df['cost'].sum())\n"
    line = line_of(failed(code, data, tmp_path))
    assert line == "KeyError: 'cost' (solution.py line 3)"


def test_syntax_error(data, tmp_path):
    code = "import pandas as pd\nprint('total', (1 + 2)\nx = 1\n"
    line = line_of(failed(code, data, tmp_path))
    assert line.startswith("SyntaxError: ")
    assert "(solution.py line 2)" in line


def test_chained_exception_names_the_last_one(data, tmp_path):
    code = (
        "data = {}\n"
        "try:\n"
        "    data['a']\n"
        "except KeyError as exc:\n"
        "    raise RuntimeError('no column a in the table') from exc\n"
    )
    line = line_of(failed(code, data, tmp_path))
    assert line == "RuntimeError: no column a in the table (solution.py line 5)"


def test_exception_group_names_its_last_sub_exception(data, tmp_path):
    code = (
        "def load(row):\n"
        "    raise ValueError(f'bad row {row}')\n"
        "errors = []\n"
        "for row in (3, 7):\n"
        "    try:\n"
        "        load(row)\n"
        "    except ValueError as exc:\n"
        "        errors.append(exc)\n"
        "raise ExceptionGroup('loading failed', errors)\n"
    )
    line = line_of(failed(code, data, tmp_path))
    assert line == "ValueError: bad row 7 (solution.py line 2)"


def test_keyboard_interrupt(data, tmp_path):
    code = "import os, signal\nprint('working')\nos.kill(os.getpid(), signal.SIGINT)\n"
    line = line_of(failed(code, data, tmp_path))
    assert line == "KeyboardInterrupt (solution.py line 3)"


def test_timeout_says_the_cap(data, tmp_path):
    code = "import time\nprint('started')\ntime.sleep(60)\n"
    line = line_of(failed(code, data, tmp_path, timeout_s=1))
    assert line == "the script was killed after 1 s (exec timeout)"


def test_memory_limit(data, tmp_path):
    code = "import numpy as np\nblocks = [np.ones(10**7) for _ in range(100)]\n"
    line = line_of(failed(code, data, tmp_path, memory_mb=300))
    assert "went over 300 MB of memory" in line and "(exec memory limit)" in line
    if line.startswith("MemoryError"):  # raised in Python, before the watchdog killed it
        assert "(solution.py line 2)" in line


def test_traceback_cut_by_the_output_limit(data, tmp_path):
    code = (
        "import sys\n"
        "for i in range(20000):\n"
        "    print('row', i, 'x' * 40, file=sys.stderr)\n"
        "def deep(n):\n"
        "    return deep(n - 1) if n else int('twelve')\n"
        "deep(3)\n"
    )
    result = failed(code, data, tmp_path, output_bytes=4_000)
    assert "bytes of output left out" in result.output  # the middle is gone, the head too
    line = line_of(result)
    assert line == (
        "ValueError: invalid literal for int() with base 10: 'twelve' (solution.py line 5)"
    )


def test_no_traceback_the_last_printed_line():
    assert failure_line("reading\nno rows for 2024\n", "solution.py", 3) == "no rows for 2024"
    silent = failure_line("", "solution.py", 3)
    assert silent == "solution.py exited with code 3 and printed nothing"


def test_printed_tables_are_kept_as_printed():
    output = "+----+----+\n| id | ok |\n+----+----+\n| no rows for 2024 |\n"
    assert failure_line(output, "solution.py", 1) == "| no rows for 2024 |"


def test_long_messages_stay_one_bounded_line():
    output = 'Traceback (most recent call last):\n  File "/sandbox/script.py", line 1\n'
    output += "KeyError: " + "x" * 5000 + "\nsecond line of the message\n"
    line = failure_line(output, "solution.py")
    assert len(line) <= 300 and "\n" not in line


def test_exception_line_joins_a_message_of_several_lines():
    exc = RuntimeError("storage refused the write:\n  403 Forbidden\n")
    assert exception_line(exc) == "RuntimeError: storage refused the write: 403 Forbidden"
    assert exception_line(KeyboardInterrupt()) == "KeyboardInterrupt"
