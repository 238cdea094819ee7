"""What the command modules share: the studies a command's arguments name, the hosts' checks before
any connection, and how host problems are printed."""

from __future__ import annotations

import argparse
import sys

from dbmatrix.hosts.remote import HostError


def log_mode(args: argparse.Namespace) -> str:
    """--quiet (or --no-progress), --json, else text."""
    if getattr(args, "quiet", False) or getattr(args, "no_progress", False):
        return "quiet"
    return "json" if getattr(args, "json", False) else "text"


class HostProblems(Exception):
    """One or more hosts that cannot be used (each already printed); the command exits 2."""


def print_host_error(exc: BaseException, host: str | None = None) -> None:
    """``dbmatrix: <host>: <what is wrong>`` and an indented hint, on stderr; no traceback."""
    if isinstance(exc, HostError):
        print(f"dbmatrix: {exc.host}: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return
    name = host or getattr(exc, "host", None)
    print(f"dbmatrix: {name + ': ' if name else ''}{exc}", file=sys.stderr)


def check_hosts(inventory) -> None:
    """The checks that need no connection (key files, known_hosts entries) for every host; each problem
    is printed, and any raises :class:`HostProblems` before a connection is made."""
    problems = 0
    for h in inventory.hosts:
        try:
            h.check_access()
        except HostError as exc:
            print_host_error(exc)
            problems += 1
    if problems:
        raise HostProblems(f"{problems} host(s) cannot be used")


def studies_of(args: argparse.Namespace, for_run: bool = True, access: bool = False) -> list:
    """The profile's studies (or the one --spec), with results for running or for reading; with
    `access`, the inventory's hosts are checked for what can be checked before connecting. For running,
    a data choice that names no directory (auto, reference, runs) means data/runs/<experiment>."""
    from dbmatrix.datachoice import is_keyword
    from dbmatrix.study import load_studies

    data = getattr(args, "data", None)
    if for_run and is_keyword(data):
        data = None
    studies = load_studies(args.profile, spec=args.spec, inventory=args.inventory, results_dir=args.results,
                           data=data, for_run=for_run)
    if access:
        checked: list[object] = []
        for st in studies:  # the studies of a profile share one inventory: check (and print) it once
            if st.inventory not in checked:
                checked.append(st.inventory)
                check_hosts(st.inventory)
    return studies
