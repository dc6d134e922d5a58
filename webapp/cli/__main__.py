"""`python -m webapp.cli ...`: the `trawl` command."""

from webapp.cli import main

if __name__ == "__main__":  # imported (by a walk over the package), it only defines
    main()
