"""``python -m pytest_specdec.cli``: the ``specdec`` command without its console script."""

from __future__ import annotations

import sys

from pytest_specdec.cli import main

sys.exit(main())
