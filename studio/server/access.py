"""Who may do what (issue 26, docs/deploy.md "Who may do what"): owner keys, the admin token, and what each
visitor may keep on the server's disk.

- A *visitor* is whoever holds an owner key. The studio mints one (192 random bits) for an offer that presents
  none it knows, and hands it only to that peer: in the offer's answer and the data channel's `hello`. An offer
  that presents a key the studio knows (`Authorization: Bearer KEY`) starts another session of the same visitor,
  so a page that restarts its session keeps its uploads and takes.
- The *admin token* (`serve --admin-token`) stands for the operator and the presenter: every session, the list
  of sessions, no per-visitor counts (the byte quota still holds).
- Keys are compared in constant time (`hmac.compare_digest`), a visitor is found by comparing the presented key's
  digest with every known one, so neither a key nor the set of keys leaks through timing.
- Who owns which upload and take outlives a restart (owners.py keeps it in the data dir). Files in the uploads
  and takes folders that nobody is known to own are the admin's only; the data dir's own sequences are everyone's.
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
from typing import Callable

from alaya_errors import UserError
from studio.server import owners
from studio.server.owners import Folders
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


def bearer(authorization: str | bytes | None) -> str | None:
    """The KEY of an `Authorization: Bearer KEY` header, else None (also for binary gRPC metadata)."""
    if not isinstance(authorization, str) or authorization[:7].lower() != "bearer ":
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
    key: str | None                  # None: known from the owners index until it presents its key again
    admin: bool = False
    uploads: list[Path] = field(default_factory=list)   # what this visitor stored (real paths), while it exists
    takes: list[Path] = field(default_factory=list)
    digest: str = ""                 # of the key: what the owners index keeps and `Visitors.find` compares

    def __post_init__(self):
        if not self.digest:
            if self.key is None:
                raise ValueError("a visitor needs its owner key or the key's digest")
            self.digest = owners.key_digest(self.key)

    def holds(self, kind: str) -> int:
        paths = getattr(self, kind)
        paths[:] = [p for p in paths if p.exists()]     # removed by an operator, or never finished
        return len(paths)

    def has(self, path: Path) -> bool:
        real = owners.real_path(path)
        return real in self.uploads or real in self.takes

    def owns(self, path: Path) -> bool:
        return self.admin or self.has(path)


class Visitors:
    """The studio's visitors by owner key, and the disk they may use (`folders`: the uploads and takes folders and
    the owners index, a callable because the data dir may be chosen after the app is built; the index is read on
    first use)."""

    def __init__(self, admin_token: str | None, limits: DiskLimits, folders: Callable[[], Folders]):
        self.admin = Visitor(admin_token, admin=True) if admin_token else None
        self.limits = limits
        self.folders = folders
        self._visitors: list[Visitor] | None = None
        self._lock = threading.RLock()
        self._pending: list[Reservation] = []   # uploads being written: counted before they land (issue 42)

    @property
    def known(self) -> list[Visitor]:
        """Visitors with an owner key: those in the owners index (read on first use), then those admitted since."""
        if self._visitors is None:
            with self._lock:
                if self._visitors is None:
                    self._visitors = [Visitor(None, digest=digest, uploads=held["uploads"], takes=held["takes"])
                                      for digest, held in owners.read_index(self.folders())]
        return self._visitors

    def find(self, presented: str | None) -> Visitor | None:
        """The visitor (or the admin) whose key was presented; every known key's digest is compared, in constant
        time. A visitor known from the owners index learns its key again here."""
        if not presented:
            return None
        digest = owners.key_digest(presented)
        found = self.admin if self.is_admin(presented) else None
        for visitor in self.known:
            if hmac.compare_digest(digest, visitor.digest):
                found = visitor
        if found is not None and found.key is None:
            found.key = presented
        return found

    def is_admin(self, presented: str | None) -> bool:
        return self.admin is not None and same_key(presented, self.admin.key)

    def may_act(self, presented: str | None, owner_key: str | None) -> bool:
        """Who may act on a live session, at every front door that takes a key (REST, gRPC): its owner (the key
        from its offer, `owner_key`; None when the session does not exist) or the admin. A watch key only
        watches (deps.watched_session); OSC steers the presenter's session (studio/server/osc.py)."""
        return same_key(presented, owner_key) or self.is_admin(presented)

    def visitor_for(self, presented: str | None) -> Visitor:
        """The visitor an offer would start a session for: the one whose key it presents, else a new one that the
        studio does not know yet. `enroll` makes it known once its session has started, so failing offers leave
        nothing behind (issue 42: 10,000 of them pushed out visitors holding nothing, and their keys)."""
        found = self.find(presented)
        if found is not None and not found.admin:   # the admin's sessions get owner keys of their own
            return found
        return Visitor(new_key())

    def admit(self, presented: str | None) -> Visitor:
        """`visitor_for` and `enroll` at once, for a caller with nothing to check in between."""
        visitor = self.visitor_for(presented)
        self.enroll(visitor)
        return visitor

    def enroll(self, visitor: Visitor) -> None:
        """`visitor`'s session started: its key opens its routes from now on."""
        with self._lock:
            if any(v is visitor for v in self.known):
                return
            if len(self.known) >= MAX_IDLE_VISITORS:
                self._visitors = [v for v in self.known if v.holds("uploads") or v.holds("takes")]
            self.known.append(visitor)

    # ---- what a visitor may play --------------------------------------------------------------------------

    def owner_of(self, path: Path) -> Visitor | None:
        return next((v for v in self.known if v.has(path)), None)

    def may_use(self, visitor: Visitor | None, path: Path) -> bool:
        """A visitor's uploads and takes are theirs (and the admin's), across restarts; an upload or take nobody
        is known to own is the admin's only; the data dir's own sequences are everyone's."""
        if visitor is not None and visitor.admin:
            return True
        owner = self.owner_of(path)
        if owner is not None:
            return owner is visitor
        return self.folders().inside(path) is None

    def record(self, visitor: Visitor, kind: str, path: Path) -> None:
        """`visitor` now holds `path` (an upload or a take; "uploads" or "takes"), also after a restart. A name
        freed by another visitor's delete is no longer theirs."""
        real = owners.real_path(path)
        with self._lock:
            for other in self.known:
                held = getattr(other, kind)
                if real in held and other is not visitor:
                    held.remove(real)
            if real not in getattr(visitor, kind):
                getattr(visitor, kind).append(real)
            self._save()

    def _save(self) -> None:
        try:
            owners.write_index(self.folders(), [(v.digest, {"uploads": v.uploads, "takes": v.takes})
                                                for v in self.known if not v.admin])
        except OSError as exc:   # the disk is full or read-only: ownership holds in memory for this run
            owners.log.warning("cannot write the owners index: %s", exc.strerror or exc)

    def require_source(self, visitor: Visitor | None, source: str, data_dir: Path | None, takes_dir: Path) -> None:
        """Refuse another visitor's upload or take as a source, in the words used for one that is not there."""
        if source.startswith(TAKE_PREFIX):
            if not self.may_use(visitor, Path(takes_dir) / source[len(TAKE_PREFIX):]):
                raise UserError(f"no take {source[len(TAKE_PREFIX):]!r} in the takes folder", "source")
        elif data_dir is not None and not self.may_use(visitor, Path(data_dir).resolve() / os.path.normpath(source)):
            raise UserError(f"no sequence {source!r} in the data directory", "source")

    def grant(self, visitor: Visitor, store, presenter: bool = False) -> "Ownership":
        """What a new session of `visitor` gets: the owner key, the takes store as the visitor may use it, and
        whether the admin started it (a presenter's session, which OSC may steer)."""
        assert visitor.key is not None, "a session is granted to a visitor who presented its key"
        return Ownership(visitor.key, VisitorTakes(store, self, visitor), presenter)

    # ---- disk ----------------------------------------------------------------------------------------------

    def used_bytes(self) -> int:
        total = 0
        where = self.folders()
        for folder in filter(None, (where.uploads, where.takes)):
            for root, _dirs, names in os.walk(folder):
                for name in names:
                    try:
                        total += os.stat(os.path.join(root, name)).st_blocks * 512
                    except OSError:        # removed while we walk (a take's temporary file)
                        pass
        return total

    def room(self, visitor: Visitor, kind: str, replacing: bool = False) -> int:
        """Bytes `visitor` may still write as one more of `kind` ("uploads" or "takes"), or as a replacement of
        one it holds, after what uploads in flight have reserved; QuotaFull if none."""
        with self._lock:
            limit = self.limits.max_uploads if kind == "uploads" else self.limits.max_takes
            pending = sum(1 for r in self._pending if r.visitor is visitor and r.kind == kind and not r.replacing)
            if not (visitor.admin or replacing) and visitor.holds(kind) + pending >= limit:
                raise QuotaFull(f"you hold {limit} {kind}, the most one visitor may keep; delete one first", kind,
                                429)
            free = self.limits.disk_quota - self.used_bytes() - sum(r.size for r in self._pending)
            if free <= 0:
                raise QuotaFull(f"the studio's disk quota for uploads and takes "
                                f"({self.limits.disk_quota / 2**20:.0f} MiB) is used up; try again later", kind, 507)
            return free

    def reserve(self, visitor: Visitor, kind: str, path: Path, replacing: bool, wanted: int) -> "Reservation":
        """Hold a place and up to `wanted` bytes for an upload before a byte of it is written, so that uploads
        arriving together cannot all pass the same check (six parallel PUTs gave five 200s with a limit of 2).
        A name already being written is refused (409). Release it once the upload is recorded or has failed."""
        real = owners.real_path(path)
        with self._lock:
            if any(r.path == real for r in self._pending):
                raise QuotaFull(f"{path.name!r} is being uploaded right now; wait for it or choose another name",
                                kind, 409)
            reservation = Reservation(visitor, kind, real, replacing, min(wanted, self.room(visitor, kind,
                                                                                              replacing)))
            self._pending.append(reservation)
            return reservation

    def release(self, reservation: "Reservation") -> None:
        with self._lock:
            self._pending.remove(reservation)


@dataclass(eq=False)
class Reservation:
    """Room held for one upload in flight: a place among the visitor's `kind` (unless it replaces one it holds)
    and `size` bytes of the disk quota."""

    visitor: Visitor
    kind: str
    path: Path
    replacing: bool
    size: int


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
        self.visitors.record(self.visitor, "takes", recorder.info.path)
        return recorder


@dataclass(frozen=True)
class Ownership:
    """Handed to SessionManager.offer: the new session's owner key and its takes store."""

    key: str
    takes: VisitorTakes
    presenter: bool = False          # started with the admin token: OSC's to steer (studio/server/osc.py)
