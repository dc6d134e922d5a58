"""`python -m webapp.cli ...`: the `trawl` command."""

from webapp.cli import main

main()
