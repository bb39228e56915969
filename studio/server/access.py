"""Who may do what (issue 26, docs/deploy.md "Who may do what"): owner keys, the admin token, and what each
visitor may keep on the server's disk.

- A *visitor* is whoever holds an owner key. The studio mints one (192 random bits) for an offer that presents
  none it knows, and hands it only to that peer: in the offer's answer and the data channel's `hello`. An offer
  that presents a key the studio knows (`Authorization: Bearer KEY`) starts another session of the same visitor,
  so a page that restarts its session keeps its uploads and takes.
- The *admin token* (`serve --admin-token`) stands for the operator and the presenter: every session, the list
  of sessions, no per-visitor counts (the byte quota still holds).
- Keys are compared in constant time (`hmac.compare_digest`), a visitor is found by comparing the presented key
  with every known one, so neither a key nor the set of keys leaks through timing.
- Disk: a visitor holds at most `max_uploads` uploads and `max_takes` takes at a time, and uploads plus takes
  together stay under the studio's `disk_quota` bytes. A full count answers 429, a full quota 507; nothing
  already stored is touched.
"""

from __future__ import annotations

import hmac
import os
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from alaya_errors import UserError
from studio.takes import TAKE_PREFIX

KEY_BYTES = 24                      # 192 bits
MAX_IDLE_VISITORS = 10_000          # visitors holding nothing are forgotten past this many
REFUSED = ("this needs the session owner's key or the studio's admin token (Authorization: Bearer KEY); "
           "the one given is missing or wrong")
ADMIN_ONLY = "this needs the studio's admin token (Authorization: Bearer TOKEN; serve --admin-token)"
VISITOR_ONLY = ("this needs your owner key (Authorization: Bearer KEY, from the offer's answer) or the studio's "
                "admin token; the one given is missing or wrong")


def new_key() -> str:
    return secrets.token_urlsafe(KEY_BYTES)


def same_key(presented: str | None, expected: str | None) -> bool:
    """Constant-time equality; an empty or missing key never matches."""
    if not presented or not expected:
        return False
    return hmac.compare_digest(presented.encode("utf-8", "surrogateescape"),
                               expected.encode("utf-8", "surrogateescape"))


def bearer(authorization: str | None) -> str | None:
    """The KEY of an `Authorization: Bearer KEY` header, else None."""
    if not authorization or authorization[:7].lower() != "bearer ":
        return None
    return authorization[7:].strip() or None


class QuotaFull(UserError):
    """A visitor's uploads or takes, or the studio's disk quota, are full: 429 (counts) or 507 (bytes)."""

    def __init__(self, detail: str, where: str, status: int):
        super().__init__(detail, where)
        self.status = status


@dataclass(frozen=True)
class DiskLimits:
    max_uploads: int = 8              # per visitor, at a time
    max_takes: int = 8                # per visitor, at a time
    disk_quota: int = 8 * 2**30       # bytes, uploads and takes of all visitors together


@dataclass(eq=False)
class Visitor:
    key: str
    admin: bool = False
    uploads: list[Path] = field(default_factory=list)   # what this visitor stored, while it exists
    takes: list[Path] = field(default_factory=list)

    def holds(self, kind: str) -> int:
        paths = getattr(self, kind)
        paths[:] = [p for p in paths if p.exists()]     # removed by an operator, or never finished
        return len(paths)

    def owns(self, path: Path) -> bool:
        return self.admin or path in self.uploads or path in self.takes


class Visitors:
    """The studio's visitors by owner key, and the disk they may use (`folders`: the uploads and takes folders,
    a callable because the data dir may be chosen after the app is built)."""

    def __init__(self, admin_token: str | None, limits: DiskLimits, folders: Callable[[], Iterable[Path]]):
        self.admin = Visitor(admin_token, admin=True) if admin_token else None
        self.limits = limits
        self.folders = folders
        self._known: list[Visitor] = []
        self._lock = threading.Lock()

    def find(self, presented: str | None) -> Visitor | None:
        """The visitor (or the admin) whose key was presented; every known key is compared, in constant time."""
        found = None
        for visitor in ([self.admin] if self.admin else []) + self._known:
            if same_key(presented, visitor.key):
                found = visitor
        return found

    def is_admin(self, presented: str | None) -> bool:
        return self.admin is not None and same_key(presented, self.admin.key)

    def admit(self, presented: str | None) -> Visitor:
        """The visitor an offer starts a session for: the one whose key it presents, else a new one."""
        found = self.find(presented)
        if found is not None and not found.admin:   # the admin's sessions get owner keys of their own
            return found
        with self._lock:
            if len(self._known) >= MAX_IDLE_VISITORS:
                self._known = [v for v in self._known if v.holds("uploads") or v.holds("takes")]
            visitor = Visitor(new_key())
            self._known.append(visitor)
        return visitor

    # ---- what a visitor may play --------------------------------------------------------------------------

    def owner_of(self, path: Path) -> Visitor | None:
        return next((v for v in self._known if path in v.uploads or path in v.takes), None)

    def may_use(self, visitor: Visitor | None, path: Path) -> bool:
        """A visitor's uploads and takes are theirs while the studio knows them; files nobody here made (the
        data dir's own, or kept from an earlier run) are everyone's, as recorded sequences always were."""
        owner = self.owner_of(path)
        return owner is None or owner is visitor or (visitor is not None and visitor.admin)

    def require_source(self, visitor: Visitor | None, source: str, data_dir: Path | None, takes_dir: Path) -> None:
        """Refuse another visitor's upload or take as a source, in the words used for one that is not there."""
        if source.startswith(TAKE_PREFIX):
            if not self.may_use(visitor, Path(takes_dir) / source[len(TAKE_PREFIX):]):
                raise UserError(f"no take {source[len(TAKE_PREFIX):]!r} in the takes folder", "source")
        elif data_dir is not None and not self.may_use(visitor, Path(data_dir).resolve() / os.path.normpath(source)):
            raise UserError(f"no sequence {source!r} in the data directory", "source")

    def grant(self, visitor: Visitor, store) -> "Ownership":
        """What a new session of `visitor` gets: the owner key, and the takes store as the visitor may use it."""
        return Ownership(visitor.key, VisitorTakes(store, self, visitor))

    # ---- disk ----------------------------------------------------------------------------------------------

    def used_bytes(self) -> int:
        total = 0
        for folder in self.folders():
            for root, _dirs, names in os.walk(folder):
                for name in names:
                    try:
                        total += os.stat(os.path.join(root, name)).st_blocks * 512
                    except OSError:        # removed while we walk (a take's temporary file)
                        pass
        return total

    def room(self, visitor: Visitor, kind: str, replacing: bool = False) -> int:
        """Bytes `visitor` may still write as one more of `kind` ("uploads" or "takes"), or as a replacement of
        one it holds; QuotaFull if none."""
        limit = self.limits.max_uploads if kind == "uploads" else self.limits.max_takes
        if not (visitor.admin or replacing) and visitor.holds(kind) >= limit:
            raise QuotaFull(f"you hold {limit} {kind}, the most one visitor may keep; delete one first", kind, 429)
        free = self.limits.disk_quota - self.used_bytes()
        if free <= 0:
            raise QuotaFull(f"the studio's disk quota for uploads and takes ({self.limits.disk_quota / 2**20:.0f} "
                            "MiB) is used up; try again later", kind, 507)
        return free


class VisitorTakes:
    """The takes store as one visitor's sessions see it (what SessionManager gives a session as `takes`): a
    take starts only while the visitor has room, and stops cleanly where the disk quota ends."""

    def __init__(self, store, visitors: Visitors, visitor: Visitor):
        self.store = store
        self.visitors = visitors
        self.visitor = visitor

    def start(self, on_stopped, **fields):
        room = self.visitors.room(self.visitor, "takes")
        recorder = self.store.start(on_stopped, max_bytes=room, **fields)
        self.visitor.takes.append(recorder.info.path)
        return recorder


@dataclass(frozen=True)
class Ownership:
    """Handed to SessionManager.offer: the new session's owner key and its takes store."""

    key: str
    takes: VisitorTakes
