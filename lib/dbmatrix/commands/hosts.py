"""`dbmatrix setup` and `dbmatrix media`: the machines' packages and storage media."""

from __future__ import annotations

import argparse
import json
import sys

from dbmatrix.commands.common import check_hosts, print_host_error
from dbmatrix.hosts.remote import CommandError, HostError
from dbmatrix.spec.experiment import SpecError


def cmd_setup(args: argparse.Namespace) -> int:
    from dbmatrix.hosts.inventory import load_inventory
    from dbmatrix.hosts.remote import LocalHost
    from dbmatrix.hosts.setup import SetupError, setup_packages

    roles = tuple(r for r in args.roles.split(",") if r)
    inventory = load_inventory(args.inventory) if args.inventory else None
    if inventory is not None:
        check_hosts(inventory)  # before any connection
    connects = [(h.name, h.connect) for h in inventory.hosts] if inventory else [("localhost", LocalHost)]
    failed = 0
    for name, connect in connects:
        try:
            with connect() as host:
                rep = setup_packages(host, roles, dry_run=args.dry_run)
        except (HostError, SetupError, CommandError) as exc:  # the other hosts are still set up
            print_host_error(exc, name)
            failed += 1
            continue
        state = ("would install " if args.dry_run else "installed ") + " ".join(rep.missing_before) \
            if rep.changed else "all packages present"
        print(f"{rep.host} ({rep.family}): {state}")
        for c in rep.commands if args.dry_run else ():
            print(f"  {c}")
        # the versions read back from the package manager after installing (dry run: as found)
        for line in rep.lines():
            print(f"  {line}")
    if failed:
        print(f"dbmatrix: setup failed on {failed} of {len(connects)} host(s)", file=sys.stderr)
        return 2
    return 0


def cmd_media(args: argparse.Namespace) -> int:
    """Show the plan, verify, apply or tear down the inventory's media (all, or those named)."""
    from dbmatrix.hosts import media
    from dbmatrix.hosts.inventory import load_inventory

    inv = load_inventory(args.inventory)
    if args.action != "plan":
        check_hosts(inv)
    failed = 0
    for hs in inv.hosts:
        names = args.names or sorted(hs.media)
        unknown = sorted(set(names) - set(hs.media))
        if unknown:
            raise SpecError(f"media: {', '.join(unknown)} not defined on host {hs.name!r}; its media are: "
                            f"{', '.join(sorted(hs.media))}")
        if args.action == "plan":
            for n in names:
                print(f"# {hs.name} {n} ({hs.media[n].kind})")
                print("\n".join(media.plan(hs.media[n])))
            continue
        with hs.connect() as host:
            for n in names:
                m = hs.media[n]
                try:
                    if args.action == "teardown":
                        media.teardown(host, m)
                        print(f"{hs.name} {n}: torn down")
                        continue
                    st = media.ensure(host, m) if args.action == "ensure" else media.verify(host, m)
                    print(f"{hs.name} {n}: ok {json.dumps(st.to_dict(), sort_keys=True)}")
                except media.MediaError as exc:
                    failed += 1
                    print(f"{hs.name} {n}: {exc}")
            if args.action == "teardown" and not args.names:  # the Galera followers' CPU groups (cpu_max)
                from dbmatrix.hosts.cpulimit import teardown_followers
                teardown_followers(host)
    return 1 if failed else 0
