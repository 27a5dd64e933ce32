"""The stream requests of file locks (namenode/file_locks.py): SetLock, TestLock,
CancelLockWait and ReleaseLocks, each about the asking session, never inside a
transaction. Locking a file needs read or write permission on it (a descriptor open
for either), and search permission on the directories above it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plasmafs.core.errors import InvalidArgumentError, NotFoundError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.namenode.file_locks import Family, LockRequest, LockType
from plasmafs.namenode.permissions import R, W, check_access, may
from plasmafs.namenode.transaction import Txn

if TYPE_CHECKING:
    from plasmafs.namenode.session import Handler, Session


async def _asked(s: Session, q: pb.SetLock | pb.TestLock) -> LockRequest:
    """The lock `q` asks for, once the file exists and the caller may lock it."""
    try:
        family, type = Family(q.family), LockType(q.type)
    except ValueError:
        raise InvalidArgumentError(f"no lock family {q.family} or type {q.type}") from None
    inode = await s.ns.view.inode(None, q.ino)
    if inode is None:
        raise NotFoundError(f"no inode {q.ino}")
    who = s.who
    await s.ns.view.check_ancestors(who, None, inode)
    a = inode.attr
    if not may(who, a.mode, a.uid, a.gid, W):
        check_access(who, a.mode, a.uid, a.gid, R, f"inode {q.ino}")
    pid = q.pid if isinstance(q, pb.SetLock) else 0
    return LockRequest(q.ino, family, (s, q.owner), type, q.start, q.end, pid)


async def _set_lock(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.set_lock
    await s.locks.set(await _asked(s, q), wait=q.wait, request_id=r.id)
    out.done.SetInParent()


async def _test_lock(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.test_lock
    blocker = s.locks.test(await _asked(s, q), others_only=q.others_only)
    answer = out.lock_conflict
    answer.SetInParent()
    if blocker is not None:
        answer.found = True
        answer.type = int(blocker.type)  # type: ignore[assignment]
        answer.start, answer.end, answer.pid = blocker.start, blocker.end, blocker.pid
        answer.same_session = blocker.holder[0] is s


async def _cancel_lock_wait(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    s.locks.cancel_wait(s, r.cancel_lock_wait.request)
    out.done.SetInParent()


async def _release_locks(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.release_locks
    try:
        family = Family(q.family)
    except ValueError:
        raise InvalidArgumentError(f"no lock family {q.family}") from None
    s.locks.release(q.ino, family, (s, q.owner))
    out.done.SetInParent()


HANDLERS: dict[str, Handler] = {
    "set_lock": _set_lock,
    "test_lock": _test_lock,
    "cancel_lock_wait": _cancel_lock_wait,
    "release_locks": _release_locks,
}
SESSION_OPS = frozenset(HANDLERS)
