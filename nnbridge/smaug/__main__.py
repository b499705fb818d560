"""``python -m nnbridge.smaug script.py``: run a SMAUG frontend script unmodified (see ``scripts``)."""

import sys

from .scripts import main

sys.exit(main())
