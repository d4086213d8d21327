"""`python -m dsstar` is the `dsstar` command."""

from dsstar.cli import main

main()
