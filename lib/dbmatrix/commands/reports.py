"""`dbmatrix compare`, `report` and `readme`: result sets side by side, the HTML report, the README's
generated blocks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dbmatrix import paths
from dbmatrix.spec.experiment import SpecError


def cmd_compare(args: argparse.Namespace) -> int:
    """B against A (:mod:`dbmatrix.analyse.compare`); exits 1 when --fail-above finds a regression."""
    from dbmatrix.analyse import compare
    from dbmatrix.resultsets import claims_table, load_set, spec_for
    from dbmatrix.spec.experiment import load_spec
    from dbmatrix.study import data_source

    if args.campaigns:
        if not args.study or args.b:
            raise SpecError("compare --campaigns KA KB: give --study EXPERIMENT and at most one result set "
                            "(default: the study's data as --data auto chooses it)")
        spec = spec_for(args.study, args.profile)
        root = args.a or str(data_source(load_spec(spec), "auto").path.parent if spec is not None
                             else paths.reference_dir(args.study).parent)
        sides = [load_set(root, args.profile, args.study, k) for k in args.campaigns]
    else:
        sides = [load_set(args.a or "reference", args.profile, args.study),
                 load_set(args.b or "runs", args.profile, args.study)]
    a, b = sides
    claims = [None, None] if args.no_claims else [claims_table(s.studies, s.campaign) for s in sides]
    result = compare.compare_sets(a.label, a.runs, b.label, b.runs, *claims)
    text = {"markdown": compare.markdown, "json": compare.to_json}.get(args.format)
    body = text(result, args.fail_above) if text else compare.to_csv(result)
    if args.out:
        Path(args.out).write_text(body)
        if args.format == "csv" and result.claims is not None:
            result.claims.to_csv(Path(args.out).with_name(Path(args.out).stem + "-claims.csv"), index=False)
        print(f"comparison written to {args.out}")
    else:
        sys.stdout.write(body)
    if args.fail_above is not None:
        reg = result.regressions(args.fail_above)
        if not reg.empty:
            print(f"dbmatrix: {len(reg)} decided regression(s) beyond {args.fail_above:g} %: "
                  + ", ".join(f"{r.cell_id} {r.metric} x{r.ratio:.3f}" for r in reg.itertuples()), file=sys.stderr)
            return 1
    return 0


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
