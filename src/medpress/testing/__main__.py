"""``python -m medpress.testing fake-server|chaos [options]``: run a testing server standalone.

One entry point for the package rather than ``-m medpress.testing.<module>``, which would run
a module the package ``__init__`` has already imported (runpy warns about that).
"""

from __future__ import annotations

import sys

from medpress.testing import chaos, fake_server

COMMANDS = {"fake-server": fake_server.main, "chaos": chaos.main}


def main(argv: list[str]) -> None:
    if not argv or argv[0] not in COMMANDS:
        sys.exit(f"usage: python -m medpress.testing {{{','.join(COMMANDS)}}} [options]")
    COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
