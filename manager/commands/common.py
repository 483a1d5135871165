"""Arguments shared by several commands."""

from __future__ import annotations

import argparse


def session_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", metavar="ID", help="session id (default: the project's current one)")
    parser.add_argument("--project", metavar="DIR", help="project directory (default: from the cwd)")


def json_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def pager_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-pager", action="store_true",
                        help="never page long output (default: a pager on a terminal, as git)")
