"""A scripted :class:`Host` for tests: records every command and answers by pattern.

In the spirit of invoke's ``MockContext``, but at our own seam, so the code under test gets a real
:class:`~dbmatrix.hosts.remote.Host` and cannot tell it from :class:`LocalHost` or :class:`SSHHost`::

    host = ScriptedHost(strict=True)
    host.on(r"^findmnt ", stdout=FINDMNT_JSON)
    host.on(r"\\bmount ", exit_code=32, stderr="mount: wrong fs type", times=1)
    host.on(r"^systemctl ", raises=RunInterrupted())
    ...
    assert host.ran(r"umount ") and host.count(r"^losetup ") == 1

Rules
    ``on(pattern, ...)`` adds a rule; ``pattern`` is a regex *searched* in the command (or a
    ``callable(command) -> bool``). The **last** added rule that matches and still has ``times`` left
    answers, so a test can override a default rule by adding a later one. ``stdout``, ``stderr`` and
    ``exit_code`` may also be callables of the command, evaluated when it runs (to answer from state,
    e.g. :attr:`files`, or to change that state).
Unmatched commands
    answer ``default`` (an ok, empty result unless given), or raise
    ``AssertionError("unexpected command: ...")`` with ``strict=True``; with ``passthrough=host`` they
    (and file copies) run on that real host instead, still recorded: a recording wrapper around
    :class:`LocalHost` for integration tests that check what was (not) run.
Like the real hosts
    ``check=True`` raises :class:`CommandError` on a non-zero exit; a rule whose ``duration_s``
    exceeds the ``timeout`` raises a timed-out :class:`CommandError` (exit 124). ``id -u`` answers
    from ``root`` (a built-in rule, overridable like any other).
Files
    ``put``/``get``/``exists``/``read_text`` are recorded as the pseudo-commands ``put <remote>``,
    ``get <remote>``, ``test -e <path>`` and ``cat <path>``. A rule matching one answers it (``raises``
    raises, e.g. for an unreachable host; ``get`` writes the rule's stdout, ``exists`` is its exit
    code); otherwise they work on the in-memory :attr:`files` dict (remote path -> bytes), ``get``
    writing the content to the local path.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dbmatrix.hosts.remote import CommandError, CommandResult, Host

Pattern = str | re.Pattern[str] | Callable[[str], bool]
Answer = str | Callable[[str], str]


@dataclass
class Rule:
    """One scripted answer; ``times=None`` answers forever, else that many times."""

    pattern: Pattern
    stdout: Answer = ""
    stderr: Answer = ""
    exit_code: int | Callable[[str], int] = 0
    times: int | None = None
    raises: BaseException | None = None
    duration_s: float = 0.0
    used: int = field(default=0, compare=False)

    def matches(self, command: str) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        if callable(self.pattern):
            return bool(self.pattern(command))
        return re.search(self.pattern, command) is not None


@dataclass(frozen=True)
class Call:
    """One recorded ``run`` with its keyword arguments."""

    command: str
    check: bool
    timeout: float | None
    env: dict[str, str] | None


def _value(answer: object, command: str) -> object:
    return answer(command) if callable(answer) else answer


class ScriptedHost(Host):
    """A Host that runs nothing: it records commands and answers them from rules (see the module)."""

    def __init__(self, name: str = "scripted", *, is_local: bool = True, root: bool = True,
                 default: CommandResult | None = None, strict: bool = False, passthrough: Host | None = None):
        self.name = name
        self.passthrough = passthrough
        self.is_local = is_local
        self.default = default
        self.strict = strict
        self.rules: list[Rule] = []
        self.commands: list[str] = []
        self.calls: list[Call] = []
        self.files: dict[str, bytes] = {}
        self.closed = False
        if passthrough is None:
            self.on(r"^id -u$", stdout="0\n" if root else "1000\n")

    # ------------------------------------------------------------------ scripting
    def on(self, pattern: Pattern, stdout: Answer = "", stderr: Answer = "",
           exit_code: int | Callable[[str], int] = 0, *, times: int | None = None,
           raises: BaseException | None = None, duration_s: float = 0.0) -> Rule:
        """Answer commands matching ``pattern`` (the latest matching rule with ``times`` left wins)."""
        rule = Rule(pattern, stdout, stderr, exit_code, times, raises, duration_s)
        self.rules.append(rule)
        return rule

    def ran(self, pattern: Pattern) -> bool:
        """Whether any recorded command matches ``pattern``."""
        return self.count(pattern) > 0

    def count(self, pattern: Pattern) -> int:
        """How many recorded commands match ``pattern``."""
        probe = Rule(pattern)
        return sum(1 for c in self.commands if probe.matches(c))

    def matching(self, pattern: Pattern) -> list[str]:
        """The recorded commands that match ``pattern``, in order."""
        probe = Rule(pattern)
        return [c for c in self.commands if probe.matches(c)]

    # ------------------------------------------------------------------ Host
    def _rule(self, command: str) -> Rule | None:
        """Record `command`; return the rule that answers it (raising its exception), if any."""
        self.commands.append(command)
        rule = next((r for r in reversed(self.rules) if r.matches(command)), None)
        if rule is not None:
            rule.used += 1
            if rule.raises is not None:
                raise rule.raises
        return rule

    def run(self, command, *, check=True, timeout=None, env=None, on_output=None):
        self.calls.append(Call(command, check, timeout, dict(env) if env is not None else None))
        rule = self._rule(command)
        if rule is None and self.passthrough is not None:
            return self.passthrough.run(command, check=check, timeout=timeout, env=env, on_output=on_output)
        if rule is None:
            if self.strict:
                raise AssertionError(f"unexpected command: {command}")
            base = self.default or CommandResult(command, "", "", 0, 0.0)
            result = CommandResult(command, base.stdout, base.stderr, base.exit_code, base.duration_s)
        else:
            result = CommandResult(command, str(_value(rule.stdout, command)),
                                   str(_value(rule.stderr, command)),
                                   int(_value(rule.exit_code, command)),
                                   rule.duration_s)
        if on_output is not None:  # the real hosts hand over stdout line by line as it arrives
            for line in result.stdout.splitlines():
                on_output(line)
        if timeout is not None and result.duration_s > timeout:
            raise CommandError(self.name, CommandResult(command, result.stdout, result.stderr, 124,
                                                        float(timeout)), timed_out=True)
        if check and not result.ok:
            raise CommandError(self.name, result)
        return result

    def put(self, local: str | os.PathLike[str], remote: str) -> None:
        if self._rule(f"put {remote}") is None:
            if self.passthrough is not None:
                self.passthrough.put(local, remote)
                return
            self.files[remote] = Path(local).read_bytes()

    def get(self, remote: str, local: str | os.PathLike[str]) -> None:
        rule = self._rule(f"get {remote}")
        if rule is not None:
            Path(local).write_text(str(_value(rule.stdout, remote)))
        elif self.passthrough is not None and remote not in self.files:
            self.passthrough.get(remote, local)
        elif remote in self.files:
            Path(local).write_bytes(self.files[remote])
        else:
            raise FileNotFoundError(f"[{self.name}] no such file: {remote}")

    def exists(self, path: str) -> bool:
        command = f"test -e {shlex.quote(path)}"
        rule = self._rule(command)
        if rule is not None:
            return int(_value(rule.exit_code, command)) == 0  # type: ignore[call-overload]
        if self.passthrough is not None and path not in self.files:
            return self.passthrough.exists(path)
        prefix = path.rstrip("/") + "/"
        return path in self.files or any(p.startswith(prefix) for p in self.files)

    def read_text(self, path: str) -> str:
        command = f"cat {shlex.quote(path)}"
        if path in self.files and not any(r.matches(command) for r in self.rules):
            self.commands.append(command)
            return self.files[path].decode()
        return self.run(command).stdout

    def close(self) -> None:
        self.closed = True
