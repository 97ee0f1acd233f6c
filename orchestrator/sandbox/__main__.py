"""`python -m orchestrator.sandbox`: the wrapper a sandboxed command runs under (guard.py)."""

import sys

from orchestrator.sandbox.guard import main

sys.exit(main())
