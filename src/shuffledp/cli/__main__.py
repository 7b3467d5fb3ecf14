"""``python -m shuffledp.cli``: the command line."""

import sys

from shuffledp.cli import main

sys.exit(main())
