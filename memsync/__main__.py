"""`python -m memsync`: the command line."""

from __future__ import annotations

import sys

from memsync.cli import main

sys.exit(main())
