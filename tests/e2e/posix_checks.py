#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""posix_checks.py: pjdfstest-like POSIX checks of one directory, run as root.

    posix_checks.py run DIR          runs every check under DIR (which must be
                                     empty, reachable by every user, and on
                                     the filesystem under test); prints one
                                     line per check on stdout
    posix_checks.py compare REF GOT  compares the output of a reference run
                                     (a local filesystem) with the run on the
                                     filesystem under test; exit 1 if GOT
                                     fails a check REF passes

The checks follow pjdfstest's categories (chmod, chown, link, mkdir, mkfifo,
mknod, open, rename, rmdir, symlink, truncate, unlink, utimensat, set-id
bits cleared on write, NAME_MAX and PATH_MAX, and the times of files and
parent directories).  Operations run as root and, in forked children, as
unprivileged users (setresuid/setresgid with no or chosen supplementary
groups).

Each output line is  NAME<TAB>KIND<TAB>PASS|FAIL<TAB>GOT<TAB>WANT.
KIND "expect": GOT is compared with a fixed WANT (Linux semantics); such a
check counts only when the reference passes it.  KIND "same": GOT is what
the operation did (WANT is "-"); the filesystem under test must do the same
as the reference.  Times are compared with each other (newer/same), never
with fixed values, so the output of two runs can be compared line by line.
"""
import ctypes
import errno
import os
import pickle
import stat
import sys
import time
import traceback

U1 = (65534, 65534)     # nobody
U2 = (1000, 1000)       # a second user
G_EXTRA = 1001          # a group given to a user as supplementary where said
G_OTHER = 1002          # a group no user of the checks belongs to
TICK = 0.03             # sleep before an operation whose times are checked
NAME_MAX = 255
PATH_MAX = 4096

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _raise_errno(path):
    e = ctypes.get_errno()
    raise OSError(e, os.strerror(e), path)


def utimensat(path, times=None, flags=0):
    """utimensat(2) with UTIME_NOW/UTIME_OMIT: times = ((s, ns), (s, ns))."""
    arr = None
    if times is not None:
        arr = (Timespec * 2)(Timespec(*times[0]), Timespec(*times[1]))
    if libc.utimensat(AT_FDCWD, os.fsencode(path), arr, flags) != 0:
        _raise_errno(path)


def renameat2(src, dst, flags):
    if libc.renameat2(AT_FDCWD, os.fsencode(src), AT_FDCWD,
                      os.fsencode(dst), ctypes.c_uint(flags)) != 0:
        _raise_errno(src)


# --- results ---------------------------------------------------------------

RESULTS = []
SEEN = set()


def _record(name, kind, ok, got, want):
    if name in SEEN:
        raise RuntimeError("duplicate check name " + name)
    SEEN.add(name)
    clean = lambda v: str(v).replace("\t", " ").replace("\n", " ")
    RESULTS.append((name, kind, "PASS" if ok else "FAIL", clean(got), clean(want)))


def expect(name, got, want):
    """Check with a fixed expectation (counts only if the reference passes)."""
    _record(name, "expect", got == want, got, want)


def same(name, got):
    """Check that the filesystem under test does what the reference does."""
    _record(name, "same", True, got, "-")


def info(name, got):
    """Like same(), but a difference is printed and not counted: for what
    FUSE itself decides and a daemon cannot change (say why where used)."""
    _record(name, "info", True, got, "-")


def ename(e):
    return errno.errorcode.get(e, str(e))


def outcome(fn, *a, **kw):
    """'ok' when fn(*a) succeeds, else the errno name."""
    try:
        fn(*a, **kw)
        return "ok"
    except OSError as e:
        return ename(e.errno)


def as_user(ids, fn, *a, groups=(), umask=0o022):
    """Runs fn(*a) in a child as uid/gid @ids with supplementary @groups.
    Returns ('ok', value) or ('err', errno)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups(list(groups))
            os.setresgid(ids[1], ids[1], ids[1])
            os.setresuid(ids[0], ids[0], ids[0])
            os.umask(umask)
            try:
                val = ("ok", fn(*a))
            except OSError as e:
                val = ("err", e.errno)
            data = pickle.dumps(val)
        except BaseException as e:  # noqa: B902 - report anything to parent
            data = pickle.dumps(("exc", repr(e)))
        while data:
            data = data[os.write(w, data):]
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        c = os.read(r, 65536)
        if not c:
            break
        chunks.append(c)
    os.close(r)
    os.waitpid(pid, 0)
    st, v = pickle.loads(b"".join(chunks))
    if st == "exc":
        raise RuntimeError("child: " + v)
    return st, v


def uo(ids, fn, *a, groups=()):
    """Outcome ('ok' or errno name) of fn(*a) run as @ids."""
    st, v = as_user(ids, fn, *a, groups=groups)
    return "ok" if st == "ok" else ename(v)


def uv(ids, fn, *a, groups=(), umask=0o022):
    """Value of fn(*a) run as @ids, or the errno name if it failed."""
    st, v = as_user(ids, fn, *a, groups=groups, umask=umask)
    return v if st == "ok" else ename(v)


# --- small helpers -----------------------------------------------------------

def mkfile(p, mode=0o644, owner=None, data=b""):
    fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    if data:
        os.write(fd, data)
    os.close(fd)
    if owner:
        os.chown(p, *owner)
    os.chmod(p, mode)
    return p


def mkdir(p, mode=0o755, owner=None):
    os.mkdir(p, 0o700)
    if owner:
        os.chown(p, *owner)
    os.chmod(p, mode)
    return p


def mkfifo(p, mode=0o644, owner=None):
    os.mkfifo(p, 0o600)
    if owner:
        os.chown(p, *owner)
    os.chmod(p, mode)
    return p


def create(p, mode=0o644):
    os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode))


def mode_of(p):
    return "%04o" % stat.S_IMODE(os.lstat(p).st_mode)


def own_of(p):
    st = os.lstat(p)
    return "%d:%d" % (st.st_uid, st.st_gid)


def ids(u):
    return "%d:%d" % u


def lstat_or_err(p):
    try:
        return os.lstat(p)
    except OSError as e:
        return ename(e.errno)


def newer(before, after, field):
    a = getattr(before, "st_%s_ns" % field)
    b = getattr(after, "st_%s_ns" % field)
    return "newer" if b > a else ("same" if b == a else "older")


def times_after(name, paths, fn, fields=("mtime", "ctime"), want="newer"):
    """Runs fn() after a tick; checks @fields of each (label, path) moved.
    Each path is held (O_PATH) meanwhile, so that the kernel cannot forget
    its inode: a fresh lookup, after another test's drop_caches, reads the
    backing file's ctime, which nothing can set, a little later than the
    one the kernel kept (see cache.coherent_ctime), and "same" failed."""
    pins = []
    for _, p in paths:
        try:
            pins.append(os.open(p, os.O_PATH | os.O_NOFOLLOW))
        except OSError:
            pass
    try:
        return _times_after(name, paths, fn, fields, want)
    finally:
        for fd in pins:
            os.close(fd)


def _times_after(name, paths, fn, fields, want):
    before = {lab: os.lstat(p) for lab, p in paths}
    time.sleep(TICK)
    r = fn()
    for lab, p in paths:
        after = os.lstat(p)
        for f in fields:
            nm = "%s.%s.%s" % (name, lab, f) if lab else "%s.%s" % (name, f)
            if want == "info":
                info(nm, newer(before[lab], after, f))
            elif want is None:
                same(nm, newer(before[lab], after, f))
            else:
                expect(nm, newer(before[lab], after, f), want)
    return r


def open_close(p, flags, mode=0o644):
    os.close(os.open(p, flags, mode))


def drop_caches(path):
    """Makes the kernel forget unused dentries and inodes (root only), so
    that what it shows next comes from the filesystem, not from its cache.
    The filesystem of @path is synced first (dirty inodes stay cached)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        libc.syncfs(fd)
        os.close(fd)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")
        return True
    except OSError:
        return False


def read_all(p):
    with open(p, "rb") as f:
        return f.read()


# --- the checks ------------------------------------------------------------

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


@check
def chmod(d):
    for kind, make in (("file", mkfile), ("dir", mkdir), ("fifo", mkfifo)):
        p = make("%s/%s" % (d, kind), 0o644)
        times_after("chmod.root.%s.time" % kind, [("", p)],
                    lambda: expect("chmod.root.%s" % kind, outcome(os.chmod, p, 0o751), "ok"),
                    fields=("ctime",))
        expect("chmod.root.%s.mode" % kind, mode_of(p), "0751")
        times_after("chmod.samemode.%s.time" % kind, [("", p)],
                    lambda: os.chmod(p, 0o751), fields=("ctime",), want=None)
    w = mkdir(d + "/w", 0o777)
    f = mkfile(w + "/f", 0o644, U1)
    times_after("chmod.owner.time", [("", f)],
                lambda: expect("chmod.owner", uo(U1, os.chmod, f, 0o600), "ok"),
                fields=("ctime",))
    expect("chmod.owner.mode", mode_of(f), "0600")
    times_after("chmod.nonowner.time", [("", f)],
                lambda: expect("chmod.nonowner", uo(U2, os.chmod, f, 0o777), "EPERM"),
                fields=("ctime",), want="same")
    expect("chmod.nonowner.mode", mode_of(f), "0600")
    r = mkfile(w + "/rootf", 0o644)
    expect("chmod.nonowner_root_file", uo(U1, os.chmod, r, 0o666), "EPERM")
    expect("chmod.owner.setuid", uo(U1, os.chmod, f, 0o4755), "ok")
    expect("chmod.owner.setuid.mode", mode_of(f), "4755")
    # S_ISGID is dropped when the caller is not in the file's group.
    for kind, make in (("file", mkfile), ("dir", mkdir)):
        p = make("%s/sg_%s" % (w, kind), 0o644, (U1[0], G_OTHER))
        expect("chmod.sgid_nonmember.%s" % kind, uo(U1, os.chmod, p, 0o2755), "ok")
        expect("chmod.sgid_nonmember.%s.mode" % kind, mode_of(p), "0755")
        q = make("%s/sgm_%s" % (w, kind), 0o644, (U1[0], G_EXTRA))
        expect("chmod.sgid_member.%s" % kind,
               uo(U1, os.chmod, q, 0o2755, groups=[G_EXTRA]), "ok")
        expect("chmod.sgid_member.%s.mode" % kind, mode_of(q), "2755")
    s = mkfile(w + "/sticky", 0o644, U1)
    same("chmod.sticky_file_user", uo(U1, os.chmod, s, 0o1644))
    same("chmod.sticky_file_user.mode", mode_of(s))
    t = mkfile(w + "/target", 0o644)
    os.symlink("target", w + "/sl")
    expect("chmod.follows_symlink", outcome(os.chmod, w + "/sl", 0o640), "ok")
    expect("chmod.follows_symlink.target", mode_of(t), "0640")
    expect("chmod.follows_symlink.link", mode_of(w + "/sl"), "0777")
    expect("chmod.enoent", outcome(os.chmod, w + "/nope", 0o644), "ENOENT")
    expect("chmod.enotdir", outcome(os.chmod, t + "/x", 0o644), "ENOTDIR")
    priv = mkdir(d + "/priv", 0o700)
    pf = mkfile(priv + "/f", 0o644, U1)
    expect("chmod.eacces_search", uo(U1, os.chmod, pf, 0o600), "EACCES")
    expect("chmod.enametoolong", outcome(os.chmod, w + "/" + "x" * 256, 0o644), "ENAMETOOLONG")


@check
def chown(d):
    w = mkdir(d + "/w", 0o777)
    f = mkfile(w + "/f", 0o644)
    times_after("chown.root.time", [("", f)],
                lambda: expect("chown.root", outcome(os.chown, f, *U1), "ok"),
                fields=("ctime",))
    expect("chown.root.owner", own_of(f), ids(U1))
    times_after("chown.giveaway.time", [("", f)],
                lambda: expect("chown.giveaway", uo(U1, os.chown, f, U2[0], -1), "EPERM"),
                fields=("ctime",), want="same")
    expect("chown.giveaway.owner", own_of(f), ids(U1))
    expect("chown.user_self", uo(U1, os.chown, f, U1[0], -1), "ok")
    times_after("chown.user_owngroup.time", [("", f)],
                lambda: expect("chown.user_owngroup",
                               uo(U1, os.chown, f, -1, G_EXTRA, groups=[G_EXTRA]), "ok"),
                fields=("ctime",))
    expect("chown.user_owngroup.owner", own_of(f), "%d:%d" % (U1[0], G_EXTRA))
    expect("chown.user_othergroup", uo(U1, os.chown, f, -1, G_OTHER), "EPERM")
    expect("chown.nonowner", uo(U2, os.chown, f, -1, U2[1]), "EPERM")
    expect("chown.user_minus1", uo(U1, os.chown, f, -1, -1), "ok")
    times_after("chown.root_minus1.time", [("", f)],
                lambda: expect("chown.root_minus1", outcome(os.chown, f, -1, -1), "ok"),
                fields=("ctime",), want=None)
    expect("chown.root_minus1.owner", own_of(f), "%d:%d" % (U1[0], G_EXTRA))
    # set-id bits cleared when a non-root user chowns a regular file
    a = mkfile(w + "/suid_a", 0o6555, U1)
    expect("chown.user_clears_setid", uo(U1, os.chown, a, -1, G_EXTRA, groups=[G_EXTRA]), "ok")
    expect("chown.user_clears_setid.mode", mode_of(a), "0555")
    b = mkfile(w + "/suid_b", 0o6555, U1)
    expect("chown.user_clears_setid_sameids", uo(U1, os.chown, b, *U1), "ok")
    same("chown.user_clears_setid_sameids.mode", mode_of(b))
    c = mkfile(w + "/suid_c", 0o6555, U1)
    expect("chown.user_minus1_setid", uo(U1, os.chown, c, -1, -1), "ok")
    same("chown.user_minus1_setid.mode", mode_of(c))
    c2 = mkfile(w + "/suid_c2", 0o6555, U1)
    expect("chown.root_minus1_setid", outcome(os.chown, c2, -1, -1), "ok")
    same("chown.root_minus1_setid.mode", mode_of(c2))
    c3 = mkfile(w + "/suid_c3", 0o2545, U1)
    expect("chown.user_minus1_sgid_nogx", uo(U1, os.chown, c3, -1, -1), "ok")
    same("chown.user_minus1_sgid_nogx.mode", mode_of(c3))
    e = mkfile(w + "/suid_e", 0o6555)
    expect("chown.root_setid", outcome(os.chown, e, *U1), "ok")
    same("chown.root_setid.mode", mode_of(e))
    sd = mkdir(w + "/sgid_dir", 0o2755, U1)
    expect("chown.user_dir_sgid", uo(U1, os.chown, sd, -1, G_EXTRA, groups=[G_EXTRA]), "ok")
    same("chown.user_dir_sgid.mode", mode_of(sd))
    # symlinks: chown follows, lchown does not
    t = mkfile(w + "/target", 0o644)
    os.symlink("target", w + "/sl")
    expect("chown.follows_symlink", outcome(os.chown, w + "/sl", *U2), "ok")
    expect("chown.follows_symlink.target", own_of(t), ids(U2))
    expect("chown.follows_symlink.link", own_of(w + "/sl"), "0:0")
    expect("chown.lchown", outcome(os.lchown, w + "/sl", *U1), "ok")
    expect("chown.lchown.link", own_of(w + "/sl"), ids(U1))
    expect("chown.lchown.target", own_of(t), ids(U2))
    expect("chown.enoent", outcome(os.chown, w + "/nope", 0, 0), "ENOENT")
    priv = mkdir(d + "/priv", 0o700)
    pf = mkfile(priv + "/f", 0o644, U1)
    expect("chown.eacces_search", uo(U1, os.chown, pf, -1, -1), "EACCES")


@check
def link(d):
    w = mkdir(d + "/w", 0o777)
    w2 = mkdir(d + "/w2", 0o777)
    f = mkfile(w + "/f", 0o640, U1, b"data")
    times_after("link.time", [("src", f), ("parent", w2)],
                lambda: expect("link.ok", outcome(os.link, f, w2 + "/l1"), "ok"),
                fields=("ctime",))
    st1, st2 = os.lstat(f), os.lstat(w2 + "/l1")
    expect("link.same_inode", st1.st_ino == st2.st_ino, True)
    expect("link.nlink2", (st1.st_nlink, st2.st_nlink), (2, 2))
    expect("link.keeps_owner_mode", (own_of(w2 + "/l1"), mode_of(w2 + "/l1")), (ids(U1), "0640"))
    times_after("link.parent_mtime", [("", w)], lambda: os.link(f, w + "/l2"),
                fields=("mtime",))
    expect("link.nlink3", os.lstat(w + "/l2").st_nlink, 3)
    expect("link.content", read_all(w + "/l2"), b"data")
    os.mkdir(w + "/dir")
    os.symlink("f", w + "/sl")
    for lab, dst in (("file", w + "/l2"), ("dir", w + "/dir"), ("symlink", w + "/sl")):
        expect("link.eexist.%s" % lab, outcome(os.link, f, dst), "EEXIST")
    expect("link.enoent_src", outcome(os.link, w + "/nope", w + "/x"), "ENOENT")
    expect("link.enoent_dstdir", outcome(os.link, f, w + "/nodir/x"), "ENOENT")
    expect("link.eperm_dir", outcome(os.link, w + "/dir", w + "/dirlink"), "EPERM")
    expect("link.user", uo(U1, os.link, f, w + "/ul"), "ok")
    r = mkdir(d + "/r", 0o755)
    expect("link.eacces_dst", uo(U1, os.link, f, r + "/x"), "EACCES")
    priv = mkdir(d + "/priv", 0o700)
    pf = mkfile(priv + "/f", 0o644, U1)
    expect("link.eacces_src", uo(U1, os.link, pf, w + "/y"), "EACCES")
    rf = mkfile(w + "/rootf", 0o600)
    same("link.protected_hardlinks", uo(U1, os.link, rf, w + "/z"))
    same("link.of_symlink", outcome(os.link, w + "/sl", w + "/sl2", follow_symlinks=False))
    if os.path.lexists(w + "/sl2"):
        same("link.of_symlink.type", stat.S_ISLNK(os.lstat(w + "/sl2").st_mode))
    expect("link.enametoolong", outcome(os.link, f, w + "/" + "n" * 256), "ENAMETOOLONG")


def _node_checks(op, d, makefn, is_dir, want_type):
    """mkdir/mkfifo/mknod: mode and umask, owner, setgid parent, errors, times."""
    w = mkdir(d + "/w", 0o777)
    times_after("%s.parent_time" % op, [("", w)],
                lambda: expect("%s.root" % op, outcome(makefn, w + "/root", 0o777), "ok"))
    expect("%s.root.type" % op, want_type(os.lstat(w + "/root").st_mode), True)
    expect("%s.root.umask022" % op, mode_of(w + "/root"), "0755")
    expect("%s.root.owner" % op, own_of(w + "/root"), "0:0")
    expect("%s.umask0" % op, uv((0, 0), makefn, w + "/um0", 0o751, umask=0), None)
    expect("%s.umask0.mode" % op, mode_of(w + "/um0"), "0751")
    expect("%s.umask077" % op, uv((0, 0), makefn, w + "/um77", 0o777, umask=0o077), None)
    expect("%s.umask077.mode" % op, mode_of(w + "/um77"), "0700")
    for lab, u in (("u1", U1), ("u2", U2)):
        expect("%s.%s" % (op, lab), uo(u, makefn, "%s/%s" % (w, lab), 0o777), "ok")
        expect("%s.%s.owner" % (op, lab), own_of("%s/%s" % (w, lab)), ids(u))
        expect("%s.%s.mode" % (op, lab), mode_of("%s/%s" % (w, lab)), "0755")
    sg = mkdir(d + "/sg", 0o2777, (0, G_EXTRA))
    expect("%s.sgid_parent" % op, uo(U1, makefn, sg + "/n", 0o777), "ok")
    expect("%s.sgid_parent.group" % op, own_of(sg + "/n"), "%d:%d" % (U1[0], G_EXTRA))
    expect("%s.sgid_parent.mode" % op, mode_of(sg + "/n"), "2755" if is_dir else "0755")
    expect("%s.sgid_parent.root" % op, outcome(makefn, sg + "/r", 0o755), "ok")
    expect("%s.sgid_parent.root.group" % op, own_of(sg + "/r"), "0:%d" % G_EXTRA)
    mkfile(w + "/file")
    os.mkdir(w + "/dir")
    os.symlink("nowhere", w + "/dangling")
    for lab in ("file", "dir", "dangling"):
        expect("%s.eexist.%s" % (op, lab), outcome(makefn, w + "/" + lab, 0o755), "EEXIST")
    expect("%s.enoent" % op, outcome(makefn, w + "/nodir/x", 0o755), "ENOENT")
    expect("%s.enotdir" % op, outcome(makefn, w + "/file/x", 0o755), "ENOTDIR")
    r = mkdir(d + "/r", 0o755)
    expect("%s.eacces_write" % op, uo(U1, makefn, r + "/x", 0o755), "EACCES")
    priv = mkdir(d + "/priv", 0o700)
    mkdir(priv + "/open", 0o777)
    expect("%s.eacces_search" % op, uo(U1, makefn, priv + "/open/x", 0o755), "EACCES")
    expect("%s.enametoolong" % op, outcome(makefn, w + "/" + "n" * 256, 0o755), "ENAMETOOLONG")
    expect("%s.name_max" % op, outcome(makefn, w + "/" + "n" * 255, 0o755), "ok")


@check
def mkdir_(d):
    nl = os.lstat(d).st_nlink
    _node_checks("mkdir", d, os.mkdir, True, stat.S_ISDIR)
    same("mkdir.parent_nlink_delta", os.lstat(d).st_nlink - nl)
    same("mkdir.new_nlink", os.lstat(d + "/w/root").st_nlink)


@check
def mkfifo_(d):
    _node_checks("mkfifo", d, os.mkfifo, False, stat.S_ISFIFO)


@check
def mknod_(d):
    _node_checks("mknod_reg", mkdir(d + "/a"),
                 lambda p, m: os.mknod(p, stat.S_IFREG | m), False, stat.S_ISREG)
    b = mkdir(d + "/b", 0o777)
    expect("mknod.fifo", outcome(os.mknod, b + "/fifo", stat.S_IFIFO | 0o644), "ok")
    expect("mknod.fifo.type", stat.S_ISFIFO(os.lstat(b + "/fifo").st_mode), True)
    expect("mknod.sock", outcome(os.mknod, b + "/sock", stat.S_IFSOCK | 0o644), "ok")
    expect("mknod.sock.type", stat.S_ISSOCK(os.lstat(b + "/sock").st_mode), True)
    expect("mknod.sock.user", uo(U1, os.mknod, b + "/usock", stat.S_IFSOCK | 0o644), "ok")
    expect("mknod.sock.user.owner", own_of(b + "/usock"), ids(U1))
    r = outcome(os.mknod, b + "/chr", stat.S_IFCHR | 0o644, os.makedev(1, 3))
    same("mknod.chr.root", r)
    if r == "ok":
        st = os.lstat(b + "/chr")
        same("mknod.chr.rdev", (stat.S_ISCHR(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev)))
    r = outcome(os.mknod, b + "/blk", stat.S_IFBLK | 0o644, os.makedev(7, 200))
    same("mknod.blk.root", r)
    if r == "ok":
        st = os.lstat(b + "/blk")
        same("mknod.blk.rdev", (stat.S_ISBLK(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev)))
    expect("mknod.chr.user", uo(U1, os.mknod, b + "/uchr", stat.S_IFCHR | 0o644, os.makedev(1, 3)),
           "EPERM")


def _try_open(p, flags):
    os.close(os.open(p, flags))


def _perm_triplet(p):
    res = []
    for fl in (os.O_RDONLY, os.O_WRONLY, os.O_RDWR):
        try:
            os.close(os.open(p, fl))
            res.append("ok")
        except OSError as e:
            res.append(ename(e.errno))
    return ",".join(res)


@check
def open_(d):
    w = mkdir(d + "/w", 0o777)
    times_after("open.creat.parent_time", [("", w)],
                lambda: expect("open.creat.root", outcome(open_close, w + "/root",
                                                          os.O_CREAT | os.O_WRONLY, 0o777), "ok"))
    expect("open.creat.root.mode", mode_of(w + "/root"), "0755")
    for lab, u in (("u1", U1), ("u2", U2)):
        p = "%s/%s" % (w, lab)
        expect("open.creat.%s" % lab, uo(u, open_close, p, os.O_CREAT | os.O_RDWR, 0o666), "ok")
        expect("open.creat.%s.owner" % lab, own_of(p), ids(u))
        expect("open.creat.%s.mode" % lab, mode_of(p), "0644")
    expect("open.creat.umask0", uv(U1, open_close, w + "/um0", os.O_CREAT | os.O_WRONLY, 0o751,
                                   umask=0), None)
    expect("open.creat.umask0.mode", mode_of(w + "/um0"), "0751")
    expect("open.creat.setid_mode", uv(U1, open_close, w + "/sid", os.O_CREAT | os.O_WRONLY,
                                       0o6755, umask=0), None)
    same("open.creat.setid_mode.mode", mode_of(w + "/sid"))
    sg = mkdir(d + "/sg", 0o2777, (0, G_EXTRA))
    expect("open.creat.sgid_parent", uo(U1, open_close, sg + "/f", os.O_CREAT | os.O_WRONLY, 0o644),
           "ok")
    expect("open.creat.sgid_parent.owner", own_of(sg + "/f"), "%d:%d" % (U1[0], G_EXTRA))
    expect("open.creat.sgid_parent.mode", mode_of(sg + "/f"), "0644")
    # set-id bits asked for at creation in a setgid directory of a group
    # the caller is not in (inode_init_owner drops S_ISGID), or is in
    for lab, grp in (("nonmember", ()), ("member", (G_EXTRA,))):
        for kind in ("creat", "mknod", "mkdir"):
            p = "%s/sid_%s_%s" % (sg, kind, lab)
            if kind == "creat":
                fn, a = open_close, (p, os.O_CREAT | os.O_WRONLY, 0o6775)
            elif kind == "mknod":
                fn, a = os.mknod, (p, stat.S_IFREG | 0o6775)
            else:
                fn, a = os.mkdir, (p, 0o7775)
            st, v = as_user(U1, fn, *a, groups=grp, umask=0)
            expect("open.setid_in_sgid_dir.%s.%s" % (kind, lab), st, "ok")
            same("open.setid_in_sgid_dir.%s.%s.mode" % (kind, lab), mode_of(p))
            same("open.setid_in_sgid_dir.%s.%s.owner" % (kind, lab), own_of(p))
    ex = mkfile(w + "/ex", 0o640, U2, b"old")
    expect("open.creat_existing", uo(U1, open_close, w + "/root", os.O_CREAT | os.O_RDONLY, 0o600),
           "ok")
    expect("open.creat_existing.mode", mode_of(w + "/root"), "0755")
    os.mkdir(w + "/dir")
    os.symlink("ex", w + "/sl")
    os.symlink("nowhere", w + "/dangling")
    for lab in ("ex", "dir", "sl", "dangling"):
        expect("open.excl.%s" % lab, outcome(open_close, w + "/" + lab,
                                             os.O_CREAT | os.O_EXCL | os.O_WRONLY), "EEXIST")
    expect("open.excl.dangling.not_created", os.path.exists(w + "/nowhere"), False)
    times_after("open.trunc.time", [("", ex)],
                lambda: expect("open.trunc", outcome(open_close, ex, os.O_WRONLY | os.O_TRUNC),
                               "ok"))
    expect("open.trunc.size", os.lstat(ex).st_size, 0)
    times_after("open.trunc_empty.time", [("", ex)],
                lambda: outcome(open_close, ex, os.O_WRONLY | os.O_TRUNC), want=None)
    # O_TRUNC must reach the filesystem: data that reached it before the
    # truncating open must not come back once the kernel forgot the inode
    for lab, fl in (("trunc", os.O_WRONLY | os.O_TRUNC),
                    ("creat_trunc", os.O_CREAT | os.O_WRONLY | os.O_TRUNC),
                    ("rdwr_trunc", os.O_RDWR | os.O_TRUNC)):
        tp = mkfile("%s/durable_%s" % (w, lab), 0o644, data=b"stale data")
        fd = os.open(tp, os.O_RDWR)
        os.fsync(fd)
        os.close(fd)
        open_close(tp, fl)
        same("open.%s.durable.dropped" % lab, drop_caches(w))
        expect("open.%s.durable" % lab, (os.lstat(tp).st_size, read_all(tp)), (0, b""))
    tf = mkfile(w + "/tf", 0o644, data=b"12345")
    expect("open.trunc.eacces", uo(U1, open_close, tf, os.O_WRONLY | os.O_TRUNC), "EACCES")
    expect("open.trunc.eacces.size", os.lstat(tf).st_size, 5)
    # every permission bit for owner, group member and other
    pf = mkfile(w + "/perm", 0o000, (U1[0], G_EXTRA))
    rules = {"owner": (U1, ()), "group": (U2, (G_EXTRA,)), "other": (U2, ())}
    for m in (0o600, 0o400, 0o200, 0o060, 0o040, 0o020, 0o006, 0o004, 0o002, 0o000, 0o066, 0o606):
        os.chmod(pf, m)
        for who, (u, g) in rules.items():
            shift = {"owner": 6, "group": 3, "other": 0}[who]
            bits = (m >> shift) & 7
            want = ",".join([("ok" if bits & 4 else "EACCES"), ("ok" if bits & 2 else "EACCES"),
                             ("ok" if bits & 6 == 6 else "EACCES")])
            expect("open.perm.%04o.%s" % (m, who), uv(u, _perm_triplet, pf, groups=g), want)
    os.chmod(pf, 0)
    expect("open.perm.root_mode0", _perm_triplet(pf), "ok,ok,ok")
    expect("open.eisdir.wronly", outcome(_try_open, w + "/dir", os.O_WRONLY), "EISDIR")
    expect("open.eisdir.rdwr", outcome(_try_open, w + "/dir", os.O_RDWR), "EISDIR")
    expect("open.eisdir.creat", outcome(open_close, w + "/dir", os.O_CREAT | os.O_RDONLY), "EISDIR")
    expect("open.dir.rdonly", outcome(_try_open, w + "/dir", os.O_RDONLY), "ok")
    expect("open.enotdir", outcome(_try_open, ex + "/x", os.O_RDONLY), "ENOTDIR")
    expect("open.enotdir.creat", outcome(open_close, ex + "/x", os.O_CREAT | os.O_WRONLY), "ENOTDIR")
    expect("open.enotdir.o_directory", outcome(_try_open, ex, os.O_RDONLY | os.O_DIRECTORY), "ENOTDIR")
    expect("open.eloop.nofollow", outcome(_try_open, w + "/sl", os.O_RDONLY | os.O_NOFOLLOW), "ELOOP")
    os.symlink("loop2", w + "/loop1")
    os.symlink("loop1", w + "/loop2")
    expect("open.eloop.loop", outcome(_try_open, w + "/loop1", os.O_RDONLY), "ELOOP")
    expect("open.follows_symlink", read_all(w + "/sl"), b"")
    expect("open.enametoolong", outcome(open_close, w + "/" + "n" * 256, os.O_CREAT | os.O_WRONLY),
           "ENAMETOOLONG")
    expect("open.name_max", outcome(open_close, w + "/" + "n" * 255, os.O_CREAT | os.O_WRONLY), "ok")
    expect("open.enoent", outcome(_try_open, w + "/nope", os.O_RDONLY), "ENOENT")
    expect("open.enoent.creat", outcome(open_close, w + "/nodir/x", os.O_CREAT | os.O_WRONLY),
           "ENOENT")
    r = mkdir(d + "/r", 0o755)
    expect("open.eacces_write", uo(U1, open_close, r + "/x", os.O_CREAT | os.O_WRONLY), "EACCES")
    priv = mkdir(d + "/priv", 0o700)
    mkfile(priv + "/f", 0o666)
    expect("open.eacces_search", uo(U1, _try_open, priv + "/f", os.O_RDONLY), "EACCES")
    ap = mkfile(w + "/app", 0o644, data=b"abc")
    fd = os.open(ap, os.O_WRONLY | os.O_APPEND)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, b"def")
    os.close(fd)
    expect("open.append", read_all(ap), b"abcdef")


@check
def rename(d):
    a = mkdir(d + "/a", 0o777)
    b = mkdir(d + "/b", 0o777)
    f = mkfile(a + "/f", 0o640, U1, b"payload")
    ino = os.lstat(f).st_ino
    times_after("rename.file.time", [("src_parent", a), ("dst_parent", b)],
                lambda: expect("rename.file", outcome(os.rename, f, b + "/g"), "ok"))
    expect("rename.file.src_gone", lstat_or_err(f), "ENOENT")
    st = os.lstat(b + "/g")
    expect("rename.file.same", (st.st_ino == ino, st.st_nlink, read_all(b + "/g")), (True, 1, b"payload"))
    expect("rename.file.owner_mode", (own_of(b + "/g"), mode_of(b + "/g")), (ids(U1), "0640"))
    before = os.lstat(b + "/g")
    time.sleep(TICK)
    os.rename(b + "/g", b + "/h")
    expect("rename.file.self.ctime", newer(before, os.lstat(b + "/h"), "ctime"), "newer")
    # directories
    dd = mkdir(a + "/dir", 0o755)
    mkfile(dd + "/inner", data=b"in")
    nla, nlb = os.lstat(a).st_nlink, os.lstat(b).st_nlink
    expect("rename.dir", outcome(os.rename, dd, b + "/dir2"), "ok")
    expect("rename.dir.content", read_all(b + "/dir2/inner"), b"in")
    expect("rename.dir.dotdot", os.lstat(b + "/dir2/..").st_ino, os.lstat(b).st_ino)
    same("rename.dir.parent_nlink", (os.lstat(a).st_nlink - nla, os.lstat(b).st_nlink - nlb))
    # over an existing file: the replaced inode loses a link
    t = mkfile(b + "/t", data=b"old")
    os.link(t, b + "/t_other")
    s = mkfile(b + "/s", data=b"new")
    times_after("rename.over_file.replaced", [("", b + "/t_other")],
                lambda: expect("rename.over_file", outcome(os.rename, s, t), "ok"),
                fields=("ctime",))
    expect("rename.over_file.content", read_all(t), b"new")
    expect("rename.over_file.replaced_nlink", os.lstat(b + "/t_other").st_nlink, 1)
    expect("rename.over_file.replaced_content", read_all(b + "/t_other"), b"old")
    e1 = mkdir(b + "/e1")
    mkdir(b + "/empty")
    expect("rename.over_empty_dir", outcome(os.rename, e1, b + "/empty"), "ok")
    expect("rename.over_empty_dir.gone", lstat_or_err(e1), "ENOENT")
    full = mkdir(b + "/full")
    mkfile(full + "/x")
    d2 = mkdir(b + "/d2")
    expect("rename.enotempty", outcome(os.rename, d2, full), "ENOTEMPTY")
    expect("rename.eisdir", outcome(os.rename, t, d2), "EISDIR")
    expect("rename.enotdir", outcome(os.rename, d2, t), "ENOTDIR")
    mkdir(d2 + "/sub")
    expect("rename.einval.into_self", outcome(os.rename, d2, d2 + "/sub/x"), "EINVAL")
    expect("rename.einval.into_child", outcome(os.rename, d2, d2 + "/x"), "EINVAL")
    h1 = mkfile(b + "/h1")
    os.link(h1, b + "/h2")
    expect("rename.same_inode", outcome(os.rename, h1, b + "/h2"), "ok")
    expect("rename.same_inode.both", (os.path.exists(h1), os.lstat(b + "/h2").st_nlink), (True, 2))
    os.symlink("some/target/" + "t" * 300, b + "/sl")
    expect("rename.symlink", outcome(os.rename, b + "/sl", a + "/sl"), "ok")
    expect("rename.symlink.target", os.readlink(a + "/sl"), "some/target/" + "t" * 300)
    expect("rename.enoent", outcome(os.rename, b + "/nope", b + "/x"), "ENOENT")
    expect("rename.enoent_dstdir", outcome(os.rename, t, b + "/nodir/x"), "ENOENT")
    expect("rename.enametoolong", outcome(os.rename, t, b + "/" + "n" * 256), "ENAMETOOLONG")
    expect("rename.name_max", outcome(os.rename, t, b + "/" + "n" * 255), "ok")
    # renameat2
    x = mkfile(b + "/x", data=b"X")
    y = mkfile(b + "/y", data=b"Y")
    expect("rename.noreplace.eexist", outcome(renameat2, x, y, RENAME_NOREPLACE), "EEXIST")
    expect("rename.noreplace.ok", outcome(renameat2, x, b + "/x2", RENAME_NOREPLACE), "ok")
    expect("rename.exchange", outcome(renameat2, b + "/x2", y, RENAME_EXCHANGE), "ok")
    expect("rename.exchange.content", (read_all(b + "/x2"), read_all(y)), (b"Y", b"X"))
    expect("rename.exchange.enoent", outcome(renameat2, y, b + "/nope", RENAME_EXCHANGE), "ENOENT")
    # permissions
    r = mkdir(d + "/r", 0o755)
    rf = mkfile(r + "/f", 0o666, U1)
    expect("rename.eacces_src", uo(U1, os.rename, rf, a + "/rf"), "EACCES")
    uf = mkfile(a + "/uf", 0o644, U1)
    expect("rename.eacces_dst", uo(U1, os.rename, uf, r + "/uf"), "EACCES")
    rd = mkdir(a + "/rootdir", 0o755)
    same("rename.user_moves_foreign_dir", uo(U1, os.rename, rd, b + "/rootdir"))
    # sticky directory
    st_d = mkdir(d + "/sticky", 0o1777)
    s1 = mkfile(st_d + "/u1f", 0o666, U1)
    s2 = mkfile(st_d + "/u2f", 0o666, U2)
    expect("rename.sticky.nonowner", uo(U2, os.rename, s1, st_d + "/moved"), "EPERM")
    expect("rename.sticky.nonowner_over", uo(U2, os.rename, s2, s1), "EPERM")
    expect("rename.sticky.nonowner.kept", (os.path.exists(s1), os.path.exists(s2)), (True, True))
    expect("rename.sticky.owner", uo(U1, os.rename, s1, st_d + "/u1g"), "ok")
    expect("rename.sticky.root", outcome(os.rename, st_d + "/u1g", st_d + "/u1f"), "ok")
    sd = mkdir(st_d + "/u1d", 0o777, U1)
    expect("rename.sticky.dir_nonowner", uo(U2, os.rename, sd, st_d + "/u2d"), "EPERM")
    st_o = mkdir(d + "/sticky_u2", 0o1777, U2)
    o1 = mkfile(st_o + "/u1f", 0o644, U1)
    expect("rename.sticky.dirowner", uo(U2, os.rename, o1, st_o + "/x"), "ok")


@check
def rmdir(d):
    w = mkdir(d + "/w", 0o777)
    os.mkdir(w + "/x")
    nl = os.lstat(w).st_nlink
    times_after("rmdir.parent_time", [("", w)],
                lambda: expect("rmdir.ok", outcome(os.rmdir, w + "/x"), "ok"))
    expect("rmdir.gone", lstat_or_err(w + "/x"), "ENOENT")
    same("rmdir.parent_nlink", os.lstat(w).st_nlink - nl)
    mkfile(mkdir(w + "/full") + "/f")
    expect("rmdir.enotempty", outcome(os.rmdir, w + "/full"), "ENOTEMPTY")
    mkfile(w + "/file")
    expect("rmdir.enotdir", outcome(os.rmdir, w + "/file"), "ENOTDIR")
    expect("rmdir.enotdir_component", outcome(os.rmdir, w + "/file/x"), "ENOTDIR")
    expect("rmdir.enoent", outcome(os.rmdir, w + "/nope"), "ENOENT")
    os.mkdir(w + "/y")
    expect("rmdir.einval_dot", outcome(os.rmdir, w + "/y/."), "EINVAL")
    expect("rmdir.dotdot", outcome(os.rmdir, w + "/y/.."), "ENOTEMPTY")
    os.symlink("y", w + "/sl")
    expect("rmdir.symlink", outcome(os.rmdir, w + "/sl"), "ENOTDIR")
    r = mkdir(d + "/r", 0o755)
    mkdir(r + "/u", 0o777, U1)
    expect("rmdir.eacces", uo(U1, os.rmdir, r + "/u"), "EACCES")
    st_d = mkdir(d + "/sticky", 0o1777)
    mkdir(st_d + "/u1d", 0o777, U1)
    mkdir(st_d + "/u1e", 0o777, U1)
    expect("rmdir.sticky.nonowner", uo(U2, os.rmdir, st_d + "/u1d"), "EPERM")
    expect("rmdir.sticky.owner", uo(U1, os.rmdir, st_d + "/u1d"), "ok")
    expect("rmdir.sticky.root", outcome(os.rmdir, st_d + "/u1e"), "ok")
    st_o = mkdir(d + "/sticky_u2", 0o1777, U2)
    mkdir(st_o + "/u1d", 0o755, U1)
    expect("rmdir.sticky.dirowner", uo(U2, os.rmdir, st_o + "/u1d"), "ok")


@check
def symlink(d):
    w = mkdir(d + "/w", 0o777)
    for n in (1, 255, 1023, 1024, 4095):
        tgt = ("t/" * (n // 2) + "x" * (n % 2))[:n]
        p = "%s/len%d" % (w, n)
        expect("symlink.len%d" % n, outcome(os.symlink, tgt, p), "ok")
        if os.path.lexists(p):
            expect("symlink.len%d.readlink" % n, os.readlink(p) == tgt, True)
            expect("symlink.len%d.size" % n, os.lstat(p).st_size, n)
    same("symlink.len4096", outcome(os.symlink, "x" * 4096, w + "/len4096"))
    times_after("symlink.parent_time", [("", w)],
                lambda: expect("symlink.user", uo(U1, os.symlink, "../some target", w + "/u1"), "ok"))
    expect("symlink.user.owner", own_of(w + "/u1"), ids(U1))
    expect("symlink.user.target", os.readlink(w + "/u1"), "../some target")
    expect("symlink.mode", mode_of(w + "/u1"), "0777")
    expect("symlink.dangling.stat", outcome(os.stat, w + "/u1"), "ENOENT")
    sg = mkdir(d + "/sg", 0o2777, (0, G_EXTRA))
    expect("symlink.sgid_parent", uo(U2, os.symlink, "x", sg + "/l"), "ok")
    expect("symlink.sgid_parent.owner", own_of(sg + "/l"), "%d:%d" % (U2[0], G_EXTRA))
    mkfile(w + "/file")
    expect("symlink.eexist", outcome(os.symlink, "x", w + "/file"), "EEXIST")
    expect("symlink.eexist_link", outcome(os.symlink, "x", w + "/u1"), "EEXIST")
    expect("symlink.enoent", outcome(os.symlink, "x", w + "/nodir/l"), "ENOENT")
    r = mkdir(d + "/r", 0o755)
    expect("symlink.eacces", uo(U1, os.symlink, "x", r + "/l"), "EACCES")
    expect("symlink.enametoolong", outcome(os.symlink, "x", w + "/" + "n" * 256), "ENAMETOOLONG")
    expect("symlink.name_max", outcome(os.symlink, "x", w + "/" + "n" * 255), "ok")
    os.symlink("file", w + "/tofile")
    expect("symlink.lchown", outcome(os.lchown, w + "/tofile", *U2), "ok")
    expect("symlink.lchown.link", own_of(w + "/tofile"), ids(U2))
    expect("symlink.lchown.target", own_of(w + "/file"), "0:0")
    expect("readlink.einval", outcome(os.readlink, w + "/file"), "EINVAL")
    expect("readlink.enoent", outcome(os.readlink, w + "/nope"), "ENOENT")
    expect("symlink.follow", os.stat(w + "/tofile").st_ino, os.stat(w + "/file").st_ino)


def _ftruncate_open(p, flags, length):
    fd = os.open(p, flags)
    try:
        os.ftruncate(fd, length)
    finally:
        os.close(fd)


@check
def truncate(d):
    w = mkdir(d + "/w", 0o777)
    f = mkfile(w + "/f", 0o644, data=b"hello world")
    times_after("truncate.grow.time", [("", f)],
                lambda: expect("truncate.grow", outcome(os.truncate, f, 100000), "ok"))
    expect("truncate.grow.size", os.lstat(f).st_size, 100000)
    expect("truncate.grow.content", read_all(f), b"hello world" + bytes(100000 - 11))
    times_after("truncate.shrink.time", [("", f)],
                lambda: expect("truncate.shrink", outcome(os.truncate, f, 5), "ok"))
    expect("truncate.shrink.content", read_all(f), b"hello")
    # truncate(2) to the same size: ext4 and tmpfs update mtime/ctime, POSIX
    # does not ask for it, and the FUSE kernel module with writeback_cache
    # keeps its own times unless the size changes (fuse_do_setattr).
    times_after("truncate.samesize.time", [("", f)], lambda: os.truncate(f, 5), want="info")
    times_after("ftruncate.time", [("", f)],
                lambda: expect("ftruncate", outcome(_ftruncate_open, f, os.O_RDWR, 3), "ok"))
    expect("ftruncate.content", read_all(f), b"hel")
    expect("ftruncate.rdonly", outcome(_ftruncate_open, f, os.O_RDONLY, 1), "EINVAL")
    expect("truncate.eacces", uo(U1, os.truncate, f, 1), "EACCES")
    expect("truncate.eacces.size", os.lstat(f).st_size, 3)
    u = mkfile(w + "/u", 0o644, U1, b"abc")
    expect("truncate.user", uo(U1, os.truncate, u, 1), "ok")

    def chmod_then_ftruncate(p):
        fd = os.open(p, os.O_RDWR)
        os.fchmod(fd, 0)
        os.ftruncate(fd, 0)
        os.close(fd)
    expect("ftruncate.after_chmod0", uo(U1, chmod_then_ftruncate, u), "ok")
    expect("ftruncate.after_chmod0.size", os.lstat(u).st_size, 0)
    expect("truncate.eisdir", outcome(os.truncate, w, 0), "EISDIR")
    expect("truncate.enoent", outcome(os.truncate, w + "/nope", 0), "ENOENT")
    expect("truncate.enotdir", outcome(os.truncate, f + "/x", 0), "ENOTDIR")
    expect("truncate.einval", outcome(os.truncate, f, -1), "EINVAL")
    s = mkfile(w + "/suid", 0o4755, U1, b"abc")
    expect("truncate.user_setid", uo(U1, os.truncate, s, 1), "ok")
    same("truncate.user_setid.mode", mode_of(s))
    # set-id bits of a file another user truncates (path, fd, O_TRUNC)
    for lab, m in (("4777", 0o4777), ("2777", 0o2777), ("2766", 0o2766), ("6766", 0o6766)):
        p = mkfile("%s/tr_%s" % (w, lab), m, data=b"abc")
        expect("truncate.other_setid.%s" % lab, uo(U1, os.truncate, p, 1), "ok")
        same("truncate.other_setid.%s.mode" % lab, mode_of(p))
        p = mkfile("%s/ftr_%s" % (w, lab), m, data=b"abc")
        expect("ftruncate.other_setid.%s" % lab, uo(U1, _ftruncate_open, p, os.O_WRONLY, 1), "ok")
        same("ftruncate.other_setid.%s.mode" % lab, mode_of(p))
        p = mkfile("%s/otr_%s" % (w, lab), m, data=b"abc")
        expect("open.trunc.other_setid.%s" % lab,
               uo(U1, open_close, p, os.O_WRONLY | os.O_TRUNC), "ok")
        same("open.trunc.other_setid.%s.mode" % lab, mode_of(p))


@check
def unlink(d):
    w = mkdir(d + "/w", 0o777)
    f = mkfile(w + "/f", data=b"x")
    os.link(f, w + "/other")
    times_after("unlink.time", [("parent", w), ("other_link", w + "/other")],
                lambda: expect("unlink.ok", outcome(os.unlink, f), "ok"), fields=("ctime",))
    expect("unlink.gone", lstat_or_err(f), "ENOENT")
    expect("unlink.other_nlink", os.lstat(w + "/other").st_nlink, 1)
    mkfile(w + "/g")
    times_after("unlink.parent", [("", w)], lambda: os.unlink(w + "/g"), fields=("mtime",))
    os.mkdir(w + "/dir")
    expect("unlink.eisdir", outcome(os.unlink, w + "/dir"), "EISDIR")
    expect("unlink.enoent", outcome(os.unlink, w + "/nope"), "ENOENT")
    expect("unlink.enotdir", outcome(os.unlink, w + "/other/x"), "ENOTDIR")
    os.symlink("other", w + "/sl")
    expect("unlink.symlink", outcome(os.unlink, w + "/sl"), "ok")
    expect("unlink.symlink.target_kept", os.path.exists(w + "/other"), True)
    mkfifo(w + "/fifo")
    expect("unlink.fifo", outcome(os.unlink, w + "/fifo"), "ok")
    r = mkdir(d + "/r", 0o755)
    mkfile(r + "/u", 0o666, U1)
    expect("unlink.eacces", uo(U1, os.unlink, r + "/u"), "EACCES")
    o = mkfile(w + "/open", data=b"still here")
    fd = os.open(o, os.O_RDONLY)
    os.unlink(o)
    expect("unlink.open_fd.nlink", os.fstat(fd).st_nlink, 0)
    expect("unlink.open_fd.read", os.pread(fd, 100, 0), b"still here")
    os.close(fd)
    st_d = mkdir(d + "/sticky", 0o1777)
    for n in ("a", "b"):
        mkfile(st_d + "/" + n, 0o666, U1)
    expect("unlink.sticky.nonowner", uo(U2, os.unlink, st_d + "/a"), "EPERM")
    expect("unlink.sticky.owner", uo(U1, os.unlink, st_d + "/a"), "ok")
    expect("unlink.sticky.root", outcome(os.unlink, st_d + "/b"), "ok")
    st_o = mkdir(d + "/sticky_u2", 0o1777, U2)
    mkfile(st_o + "/a", 0o644, U1)
    expect("unlink.sticky.dirowner", uo(U2, os.unlink, st_o + "/a"), "ok")


def _times(p):
    st = os.lstat(p)
    return (st.st_atime_ns, st.st_mtime_ns)


@check
def utimensat_(d):
    w = mkdir(d + "/w", 0o777)
    old = ((1000000000, 0), (1000000000, 0))
    f = mkfile(w + "/f", 0o644, U1)
    g = mkfile(w + "/g", 0o666, U1)
    for p in (f, g):
        utimensat(p, old)
    now0 = time.time_ns()
    times_after("utimensat.now_owner.time", [("", f)],
                lambda: expect("utimensat.now_owner", uo(U1, utimensat, f), "ok"),
                fields=("ctime",))
    a, m = _times(f)
    expect("utimensat.now_owner.times", (a >= now0 - 10**9, m >= now0 - 10**9), (True, True))
    expect("utimensat.now_writer", uo(U2, utimensat, g), "ok")
    expect("utimensat.now_writer.mtime", _times(g)[1] >= now0 - 10**9, True)
    expect("utimensat.now_both_explicit_writer",
           uo(U2, utimensat, g, ((0, UTIME_NOW), (0, UTIME_NOW))), "ok")
    utimensat(f, old)
    expect("utimensat.now_nowrite", uo(U2, utimensat, f), "EACCES")
    expect("utimensat.now_nowrite.unchanged", _times(f), (10**18, 10**18))
    t = ((1234567890, 123456789), (987654321, 987654321))
    expect("utimensat.explicit_owner", uo(U1, utimensat, f, t), "ok")
    expect("utimensat.explicit_owner.times", _times(f), (1234567890123456789, 987654321987654321))
    expect("utimensat.explicit_writer", uo(U2, utimensat, g, t), "EPERM")
    expect("utimensat.explicit_other", uo(U2, utimensat, f, t), "EPERM")
    expect("utimensat.explicit_root", outcome(utimensat, g, t), "ok")
    expect("utimensat.explicit_root.times", _times(g), (1234567890123456789, 987654321987654321))
    same("utimensat.now_omit_writer", uo(U2, utimensat, g, ((0, UTIME_NOW), (0, UTIME_OMIT))))
    utimensat(f, old)
    expect("utimensat.omit_atime",
           outcome(utimensat, f, ((0, UTIME_OMIT), (2000000000, 5))), "ok")
    expect("utimensat.omit_atime.times", _times(f), (10**18, 2000000000 * 10**9 + 5))
    expect("utimensat.omit_mtime",
           outcome(utimensat, f, ((1500000000, 7), (0, UTIME_OMIT))), "ok")
    expect("utimensat.omit_mtime.times", _times(f), (1500000000 * 10**9 + 7, 2000000000 * 10**9 + 5))
    times_after("utimensat.omit_both.time", [("", f)],
                lambda: expect("utimensat.omit_both",
                               outcome(utimensat, f, ((0, UTIME_OMIT), (0, UTIME_OMIT))), "ok"),
                fields=("ctime",), want=None)
    expect("utimensat.omit_both.times", _times(f), (1500000000 * 10**9 + 7, 2000000000 * 10**9 + 5))
    for lab, sec in (("epoch", 0), ("pre_epoch", -100000), ("y2038", 2**31 + 10), ("far", 2**33)):
        r = outcome(utimensat, g, ((sec, 1), (sec, 999999999)))
        same("utimensat.%s" % lab, r)
        if r == "ok":
            same("utimensat.%s.times" % lab, _times(g))
    expect("utimensat.einval_nsec", outcome(utimensat, g, ((0, 10**9), (0, 0))), "EINVAL")
    os.symlink("f", w + "/sl")
    r = outcome(utimensat, w + "/sl", t, AT_SYMLINK_NOFOLLOW)
    same("utimensat.nofollow", r)
    if r == "ok":
        same("utimensat.nofollow.link_times", _times(w + "/sl"))
        same("utimensat.nofollow.target_untouched", _times(f))
    expect("utimensat.dir", outcome(utimensat, w, t), "ok")
    expect("utimensat.dir.times", _times(w), (1234567890123456789, 987654321987654321))
    expect("utimensat.enoent", outcome(utimensat, w + "/nope"), "ENOENT")


def _write_fstat(p, data):
    fd = os.open(p, os.O_WRONLY)
    try:
        os.write(fd, data)
        return "%04o" % stat.S_IMODE(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


@check
def write_setid(d):
    w = mkdir(d + "/w", 0o777)
    cases = (("root_owned_4777", 0o4777, (0, 0), U1, "0777"),
             ("root_owned_2777", 0o2777, (0, 0), U1, "0777"),
             ("root_owned_6777", 0o6777, (0, 0), U1, "0777"),
             ("own_4755", 0o4755, U1, U1, "0755"),
             ("own_6775", 0o6775, U1, U1, "0775"))
    for lab, m, owner, writer, want in cases:
        p = mkfile("%s/%s" % (w, lab), m, owner)
        expect("write.clears_setid.%s.fstat" % lab, uv(writer, _write_fstat, p, b"x"), want)
        expect("write.clears_setid.%s.stat" % lab, mode_of(p), want)
    p = mkfile(w + "/sgid_nogx", 0o2766, (0, 0))
    same("write.sgid_no_group_exec", uv(U1, _write_fstat, p, b"x"))
    same("write.sgid_no_group_exec.stat", mode_of(p))
    p = mkfile(w + "/sgid_nogx_member", 0o6766, (0, G_EXTRA))
    same("write.sgid_no_group_exec_member", uv(U1, _write_fstat, p, b"x", groups=[G_EXTRA]))
    same("write.sgid_no_group_exec_member.stat", mode_of(p))
    p = mkfile(w + "/sgid_gx_member", 0o2777, (0, G_EXTRA))
    same("write.sgid_group_exec_member", uv(U1, _write_fstat, p, b"x", groups=[G_EXTRA]))
    p = mkfile(w + "/root_writes", 0o6777, U1)
    same("write.by_root", _write_fstat(p, b"x"))
    same("write.by_root.stat", mode_of(p))
    # a second write after the first cleared the bits keeps the mode
    p = mkfile(w + "/twice", 0o4777, (0, 0))
    uv(U1, _write_fstat, p, b"x")
    os.chmod(p, 0o4777)
    expect("write.clears_setid.again", uv(U1, _write_fstat, p, b"y"), "0777")
    p = mkfile(w + "/times", 0o644, data=b"abc")
    times_after("write.time", [("", p)], lambda: _write_fstat(p, b"zz"))
    expect("write.content", read_all(p), b"zzc")


def _deep(base, names, depth_file):
    """In a child: chdir down @names creating each, then file work, then up."""
    os.chdir(base)
    out = []
    for n in names:
        os.mkdir(n)
        os.chdir(n)
    data = bytes(range(256)) * 400
    fd = os.open("file", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
    os.write(fd, data)
    os.close(fd)
    out.append(read_all("file") == data)
    os.rename("file", "renamed")
    os.link("renamed", "linked")
    os.symlink("renamed", "sym")
    out.append(os.stat("sym").st_nlink)
    os.mkfifo("fifo")
    os.chmod("renamed", 0o600)
    os.utime("renamed", ns=(5, 7))
    out.append((own_of("linked"), mode_of("linked"), _times("linked")))
    out.append(sorted(os.listdir(".")))
    for n in ("renamed", "linked", "sym", "fifo"):
        os.unlink(n)
    for n in reversed(names):
        os.chdir("..")
        os.rmdir(n)
    out.append(os.listdir("."))
    return out


def _relpath_ops(base, rel):
    os.chdir(base)
    return [outcome(open_close, rel, os.O_CREAT | os.O_WRONLY),
            outcome(os.stat, rel), outcome(os.chmod, rel, 0o600),
            outcome(os.rename, rel, rel[:-1] + "Y"), outcome(os.unlink, rel[:-1] + "Y")]


def _mkchain(base, comps):
    os.chdir(base)
    for c in comps:
        os.mkdir(c)
        os.chdir(c)
    return True


@check
def names(d):
    w = mkdir(d + "/w", 0o777)
    n255 = "N" * NAME_MAX
    n256 = "N" * (NAME_MAX + 1)
    expect("namemax.create", outcome(open_close, w + "/" + n255, os.O_CREAT | os.O_WRONLY), "ok")
    expect("namemax.listed", n255 in os.listdir(w), True)
    expect("namemax.stat", outcome(os.stat, w + "/" + n255), "ok")
    expect("namemax.unlink", outcome(os.unlink, w + "/" + n255), "ok")
    expect("namemax.mkdir", outcome(os.mkdir, w + "/" + n255), "ok")
    expect("namemax.rmdir", outcome(os.rmdir, w + "/" + n255), "ok")
    expect("namemax.too_long.stat", outcome(os.stat, w + "/" + n256), "ENAMETOOLONG")
    expect("namemax.too_long.unlink", outcome(os.unlink, w + "/" + n256), "ENAMETOOLONG")
    expect("namemax.too_long.mkfifo", outcome(os.mkfifo, w + "/" + n256), "ENAMETOOLONG")
    # a relative path of PATH_MAX - 1 bytes works, PATH_MAX bytes does not
    comps = ["D" * 200] * 20         # 20 * 201 = 4020 bytes with slashes
    expect("pathmax.chain", uv((0, 0), _mkchain, w, comps), True)
    prefix = "/".join(comps) + "/"
    rel = prefix + "F" * (PATH_MAX - 1 - len(prefix))
    expect("pathmax.len", len(rel), PATH_MAX - 1)
    expect("pathmax.ops", uv((0, 0), _relpath_ops, w, rel), "ok,ok,ok,ok,ok".split(","))
    rel2 = prefix + "F" * (PATH_MAX - len(prefix))
    expect("pathmax.too_long", uv((0, 0), lambda b, r: outcome(os.stat, r) if not os.chdir(b) else 0,
                                  w, rel2), "ENAMETOOLONG")
    # deeper than PATH_MAX through chdir, as a user
    deep = mkdir(d + "/deep", 0o777)
    names_ = ["d%02d_" % i + "x" * 196 for i in range(60)]   # about 12,000 bytes
    expect("deeppath.user", uv(U2, _deep, deep, names_, None),
           [True, 2, (ids(U2), "0600", (5, 7)), ["fifo", "linked", "renamed", "sym"], []])


def snapshot(top):
    """(path, type and mode, owner, size, nlink, mtime) of everything under
    @top, walked with directory fds (paths are longer than PATH_MAX)."""
    out = {}
    for root, dirs, files, rootfd in os.fwalk(top):
        for n in dirs + files:
            try:
                st = os.stat(n, dir_fd=rootfd, follow_symlinks=False)
            except OSError as e:
                out[(root, n)] = ename(e.errno)
                continue
            out[(root[len(top):], n)] = ((st.st_mode, st.st_uid, st.st_gid, st.st_size,
                                          st.st_nlink, st.st_mtime_ns), st.st_ctime_ns)
    return out


def cache_coherence(top):
    """What the kernel showed from its caches is what the filesystem has."""
    before = snapshot(top)
    same("cache.dropped", drop_caches(top))
    after = snapshot(top)
    for i, what in ((0, "mode owner size nlink mtime"), (1, "ctime")):
        diffs = []
        for k in sorted(set(before) | set(after)):
            b, a = before.get(k), after.get(k)
            b = b[i] if isinstance(b, tuple) else b
            a = a[i] if isinstance(a, tuple) else a
            if b != a:
                diffs.append("%s/%s: %s -> %s" % (k[0][-40:], k[1][:40], b, a))
        nm = "cache.coherent" if i == 0 else "cache.coherent_ctime"
        if i == 1:
            # ctime: with the writeback cache the kernel stamps ctime from
            # its own clock reading and the backing filesystem from a later
            # one (microseconds apart); nothing can set ctime on the backing
            # file, so a fresh lookup may see a slightly later ctime.
            # Documented in zramfs(8); shown, not counted.
            info(nm + ".count", len(diffs))
            info(nm + ".first", diffs[:3])
            continue
        expect(nm + ".count", len(diffs), 0)
        expect(nm + ".first", diffs[:3], [])


def run(top):
    os.umask(0o022)
    os.chmod(top, 0o755)
    only = os.environ.get("POSIX_ONLY", "").split()
    for fn in CHECKS:
        name = fn.__name__.rstrip("_")
        if only and name not in only:
            continue
        d = os.path.join(top, name)
        os.mkdir(d, 0o755)
        try:
            fn(d)
        except Exception:
            tb = traceback.format_exc().strip().splitlines()
            _record("%s.exception" % name, "expect", False, " | ".join(tb[-3:]), "no exception")
    try:
        cache_coherence(top)
    except Exception:
        tb = traceback.format_exc().strip().splitlines()
        _record("cache.exception", "expect", False, " | ".join(tb[-3:]), "no exception")
    for r in RESULTS:
        print("\t".join(r))


def load(path):
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 5:
                out[parts[0]] = parts[1:]
    return out


def compare(ref_path, got_path, known=()):
    ref, got = load(ref_path), load(got_path)
    bad = uncounted = passed = infos = 0
    for name in list(ref) + [n for n in got if n not in ref]:
        r, g = ref.get(name), got.get(name)
        if r is None:
            if g[1] == "FAIL":
                print("BUG   %s: only on the filesystem under test: got %s" % (name, g[2]))
                bad += 1
            continue
        if g is None:
            print("BUG   %s: did not run on the filesystem under test (reference: %s)" % (name, r[2]))
            bad += 1
            continue
        kind = r[0]
        if kind == "expect" and r[1] == "FAIL":
            uncounted += 1
            print("skip  %s: reference fails it too (want %s, reference got %s, zramfs got %s)"
                  % (name, r[3], r[2], g[2]))
            continue
        ok = (g[1] == "PASS") if kind == "expect" else (g[2] == r[2])
        if ok:
            passed += 1
            continue
        if kind == "info":
            infos += 1
            print("info  %s: reference got %s, zramfs got %s (not counted: see the check)"
                  % (name, r[2], g[2]))
            continue
        bad += 1
        tag = "KNOWN" if name in known else "BUG  "
        print("%s %s: want %s (reference got %s), zramfs got %s"
              % (tag, name, r[3] if kind == "expect" else r[2], r[2], g[2]))
    print("posix checks: %d pass, %d fail, %d not counted (reference fails them), "
          "%d known FUSE differences" % (passed, bad, uncounted, infos))
    return 1 if bad else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "run":
        run(argv[2])
        return 0
    if len(argv) >= 4 and argv[1] == "compare":
        return compare(argv[2], argv[3], set(argv[4:]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
