"""Building, checking and removing a medium on a host (through :class:`dbmatrix.hosts.remote.Host`):
:func:`ensure`, :func:`verify`, :func:`teardown`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import STEP_TIMEOUT_S, CgroupLayout, MediaError, MediumState, Step, checked, fs_medium, q
from dbmatrix.hosts.media.plan import apply_steps, reset_steps, teardown_steps
from dbmatrix.hosts.media.prereq import prerequisite_problems, prerequisite_script
from dbmatrix.hosts.media.throttle import candidate_groups, detect_cgroup_layout
from dbmatrix.hosts.media.verify import evaluate, facts_sections
from dbmatrix.hosts.remote import CommandResult, Host


@dataclass
class _Ctx:
    host: Host
    root: bool
    owner: str | None = None  # uid:gid of a non-root login, who gets mount points and cgroup.procs
    _sudo_ok: bool | None = field(default=None, repr=False)

    @classmethod
    def of(cls, host: Host) -> _Ctx:
        root = host.is_root()
        owner = None if root else host.run("echo $(id -u):$(id -g)").stdout.strip()
        return cls(host, root, owner)

    def run(self, cmd: str, *, privileged: bool = True, check: bool = False,
            timeout: float | None = STEP_TIMEOUT_S) -> CommandResult:
        if privileged:
            cmd = self.host.privileged(cmd, root=self.root)
        return self.host.run(cmd, check=check, timeout=timeout)

    def need_root(self, medium: Medium) -> None:
        if self.root or fs_medium(medium).kind == "dir":
            return
        if self._sudo_ok is None:
            self._sudo_ok = self.host.run("sudo -n true", check=False).ok
        if not self._sudo_ok:
            raise MediaError(f"{medium.kind} medium {medium.name!r} on host {self.host.name}: building it "
                             "needs root or passwordless sudo")


def _layout(host: Host, m: Medium) -> CgroupLayout | None:
    return detect_cgroup_layout(host, m.options["cgroup"]) if m.kind == "throttled" else None


def _verify(ctx: _Ctx, m: Medium, layout: CgroupLayout | None) -> MediumState:
    privileged = fs_medium(m).kind != "dir"
    prelude, sec = facts_sections(m, layout)
    got = ctx.host.run_sections(sec, prelude=prelude, privileged=privileged, root=ctx.root, timeout=120)
    return evaluate(m, {name: s.text for name, s in got.items()}, layout, ctx.host.name)


def verify(host: Host, medium: Medium) -> MediumState:
    """The medium as it is on `host`; MediaError says what differs from the recipe."""
    m = checked(medium)
    ctx = _Ctx.of(host)
    return _verify(ctx, m, _layout(host, m))


def _prereqs(ctx: _Ctx, m: Medium) -> None:
    ctx.need_root(m)
    out = ctx.run(prerequisite_script(m), privileged=fs_medium(m).kind != "dir", timeout=120).stdout
    problems = prerequisite_problems(m, out, ctx.host.name)
    if problems:
        raise MediaError("; ".join(problems))


def _run_steps(ctx: _Ctx, m: Medium, steps: Sequence[Step]) -> list[str]:
    ran: list[str] = []
    for s in steps:
        if s.done and ctx.run(s.done, privileged=s.privileged, timeout=120).ok:
            continue
        r = ctx.run(s.command, privileged=s.privileged)
        if not r.ok:
            tail = (r.stderr or r.stdout).strip()[-1500:]
            done = f"\nalready applied (teardown removes them): {'; '.join(ran)}" if ran else ""
            raise MediaError(f"{m.kind} medium {m.name!r} on host {ctx.host.name}: {s.what} failed "
                             f"(exit {r.exit_code}): {s.command}\n{tail}{done}", applied=ran)
        ran.append(s.command)
    return ran


def ensure(host: Host, medium: Medium) -> MediumState:
    """Make `medium` exist as its recipe says and return what verify found.

    Already in place: nothing runs (``commands == ()``). Otherwise prerequisites are checked first
    (MediaError naming what is missing), then only the steps whose done-test fails run."""
    m = checked(medium)
    ctx = _Ctx.of(host)
    layout = _layout(host, m)
    try:
        return _verify(ctx, m, layout)
    except MediaError:
        pass
    _prereqs(ctx, m)
    ran = _run_steps(ctx, m, reset_steps(m))  # what processes of an earlier session left
    ran += _run_steps(ctx, m, apply_steps(m, layout=layout, owner=ctx.owner))
    try:
        state = _verify(ctx, m, layout)
    except MediaError as exc:
        hint = " (teardown, then ensure again, to rebuild it)" if ran == [] else ""
        raise MediaError(f"{exc}{hint}") from None
    return replace(state, commands=tuple(ran))


def teardown(host: Host, medium: Medium) -> None:
    """Unmount, detach, remove backing files and cgroups; nothing to do is fine."""
    m = checked(medium)
    ctx = _Ctx.of(host)
    if fs_medium(m).kind == "dir":
        return
    ctx.need_root(m)
    if m.kind == "throttled":
        for cg in candidate_groups(m):
            r = ctx.run(f"cat {q(cg + '/cgroup.procs')} 2>/dev/null", timeout=60)
            pids = r.stdout.split()
            if pids:
                raise MediaError(f"throttled medium {m.name!r} on host {host.name}: processes still in "
                                 f"{cg}: {' '.join(pids)}; stop them before teardown")
    _run_steps(ctx, m, teardown_steps(m))
