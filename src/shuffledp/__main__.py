"""``python -m shuffledp``: the command line."""

# First of all: Ctrl-C from here on is one line and exit 130, even during the imports.
from shuffledp._interrupts import exit_on_interrupt_while_starting

exit_on_interrupt_while_starting()

import sys  # noqa: E402

from shuffledp.cli import main  # noqa: E402

sys.exit(main())
