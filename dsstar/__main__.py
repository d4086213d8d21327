"""`python -m dsstar` is the `dsstar` command."""

from .cli import app

app(prog_name="dsstar")
