"""`python -m dsstar` is the `dsstar` command."""

from dsstar.cli import app

app(prog_name="dsstar")
