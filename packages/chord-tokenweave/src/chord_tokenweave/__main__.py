"""``python -m chord_tokenweave`` = the ``chord-tokenweave`` command."""

import sys

from chord_tokenweave.cli import main

sys.exit(main())
