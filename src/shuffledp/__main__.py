"""``python -m shuffledp``: the command line."""

import sys

from shuffledp.cli import main

sys.exit(main())
