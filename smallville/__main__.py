"""`python -m smallville` runs the command line."""

from smallville.cli import main

raise SystemExit(main())
