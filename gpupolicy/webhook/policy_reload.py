"""The webhook's policy, reloaded when its files change — and kept when the new one is bad.

The chart mounts the policy from a ConfigMap. The kubelet updates a ConfigMap volume by writing
the new files into a fresh folder and swapping the `..data` symlink to it, so `policy.yaml`
changes all at once, about a minute after `kubectl apply`
(https://kubernetes.io/docs/concepts/configuration/configmap/#mounted-configmaps-are-updated-automatically).
As for the TLS files (tls.py), each file's stat (followed through the symlinks) is compared
with the last one seen; a change is loaded in a worker thread — read, validated against the
policy schema, compiled into a `ReviewEngine`, and tried on a GPU Deployment — and only an
engine that passed all of it replaces the one in use. A policy that fails any step is refused:
the last good policy keeps deciding, and the refusal is said in the log (a warning with the
reason), in `/readyz` (`policy.reload`) and in `/metrics` (`gpupolicy_policy_reload_failing` 1,
`gpupolicy_policy_reloads_total{outcome="refused"}`). A later change of the files is tried again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpupolicy.core.immutable import immutable
from gpupolicy.policy.loading import Policy, load_policy
from gpupolicy.policy.validation import PolicyError
from gpupolicy.webhook.logs import LOGGER, excerpt, log
from gpupolicy.webhook.review import Decision, ReviewEngine
from gpupolicy.webhook.settings import Mode

_log = logging.getLogger(LOGGER)

# How much of a refusal's reason /readyz and the log show (a schema error names file, line, key).
REASON_CHARS = 500

Stamp = tuple[tuple[str, tuple[int, int, int] | str], ...]


def _stamp(paths: Sequence[str]) -> Stamp:
    """Each file's (mtime, size, inode), or why it cannot be read."""
    stamps: list[tuple[str, tuple[int, int, int] | str]] = []
    for path in paths:
        try:
            info = Path(path).stat()  # follows the ..data symlinks of a mounted ConfigMap
        except OSError as exc:
            stamps.append((path, exc.strerror or type(exc).__name__))
        else:
            stamps.append((path, (info.st_mtime_ns, info.st_size, info.st_ino)))
    return tuple(stamps)


def _watched(files: Sequence[Path], policy: Policy) -> tuple[str, ...]:
    """The files given and those they extend (the policy's sources that are files)."""
    names = [str(path) for path in files]
    names += [source for source in policy.sources if Path(source).is_file() and source not in names]
    return tuple(names)


@immutable
class Refusal:
    reason: str
    at: str  # RFC 3339 UTC


class ReloadingPolicy:
    """The review engine in use, and the files it came from.

    `check()` runs in a worker thread (loading and validating a policy takes tens of
    milliseconds: not in the event loop); the engine is read by each request through `engine`,
    one attribute read, so a request decides wholly under one policy."""

    def __init__(
        self,
        files: Sequence[Path],
        engine: ReviewEngine,
        *,
        mode: Mode | None,
        trial: Callable[[ReviewEngine], Decision],
    ) -> None:
        self.files = tuple(files)
        self.engine = engine
        self.mode = mode
        self._trial = trial
        self._watched = _watched(self.files, engine.policy)
        self._stamp = _stamp(self._watched)
        self.reloads = 0
        self.refusal: Refusal | None = None

    def check(self) -> str | None:
        """Load the files when they changed: "reloaded" when a new policy is now in use,
        "refused" when the new one was bad (the last good one stays), else None."""
        stamp = _stamp(self._watched)
        if stamp == self._stamp:
            return None
        self._stamp = stamp  # tried once per change: a bad file is not reported every few seconds
        started = time.monotonic()
        try:
            engine = self._load()
        except Exception as exc:  # whatever a bad policy makes fail: keep the last good one
            self._refuse(str(exc) if isinstance(exc, PolicyError) else f"{type(exc).__name__}: {exc}")
            return "refused"
        current = self.engine
        self.refusal = None
        self._watched = _watched(self.files, engine.policy)
        self._stamp = _stamp(self._watched)
        if engine.policy.digest == current.policy.digest:
            return None  # the same policy rewritten (a touch, a re-sync): nothing to swap
        self.engine = engine
        self.reloads += 1
        log(
            _log,
            logging.INFO,
            "policy reloaded",
            policy_version=engine.policy.version,
            policy_digest=f"sha256:{engine.policy.digest}",
            previous_digest=f"sha256:{current.policy.digest}",
            duration_ms=round((time.monotonic() - started) * 1000, 1),
        )
        return "reloaded"

    def _load(self) -> ReviewEngine:
        policy = load_policy(extra=self.files)  # read and validated against the schema
        engine = ReviewEngine.from_policy(policy, mode=self.mode)
        decision = self._trial(engine)  # every rule once, on a GPU Deployment
        errors = decision.report.errors if decision.report is not None else []
        if errors:
            failed = ", ".join(dict.fromkeys(error.rule_id for error in errors))
            raise PolicyError(f"rules fail under the new policy: {failed} ({errors[0].message})")
        return engine

    def _refuse(self, reason: str) -> None:
        shown = excerpt(" ".join(reason.split()), REASON_CHARS) or ""
        self.refusal = Refusal(shown, datetime.now(UTC).isoformat(timespec="seconds"))
        current = self.engine.policy
        log(
            _log,
            logging.WARNING,
            "new policy refused; the last good policy stays in use",
            reason=shown,
            files=[str(path) for path in self.files],
            policy_version=current.version,
            policy_digest=f"sha256:{current.digest}",
        )

    def status(self) -> dict[str, Any]:
        """For /readyz: whether the files on disk are the policy in use."""
        if self.refusal is None:
            return {"status": "current", "reloads": self.reloads}
        return {
            "status": "refused",
            "reloads": self.reloads,
            "reason": self.refusal.reason,
            "since": self.refusal.at,
        }
