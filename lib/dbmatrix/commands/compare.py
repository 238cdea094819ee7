"""`dbmatrix compare`: two result sets of the same studies side by side, and a CI gate on them
(:mod:`dbmatrix.analyse.compare`; the sets are read by :mod:`dbmatrix.resultsets`)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dbmatrix import paths
from dbmatrix.spec.experiment import SpecError

if TYPE_CHECKING:
    import pandas as pd

    from dbmatrix.analyse.compare import Comparison
    from dbmatrix.resultsets import ResultSet

HELP = "B against A, like for like: per cell the change B/A with an interval holding the campaign level; a CI gate"
DESCRIPTION = """\
Sets result set B against result set A, like for like: the same studies of one
profile on both sides (a data root's studies of other profiles are left out;
different studies are refused, exit 2).

Per cell (matched on its factor levels): the percent change B/A of throughput
and p95 latency with an interval holding the runs and the campaign level
(dataset load x campaign, campaign x cell: each side's own components when it
has two campaigns or more, else the reference's), as the claims' intervals do.
All cell intervals hold together at 95 % (Bonferroni). Then the claims'
verdicts, judged on the same studies on both sides.

The gate --fail-above PCT fails (exit 1) when a cell's whole interval is more
than PCT % worse: throughput below (1 - PCT/100) x A's, p95 latency above
(1 + PCT/100) x A's. A point estimate beyond PCT % inside a wide interval
passes; a shift of all cells together is reported, not gated. Exit 2 when a
study has no matched cell, or the gate has no interval to test.

  dbmatrix compare reference runs         # your runs against the reference
  dbmatrix compare reference --study tpcc-paper --campaigns 1 2 \\
      --fail-above 10                     # A/A: the reference's own campaigns
  dbmatrix compare A B --fail-above 5 --json
"""


def add_compare_parser(sub: argparse._SubParsersAction, profiles: str = "") -> argparse.ArgumentParser:
    """The `compare` subcommand's parser (`profiles`: the shared --profile help, unused: compare's default
    differs)."""
    sp = sub.add_parser("compare", help=HELP, description=DESCRIPTION,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("a", nargs="?", help="result set A: a study's results directory (with processed/), a data "
                                         "root holding several, or the words reference / runs (default: reference)")
    sp.add_argument("b", nargs="?", help="result set B (default: runs, i.e. data/runs)")
    sp.add_argument("--study", help="compare this experiment only (needed with --campaigns)")
    sp.add_argument("--campaigns", nargs=2, type=int, metavar=("KA", "KB"),
                    help="campaign KA against campaign KB of --study, both from result set A (default: the "
                         "study's data); a one-campaign side takes the campaign level from all its campaigns")
    sp.add_argument("--profile", help=f"the profile whose studies are compared: one of {', '.join(paths.profiles())} "
                    "(default: --study's, else the one all of B's studies belong to, else quick)")
    sp.add_argument("--format", choices=("text", "markdown", "csv", "json"), default="text",
                    help="text (default; fits --width), markdown, csv (the cells) or json")
    sp.add_argument("--json", dest="as_json", action="store_true", help="the same as --format json")
    sp.add_argument("--out", help="write to this file (csv: the claims beside it, <name>-claims.csv)")
    sp.add_argument("--fail-above", type=float, metavar="PCT",
                    help="exit 1 when a cell's interval lies wholly more than PCT %% on the worse side "
                         "(throughput down, p95 latency up); a point estimate alone never fails")
    sp.add_argument("--sort", choices=("cell", "change"), default="cell",
                    help="cell: the design's order; change: the worst change first (by point estimate)")
    sp.add_argument("--only-changed", action="store_true",
                    help="only cells whose interval lies beyond the threshold (either way) and claims whose "
                         "verdict differs")
    sp.add_argument("--width", type=int, metavar="N", help="text width (default: the terminal's, at least 60)")
    sp.add_argument("--no-claims", action="store_true", help="cells only (the claims take a few seconds)")
    sp.set_defaults(func=cmd_compare)
    return sp


def _sides(args: argparse.Namespace) -> list[ResultSet]:
    from dbmatrix.resultsets import load_set, spec_for
    from dbmatrix.spec.experiment import load_spec
    from dbmatrix.study import data_source

    if args.campaigns:
        if not args.study or args.b:
            raise SpecError("compare --campaigns KA KB: give --study EXPERIMENT and at most one result set "
                            "(default: the study's data as --data auto chooses it)")
        spec = spec_for(args.study)
        root = args.a or str(data_source(load_spec(spec), "auto").path.parent if spec is not None
                             else paths.reference_dir(args.study).parent)
        return [load_set(root, args.study, k) for k in args.campaigns]
    return [load_set(args.a or "reference", args.study), load_set(args.b or "runs", args.study)]


def cmd_compare(args: argparse.Namespace) -> int:
    """B against A (module doc); exit 1 when the gate fails, 2 when the sets are not like for like, a study
    has no matched cell, or the gate has no interval to test."""
    from dbmatrix.analyse import compare, compare_text
    from dbmatrix.resultsets import choose_profile, like_for_like, load_studies, reference_runs, side_claims

    a, b = _sides(args)
    profile = choose_profile(a, b, args.profile, args.study)
    notes = like_for_like(a, b, profile)
    refs = {e: reference_runs(e, a, b) for e in a.runs}
    claims: tuple[pd.DataFrame | None, pd.DataFrame | None, str] = (None, None, "claims not compared (--no-claims)")
    if not args.no_claims:
        load_studies(a, profile)
        load_studies(b, profile)
        claims = side_claims(a, b)
    try:
        result = compare.compare_sets(a.label, a.runs, b.label, b.runs, claims[0], claims[1],
                                      references={e: r for e, (r, _) in refs.items()}, fail_above=args.fail_above,
                                      claims_note=claims[2], notes=notes,
                                      reference_labels={e: label for e, (_, label) in refs.items()})
    except compare.NotComparable as exc:
        raise SpecError(f"compare: not like for like: {exc}") from None
    fmt = "json" if args.as_json else args.format
    width = max(args.width or shutil.get_terminal_size((80, 24)).columns, 60)
    if fmt == "json":
        body = compare_text.to_json(result, args.sort, args.only_changed)
    elif fmt == "csv":
        body = compare_text.to_csv(result)
    else:
        body = compare_text.render(result, width, args.sort, args.only_changed, markdown=fmt == "markdown",
                                   claims=not args.no_claims)
    if args.out:
        Path(args.out).write_text(body)
        if fmt == "csv" and result.claims is not None:
            result.claims.to_csv(Path(args.out).with_name(Path(args.out).stem + "-claims.csv"), index=False)
        print(f"comparison written to {args.out}")
    else:
        sys.stdout.write(body)
    return _exit(result)


def _exit(result: Comparison) -> int:
    """The exit status, with its reason on stderr."""
    from dbmatrix.analyse.compare_text import failures

    unmatched = result.unmatched_studies()
    if unmatched:
        print(f"dbmatrix: compare: nothing matched in {', '.join(unmatched)}: no cell has the same factor levels "
              f"on both sides ({result.a_label} / {result.b_label}); nothing was compared", file=sys.stderr)
        return 2
    if result.fail_above is None:
        return 0
    if result.n_intervals == 0:
        print("dbmatrix: compare: the gate has nothing to test: no matched cell has an interval (one run per "
              "cell and no campaign level to borrow)", file=sys.stderr)
        return 2
    reg = result.regressions()
    if reg.empty:
        return 0
    print(f"dbmatrix: compare: gate --fail-above {result.fail_above:g} failed: {failures(reg)}", file=sys.stderr)
    return 1
