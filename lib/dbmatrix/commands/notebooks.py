"""`dbmatrix notebooks` (papermill) and `dbmatrix paper` (latexmk)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from dbmatrix import paths
from dbmatrix.commands.common import log_mode
from dbmatrix.commands.interrupts import execute_notebook

NOTEBOOKS = ("00-host-setup", "10-run-matrix", "20-analysis", "30-figures")

# As committed, 00 and 10 print what they would do; `dbmatrix notebooks` (make reproduce) asks them to act.
ACTS: dict[str, dict[str, object]] = {"00-host-setup": {"confirm_install": True}, "10-run-matrix": {"run": True}}


def notebook_parameters(profile: str, results: str | None = None, spec: str | None = None,
                        inventory: str | None = None, data: str | None = None,
                        campaign: str | None = None) -> dict[str, object]:
    """What papermill injects: the profile, the data choice (auto unless given: the notebooks' own default
    is the committed reference), and the overrides given. Paths given are made absolute here, relative to
    the current directory (the notebooks run in notebooks/); the profile's own inventory stays as its
    params file says (relative to the repository). Running the notebooks from the command line is the
    explicit request that notebooks 00 and 10 act (their `confirm_install`, `run`), which
    :func:`run_notebooks` adds to those two."""
    from dbmatrix.datachoice import is_keyword, parse_choice
    from dbmatrix.study import profile_params

    injected: dict[str, object] = {"profile": profile, "inventory": profile_params(profile).get("inventory"),
                                   "data": parse_choice(data)}
    for k, v in (("results_dir", results), ("data", data), ("spec", spec), ("inventory", inventory)):
        if v and not (k == "data" and is_keyword(v)):
            injected[k] = str(Path(v).resolve())
    if campaign:  # notebook 10's campaign choice (its own default: last)
        injected["campaign"] = str(campaign)
    return injected


def kernel_logging_arguments(mode: str) -> list[str]:
    """The kernel's command line options that configure its logging as this command's (`mode`): its
    progress lines then go to the cells' stderr, which :func:`run_notebooks` forwards to the terminal. A
    kernel JupyterLab starts has no such option: the notebook shows its progress widget only."""
    return [f"--IPKernelApp.exec_lines=import dbmatrix.cli; dbmatrix.cli.configure_logging({mode!r})"]


def run_notebooks(profile: str, names: Sequence[str], results: str | None = None,
                  spec: str | None = None, inventory: str | None = None,
                  data: str | None = None, campaign: str | None = None, log: str = "text") -> list[Path]:
    """Execute notebooks in order with papermill. The executed copies (with papermill's provenance)
    go to data/notebooks/<profile>/ (or <results>/notebooks/ for a single study's directory).

    Unless `log` is ``quiet``, what the cells print goes to this terminal as it comes (stdout to stdout,
    stderr to stderr: papermill's ``stdout_file``/``stderr_file``; its ``log_output`` would also log every
    displayed table), and the kernel logs as this command does (:func:`kernel_logging_arguments`), so the
    run notebook prints a line per run. A Ctrl-C goes to the kernel (:mod:`dbmatrix.commands.interrupts`)."""
    injected = notebook_parameters(profile, results, spec, inventory, data, campaign)
    out_dir = Path(results) / "notebooks" if results else paths.notebooks_dir(profile)
    out_dir.mkdir(parents=True, exist_ok=True)
    nb_dir = paths.repo_root() / "notebooks"
    done = []
    for name in names:
        src = nb_dir / f"{name}.ipynb"
        dst = out_dir / f"{name}.ipynb"
        print(f"papermill {src.relative_to(paths.repo_root())} -> {dst}", flush=True)
        params = {k: v for k, v in injected.items() if k != "campaign" or name.startswith("10-")}
        params.update(ACTS.get(name, {}))
        streams = {} if log == "quiet" else {"stdout_file": sys.stdout, "stderr_file": sys.stderr,
                                             "extra_arguments": kernel_logging_arguments(log)}
        execute_notebook(str(src), str(dst), parameters=params, cwd=str(nb_dir), kernel_name="python3",
                         progress_bar=False, log_output=False, **streams)
        done.append(dst)
    return done


def cmd_notebooks(args: argparse.Namespace) -> int:
    names = NOTEBOOKS if not args.only else tuple(n for n in NOTEBOOKS if n.split("-")[0] in args.only.split(","))
    run_notebooks(args.profile, names, args.results, args.spec, args.inventory, args.data,
                  None if args.campaign is None else str(args.campaign), log=log_mode(args))
    return 0


def cmd_paper(args: argparse.Namespace) -> int:
    from dbmatrix.publish.paper import build_paper

    print(build_paper(paths.paper_dir(args.out) if args.out else None))
    return 0
