"""``python -m nnbridge`` is the same as the ``nnbridge`` command."""

import sys

from .cli import main

sys.exit(main())
