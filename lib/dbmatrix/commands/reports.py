"""`dbmatrix report` and `readme`: the HTML report, the README's generated blocks (`compare`:
:mod:`dbmatrix.commands.compare`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dbmatrix import paths
from dbmatrix.spec.experiment import SpecError


def cmd_report(args: argparse.Namespace) -> int:
    """One self-contained HTML file of the build `dbmatrix figures` wrote (:mod:`dbmatrix.publish.report`),
    with the user's umask; --html into a folder that does not exist is an error (the default, data/report.html
    under the output root, makes its folder)."""
    from dbmatrix.publish.report import write_report

    if args.html:  # the user's own path: a missing folder is a typo more often than a wish
        folder = Path(args.html).parent
        if not folder.is_dir():
            raise SpecError(f"report --html: folder {folder} does not exist"
                            + ("" if not folder.exists() else " (it is not a folder)") + "; create it first")
    target = args.html or str(paths.output_root() / "data" / "report.html")
    try:
        path = write_report(target, args.out)
    except FileNotFoundError as exc:
        raise SpecError(str(exc)) from None
    print(f"report: {path} ({path.stat().st_size // 1024} KiB; open file://{path.resolve()})")
    return 0


def cmd_readme(args: argparse.Namespace) -> int:
    """The README's generated blocks (claims, counts, times, requirements) from the committed data."""
    from dbmatrix.readme import update_files

    changed = update_files(paths.repo_root(), paths.reference_root(), check=args.check)
    verb = "differ from the committed data" if args.check else "rewritten"
    print(f"generated blocks {verb}: {', '.join(changed)}" if changed else "generated blocks up to date")
    return 1 if changed and args.check else 0
