"""Commands imported only when they run, so ``medpress --help`` imports typer and no more.

Each command module pulls in numpy, pydantic, aiohttp or the judges; importing them all cost
every ``medpress`` call about 0.6 s before it did anything (issue 23 item 7). The group lists
the commands from a table of (module, attribute, one-line help) and imports a command's module
when that command is resolved: to run it, or to show its own ``--help``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from difflib import get_close_matches
from typing import Any, ClassVar, NamedTuple

import typer
import typer.main
from typer import _click as click  # typer's own (vendored) click: its groups are of this one
from typer.core import TyperCommand, TyperGroup


class LazyCommand(NamedTuple):
    """Where a command lives: ``module.attr`` is a :class:`typer.Typer` (a group of commands)
    or a command function; ``help`` is the line ``medpress --help`` shows for it (a test
    checks it against the command's own)."""

    module: str
    attr: str
    help: str


def load_command(name: str, spec: LazyCommand) -> click.Command:
    """Import ``spec``'s module and build its click command, named ``name``."""
    obj: Any = getattr(importlib.import_module(spec.module), spec.attr)
    if isinstance(obj, typer.Typer):
        cmd: click.Command = typer.main.get_group(obj)
    else:
        single = typer.Typer()
        single.command(name)(obj)
        cmd = typer.main.get_command(single)
    cmd.name = name
    return cmd


class LazyGroup(TyperGroup):
    """A typer group whose :attr:`lazy` commands are imported when resolved.

    While the group's own help is formatted, a lazy command is a placeholder carrying its
    one-line help, so listing the commands imports none of them; resolving one to run it (or
    to show its help) imports it once. Typos get the usual "Did you mean" over every name.
    """

    lazy: ClassVar[Mapping[str, LazyCommand]] = {}
    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in self.lazy if n not in self.commands)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        spec = self.lazy.get(cmd_name)
        if cmd is not None or spec is None:
            return cmd
        if self._listing:
            return TyperCommand(cmd_name, help=spec.help, short_help=spec.help)
        cmd = load_command(cmd_name, spec)
        self.commands[cmd_name] = cmd
        return cmd

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return self._click_resolve_command(ctx, args)
        except click.exceptions.UsageError as e:
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if matches:
                e.message = (e.message.rstrip(".") + ". Did you mean "
                             + ", ".join(repr(m) for m in matches) + "?")
            raise
