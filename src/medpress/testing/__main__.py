"""``python -m medpress.testing fake-server|chaos [options]``: run a testing server standalone.

One entry point for the package rather than ``-m medpress.testing.<module>``, which would run
a module the package ``__init__`` has already imported (runpy warns about that).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from medpress.testing import chaos, fake_server

COMMANDS: dict[str, tuple[Callable[[list[str]], None], str]] = {
    "fake-server": (fake_server.main, "a fake OpenAI-compatible server (add --judge to also "
                                      "answer judge requests with toy verdicts)"),
    "chaos": (chaos.main, "a fault-injecting proxy in front of any such server"),
}
USAGE = f"usage: python -m medpress.testing {{{','.join(COMMANDS)}}} [options]"


def usage() -> str:
    lines = [USAGE, "", "commands:"]
    lines += [f"  {name:<12} {about}" for name, (_, about) in COMMANDS.items()]
    lines += ["", "Options of a command: python -m medpress.testing COMMAND --help"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Run a command; 0 for ``--help``, 2 (with the usage) for a missing or unknown one."""
    if argv and argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if not argv or argv[0] not in COMMANDS:
        given = f"unknown command {argv[0]!r}; " if argv else ""
        print(f"error: {given}{USAGE}", file=sys.stderr)
        return 2
    COMMANDS[argv[0]][0](argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
