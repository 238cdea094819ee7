"""`dbmatrix` command line: thin wrappers over the same calls the notebooks make."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from . import paths
from .remote import RunInterrupted
from .spec import SpecError

NOTEBOOKS = ("00-host-setup", "10-run-matrix", "20-analysis", "30-figures")


def _study(args: argparse.Namespace):
    from .study import load_study

    return load_study(args.profile, spec=args.spec, inventory=args.inventory, results_dir=args.results)


def cmd_plan(args: argparse.Namespace) -> int:
    from .runner import format_duration, media_used, summarize_plan

    study = _study(args)
    exp = study.experiment
    s = summarize_plan(exp)
    print(f"experiment {exp.name} (spec {study.spec_path}, digest {exp.digest()}), seed {exp.seed}")
    print(f"workload {exp.workload.name}: {exp.workload.tables} tables x {exp.workload.table_size} rows, "
          f"rand-type {exp.workload.rand_type}; warm-up {exp.warmup_s}s, measure {exp.measure_s}s")
    varied = exp.varied_factors()
    print(f"{len(exp.cells())} cells (varied: {', '.join(varied) or 'none'}) x {exp.repetitions} "
          f"repetitions = {len(s.runs)} runs on {', '.join(h.name for h in study.inventory.hosts)}")
    info = exp.design_info()
    if info["design"] == "fractional":
        print(f"design: {info['fraction']} fraction of resolution {info['resolution']} "
              f"(generators {', '.join(info['generators'])}; "
              + ", ".join(f"{k}={v}" for k, v in info["letters"].items()) + ")")
    media = study.inventory.hosts[0].media  # every host defines the spec's media (checked at load)
    print("media: " + ", ".join(m + (f" (emulates {media[m].emulates})" if media[m].emulates else "")
                                for m in media_used(exp)))
    if exp.comparisons:
        print("comparisons: " + "; ".join(f"{c.factor} {c.a} vs {c.b}" + (f" within {', '.join(c.within)}"
                                                                        if c.within else "")
                                        for c in exp.comparisons))
    if exp.noise.adaptive:
        print(f"adaptive: up to {exp.noise.max_repetitions} repetitions until the 95 % CI half-width is "
              f"under {exp.noise.target_halfwidth_pct:g} % of the mean")
    print("datasets to prepare: " + ", ".join(s.datasets))
    print(f"{'order':>5} {'block':>5}  run_id")
    for row in s.table():
        print(f"{row['order']:>5} {row['block']:>5}  {row['run_id']}")
    print(f"estimated duration: {format_duration(s.estimated_s)} (results in {study.store.root})")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .runner import run_study

    counts = run_study(_study(args), progress=not args.no_progress, max_runs=args.max_runs)
    print(json.dumps(counts))
    return 0 if counts["failed"] == 0 else 3


def cmd_status(args: argparse.Namespace) -> int:
    from .runner import format_duration, study_status, time_accounting

    study = _study(args)
    st = study_status(study)
    print(f"{st['experiment']}: {st['ok']}/{st['planned']} runs done, {len(st['failed'])} failed, "
          f"{st['pending']} not started; ~{format_duration(st['estimated_remaining_s'])} left "
          f"({st['results_dir']})")
    for run_id in st["failed"]:
        print(f"  failed: {run_id}")
    t = time_accounting(study.store)
    if t["total_s"]:
        steps = ", ".join(f"{k[:-2]} {format_duration(v)}" for k, v in t.items()
                          if k.endswith("_s") and k != "total_s" and v >= 1)
        print(f"time recorded {format_duration(t['total_s'])}, {t['measure_fraction']:.0%} of it measuring "
              f"({steps})")
    return 0


def cmd_setup(args: argparse.Namespace) -> int:
    from .hostsetup import setup_packages
    from .inventory import load_inventory
    from .remote import LocalHost

    roles = tuple(r for r in args.roles.split(",") if r)
    hosts = load_inventory(args.inventory).hosts if args.inventory else None
    targets = [h.connect() for h in hosts] if hosts else [LocalHost()]
    for host in targets:
        with host:
            rep = setup_packages(host, roles, dry_run=args.dry_run)
        state = ("would install " if args.dry_run else "installed ") + " ".join(rep.missing_before) \
            if rep.changed else "all packages present"
        print(f"{rep.host} ({rep.family}): {state}")
        for c in rep.commands if args.dry_run else ():
            print(f"  {c}")
    return 0


def run_notebooks(profile: str, names: Sequence[str], results: str | None = None,
                  spec: str | None = None, inventory: str | None = None) -> list[Path]:
    """Execute notebooks in order with papermill; executed copies go next to the run's data."""
    import papermill as pm
    import yaml

    params = yaml.safe_load(paths.params_file(profile).read_text()) or {}
    params["profile"] = profile
    for k, v in (("results_dir", results), ("spec", spec), ("inventory", inventory)):
        if v:
            params[k] = v
    out_dir = Path(results) if results else paths.results_dir(profile)
    out_dir = out_dir / "notebooks"
    out_dir.mkdir(parents=True, exist_ok=True)
    nb_dir = paths.repo_root() / "notebooks"
    done = []
    for name in names:
        src = nb_dir / f"{name}.ipynb"
        dst = out_dir / f"{name}.ipynb"
        print(f"papermill {src.relative_to(paths.repo_root())} -> {dst}", flush=True)
        pm.execute_notebook(str(src), str(dst), parameters=params, cwd=str(nb_dir), kernel_name="python3",
                            progress_bar=False, log_output=True)
        done.append(dst)
    return done


def cmd_notebooks(args: argparse.Namespace) -> int:
    names = NOTEBOOKS if not args.only else tuple(n for n in NOTEBOOKS if n.split("-")[0] in args.only.split(","))
    run_notebooks(args.profile, names, args.results, args.spec, args.inventory)
    return 0


def cmd_paper(args: argparse.Namespace) -> int:
    from .paper import build_paper

    print(build_paper())
    return 0


def cmd_media(args: argparse.Namespace) -> int:
    """Show the plan, verify, apply or tear down the inventory's media (all, or those named)."""
    from . import media
    from .inventory import load_inventory

    inv = load_inventory(args.inventory)
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
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dbmatrix", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    def study_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--profile", default="quick", help="smoke, quick or full (notebooks/params/*.yaml)")
        sp.add_argument("--spec", help="experiment spec YAML (default: the profile's)")
        sp.add_argument("--inventory", help="inventory YAML (default: localhost)")
        sp.add_argument("--results", help="results directory (default: data/<profile>)")

    sp = sub.add_parser("plan", help="show cells, datasets and estimated duration; runs nothing")
    study_args(sp)
    sp.set_defaults(func=cmd_plan)
    sp = sub.add_parser("run", help="run (or resume) the matrix")
    study_args(sp)
    sp.add_argument("--max-runs", type=int, help="stop after this many runs (resume later)")
    sp.add_argument("--no-progress", action="store_true")
    sp.set_defaults(func=cmd_run)
    sp = sub.add_parser("status", help="done, failed and pending runs")
    study_args(sp)
    sp.set_defaults(func=cmd_status)
    sp = sub.add_parser("setup", help="install OS packages on this machine or the inventory's hosts")
    sp.add_argument("--roles", default="server", help="comma list of: server, paper, test")
    sp.add_argument("--inventory", help="inventory YAML (default: this machine)")
    sp.add_argument("--dry-run", action="store_true", help="print the commands only")
    sp.set_defaults(func=cmd_setup)
    sp = sub.add_parser("notebooks", help="execute the notebooks with papermill")
    study_args(sp)
    sp.add_argument("--only", help="comma list of notebook numbers, e.g. 20,30")
    sp.set_defaults(func=cmd_notebooks)
    sp = sub.add_parser("media", help="plan, verify, ensure (apply) or tear down storage media")
    sp.add_argument("action", choices=("plan", "verify", "ensure", "teardown"))
    sp.add_argument("names", nargs="*", help="media names (default: all of each host)")
    sp.add_argument("--inventory", help="inventory YAML (default: localhost)")
    sp.set_defaults(func=cmd_media)
    sp = sub.add_parser("paper", help="build paper/main.pdf with latexmk")
    sp.set_defaults(func=cmd_paper)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, RunInterrupted):
        print("interrupted: completed runs are kept; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
