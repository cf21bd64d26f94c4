"""`python -m memplan ...`: the same as the `memplan` command."""
import sys

from ._launcher import main

sys.exit(main())
