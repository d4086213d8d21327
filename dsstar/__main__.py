"""`python -m dsstar` is the `dsstar` command."""

from .cli import main

main()
