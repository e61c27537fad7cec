#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
# tmp_multiuser.py PART DIR: what programs and users expect of /tmp, run by
# root in DIR (a zramfs mount or a tmpfs, see tmp_multiuser.sh), printing a
# transcript that must be the same on both. Other users are forked
# processes that drop to their ids (no accounts needed): A (nobody), B,
# C; group G holds A and B where a test says so. Nothing in the transcript
# depends on inode numbers, times or pids.
#
# PART is one of:
#   main        sticky bit, mkstemp/mkdtemp, O_EXCL races, O_TMPFILE,
#               AF_UNIX sockets, FIFOs, locks, allow_other, umask, setgid
#               directories, inotify
#   protected   the fs.protected_* checks (the caller sets the sysctls)
#   plant DIR2  protected, where the other user's files are made in DIR2
#               (the backing directory of the mount DIR) after the victim
#               looked the name up and found nothing: the kernel holds a
#               negative entry and sends a CREATE, which the daemon must
#               check as the kernel would have
import ctypes
import errno
import fcntl
import os
import socket
import stat
import struct
import subprocess
import sys

A, B, C, G = 65534, 4201, 4202, 4210
NAMES = {0: "root", A: "A", B: "B", C: "C"}

libc = ctypes.CDLL(None, use_errno=True)


def out(*a):
    print(*a, flush=True)


def ename(e):
    return errno.errorcode.get(e, str(e))


def drop(uid, groups=(), umask=0o022):
    os.setgroups(list(groups))
    os.setresgid(uid if uid else 0, uid if uid else 0, uid if uid else 0)
    os.setresuid(uid, uid, uid)
    os.umask(umask)


def run_as(uid, fn, groups=(), umask=0o022):
    """fn() in a child running as uid: its return value (str), "ok" for
    None, or the errno name of the OSError it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            drop(uid, groups, umask)
            res = fn()
            res = "ok" if res is None else str(res)
        except OSError as e:
            res = ename(e.errno)
        except BaseException as e:  # noqa: BLE001 (shown in the transcript)
            res = "exception " + repr(e)
        os.write(w, res.encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return data.decode()


def check(who, what, fn, **kw):
    out(f"{NAMES[who]}: {what}: {run_as(who, fn, **kw)}")


class Child:
    """A process running as uid that talks with the parent by lines: the
    parent's send() is the child's recv() and the other way round."""

    def __init__(self, uid, fn, groups=()):
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(p2c_w)
            os.close(c2p_r)
            self.rf = os.fdopen(p2c_r, "r")
            self.wf = os.fdopen(c2p_w, "w")
            rc = 0
            try:
                drop(uid, groups)
                fn(self)
            except BaseException as e:  # noqa: BLE001
                self.send("exception " + repr(e))
                rc = 1
            os._exit(rc)
        os.close(p2c_r)
        os.close(c2p_w)
        self.rf = os.fdopen(c2p_r, "r")
        self.wf = os.fdopen(p2c_w, "w")

    def send(self, msg):
        self.wf.write(msg + "\n")
        self.wf.flush()

    def recv(self):
        line = self.rf.readline()
        if not line:
            raise EOFError("the other process ended")
        return line.rstrip("\n")

    def wait(self):
        self.wf.close()
        rest = self.rf.read()
        self.rf.close()
        _, st = os.waitpid(self.pid, 0)
        if rest:
            out(f"  (child said: {rest.strip()})")
        return os.waitstatus_to_exitcode(st)


def tryop(fn):
    try:
        r = fn()
        return "ok" if r is None else str(r)
    except OSError as e:
        return ename(e.errno)


def write_file(p, data="x\n", mode=0o644, flags=os.O_WRONLY | os.O_CREAT | os.O_EXCL):
    fd = os.open(p, flags, mode)
    os.write(fd, data.encode())
    os.close(fd)


def read_file(p):
    with open(p) as f:
        return f.read().strip()


def open_close(p, flags, mode=0o666):
    def f():
        fd = os.open(p, flags, mode)
        os.close(fd)
    return f


def lsmode(p):
    st = os.lstat(p)
    return f"{stat.filemode(st.st_mode)} {NAMES.get(st.st_uid, st.st_uid)}:{st.st_gid}"


RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def renameat2(a, b, flags):
    def f():
        if libc.renameat2(-100, a.encode(), -100, b.encode(), flags) != 0:
            raise OSError(ctypes.get_errno(), "renameat2")
    return f


# --- main -----------------------------------------------------------------

def sticky(d):
    out("== sticky bit")
    st = os.path.join(d, "st")
    os.mkdir(st)
    os.chmod(st, 0o1777)
    out(f"st: {lsmode(st)}")
    j = lambda n: os.path.join(st, n)  # noqa: E731
    check(A, "create a_file", lambda: write_file(j("a_file"), "A's\n", 0o644))
    check(A, "create a_file2 0666", lambda: write_file(j("a_file2"), "A's\n", 0o666), umask=0)
    check(A, "symlink a_link -> a_file", lambda: os.symlink("a_file", j("a_link")))
    check(A, "mkdir a_dir", lambda: os.mkdir(j("a_dir")))
    check(A, "mkfifo a_fifo", lambda: os.mkfifo(j("a_fifo"), 0o666))
    check(B, "create b_file", lambda: write_file(j("b_file"), "B's\n", 0o644))
    check(B, "symlink b_link -> a_file", lambda: os.symlink("a_file", j("b_link")))
    # A's symlink to B's own file: the entry is A's, the target does not count
    check(A, "symlink a_to_b -> b_file", lambda: os.symlink("b_file", j("a_to_b")))
    for n in ("a_file", "a_link", "b_link", "a_to_b", "a_dir", "a_fifo"):
        out(f"  {n}: {lsmode(j(n))}")
    for n in ("a_file", "a_link", "a_to_b", "a_fifo"):
        check(B, f"unlink {n}", lambda n=n: os.unlink(j(n)))
        check(B, f"rename {n} -> b_new", lambda n=n: os.rename(j(n), j("b_new")))
    check(B, "rmdir a_dir", lambda: os.rmdir(j("a_dir")))
    check(B, "rename a_dir -> b_new", lambda: os.rename(j("a_dir"), j("b_new")))
    check(B, "rename b_file over a_file", lambda: os.rename(j("b_file"), j("a_file")))
    check(B, "rename b_file over a_link", lambda: os.rename(j("b_file"), j("a_link")))
    check(B, "RENAME_EXCHANGE b_file a_file", renameat2(j("b_file"), j("a_file"), RENAME_EXCHANGE))
    check(B, "RENAME_NOREPLACE b_file a_file", renameat2(j("b_file"), j("a_file"), RENAME_NOREPLACE))
    check(B, "write into a_file2 (0666)", lambda: write_file(j("a_file2"), "B was here\n", 0, os.O_WRONLY | os.O_APPEND))
    check(B, "touch a_file2 (now)", lambda: os.utime(j("a_file2")))
    check(B, "touch a_file2 (a given time)", lambda: os.utime(j("a_file2"), (1, 1)))
    check(B, "chmod a_file2", lambda: os.chmod(j("a_file2"), 0o600))
    # fs.protected_hardlinks: not B's, and B cannot write it
    check(B, "link a_file b_hard", lambda: os.link(j("a_file"), j("b_hard")))
    check(B, "link a_file2 b_hard2 (B may write it)", lambda: os.link(j("a_file2"), j("b_hard2")))
    check(A, "unlink b_link", lambda: os.unlink(j("b_link")))
    check(A, "rename b_link -> a_new", lambda: os.rename(j("b_link"), j("a_new")))
    check(A, "unlink a_to_b (own link to B's file)", lambda: os.unlink(j("a_to_b")))
    check(A, "unlink a_link", lambda: os.unlink(j("a_link")))
    check(A, "rename a_file -> a_moved", lambda: os.rename(j("a_file"), j("a_moved")))
    check(0, "unlink b_link", lambda: os.unlink(j("b_link")))
    check(0, "rename a_moved -> root_moved", lambda: os.rename(j("a_moved"), j("root_moved")))
    check(0, "rmdir a_dir", lambda: os.rmdir(j("a_dir")))
    check(B, "read b_file", lambda: read_file(j("b_file")))
    out(f"  st holds: {sorted(os.listdir(st))}")

    out("-- a sticky directory owned by C")
    cs = os.path.join(d, "cs")
    os.mkdir(cs)
    os.chown(cs, C, C)
    os.chmod(cs, 0o1777)
    k = lambda n: os.path.join(cs, n)  # noqa: E731
    check(A, "create a_file", lambda: write_file(k("a_file")))
    check(A, "create a_file2", lambda: write_file(k("a_file2")))
    check(A, "symlink a_link -> /", lambda: os.symlink("/", k("a_link")))
    check(A, "mkdir a_dir", lambda: os.mkdir(k("a_dir")))
    check(B, "unlink a_file", lambda: os.unlink(k("a_file")))
    check(B, "unlink a_link", lambda: os.unlink(k("a_link")))
    check(C, "unlink a_file", lambda: os.unlink(k("a_file")))
    check(C, "rename a_file2 -> c_file", lambda: os.rename(k("a_file2"), k("c_file")))
    check(C, "unlink a_link", lambda: os.unlink(k("a_link")))
    check(C, "rmdir a_dir", lambda: os.rmdir(k("a_dir")))
    out(f"  cs holds: {sorted(os.listdir(cs))} {lsmode(k('c_file'))}")


def mktemps(d):
    out("== mkstemp, mkdtemp, mktemp")
    t = os.path.join(d, "st")

    def mk():
        import tempfile
        fd, p = tempfile.mkstemp(dir=t, prefix="tmp.")
        os.write(fd, b"data")
        os.close(fd)
        dp = tempfile.mkdtemp(dir=t, prefix="dtmp.")
        open(os.path.join(dp, "inner"), "w").close()
        r = subprocess.run(["mktemp", "-p", t], capture_output=True, text=True, check=True,
                           env={"PATH": "/usr/bin:/bin"})
        p2 = r.stdout.strip()
        r = subprocess.run(["mktemp", "-d", "-p", t], capture_output=True, text=True, check=True,
                           env={"PATH": "/usr/bin:/bin"})
        d2 = r.stdout.strip()
        return " ".join(lsmode(x) for x in (p, dp, p2, d2))
    check(A, "mkstemp mkdtemp mktemp mktemp -d", mk)
    check(B, "mkstemp mkdtemp mktemp mktemp -d", mk, umask=0o077)

    def glob_read():
        res = []
        for n in sorted(os.listdir(t)):
            if n.startswith(("tmp.", "dtmp.")):
                st = os.lstat(os.path.join(t, n))
                if NAMES.get(st.st_uid) == "A":
                    res.append(tryop(lambda n=n: read_file(os.path.join(t, n))
                                     if stat.S_ISREG(st.st_mode) else os.listdir(os.path.join(t, n))))
        return " ".join(res)
    check(B, "read A's temporary files and directories", glob_read)

    out("-- O_CREAT|O_EXCL: two users race for the same 300 names")
    race = os.path.join(d, "race")
    os.mkdir(race)
    os.chmod(race, 0o1777)
    n = 300

    def racer(ch):
        ch.recv()
        won = []
        for i in range(n):
            try:
                fd = os.open(os.path.join(race, f"n{i}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                os.write(fd, str(os.getuid()).encode())
                os.close(fd)
                won.append(str(i))
            except FileExistsError:
                pass
        ch.send(" ".join(won))
    r1, r2 = Child(A, racer), Child(B, racer)
    r1.send("go")
    r2.send("go")
    w1 = set(r1.recv().split())
    w2 = set(r2.recv().split())
    r1.wait()
    r2.wait()
    bad = 0
    for i in range(n):
        p = os.path.join(race, f"n{i}")
        owner = os.stat(p).st_uid
        content = read_file(p)
        winner = A if str(i) in w1 else B
        if (str(i) in w1) == (str(i) in w2) or owner != winner or content != str(winner):
            bad += 1
    out(f"  names won by both or neither, or owned by the loser: {bad}; all {n} made: "
        f"{len(w1) + len(w2) == n and len(os.listdir(race)) == n}")

    out("-- O_TMPFILE")

    def tmpf():
        fd = os.open(t, os.O_TMPFILE | os.O_RDWR, 0o640)
        os.write(fd, b"tmpfile data")
        st = os.fstat(fd)
        r = f"nlink {st.st_nlink} {stat.filemode(st.st_mode)} {NAMES.get(st.st_uid)}"
        if libc.linkat(-100, f"/proc/self/fd/{fd}".encode(), -100,
                       os.path.join(t, "a_tmpfile").encode(), 0x400) != 0:
            r += " link " + ename(ctypes.get_errno())
        os.close(fd)
        return r + " " + lsmode(os.path.join(t, "a_tmpfile")) + " " + read_file(os.path.join(t, "a_tmpfile"))
    check(A, "O_TMPFILE, linkat", tmpf, umask=0o027)
    check(B, "read a_tmpfile", lambda: read_file(os.path.join(t, "a_tmpfile")))
    check(B, "unlink a_tmpfile", lambda: os.unlink(os.path.join(t, "a_tmpfile")))


def sockets_fifos(d):
    out("== AF_UNIX sockets")
    t = os.path.join(d, "st")
    sp = os.path.join(t, "a.sock")

    def server(ch):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(sp)
        s.listen(4)
        ch.send("bound")
        while True:
            cmd = ch.recv()
            if cmd == "accept":
                c, _ = s.accept()
                ch.send("got " + c.recv(100).decode())
                c.sendall(b"pong")
                c.close()
            elif cmd == "quit":
                s.close()
                os.unlink(sp)
                ch.send("unlinked")
                return

    srv = Child(A, server)
    out(f"  server: {srv.recv()}")
    out(f"  a.sock: {lsmode(sp)} (S_ISSOCK {stat.S_ISSOCK(os.lstat(sp).st_mode)})")
    ls = subprocess.run(["ls", "-l", sp], capture_output=True, text=True).stdout
    out(f"  ls -l shows type {ls[:1]!r}")

    def client():
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(sp)
        c.sendall(b"ping")
        r = c.recv(100).decode()
        c.close()
        return r

    def connect_only():
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(sp)
        c.close()
    # srwxr-xr-x: B may not write it, so may not connect
    check(B, "connect to A's 0755 socket", connect_only)
    os.chmod(sp, 0o777)
    srv.send("accept")
    out(f"  B: connect, send, receive: {run_as(B, client)}")
    out(f"  server: {srv.recv()}")
    srv.send("accept")
    out(f"  root: connect, send, receive: {run_as(0, client)}")
    out(f"  server: {srv.recv()}")
    check(B, "unlink A's socket", lambda: os.unlink(sp))
    srv.send("quit")
    out(f"  server: {srv.recv()} exists {os.path.lexists(sp)}")
    srv.wait()
    check(B, "connect to the removed socket", connect_only)

    out("-- a socket whose server is gone, its name left")
    stp = os.path.join(t, "stale.sock")

    def stale():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(stp)
        s.close()
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        r = [tryop(lambda: c.connect(stp))]
        c.close()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        r.append("bind again " + tryop(lambda: s.bind(stp)))
        os.unlink(stp)
        r.append("after unlink " + tryop(lambda: s.bind(stp)))
        s.close()
        os.unlink(stp)
        return ", ".join(r)
    check(A, "connect to a closed server's name", stale)

    out("-- a datagram socket")
    dp = os.path.join(t, "b.dgram")

    def dserver(ch):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(dp)
        os.chmod(dp, 0o666)
        ch.send("bound")
        ch.send("got " + s.recv(100).decode())
        s.close()
        os.unlink(dp)
    ds = Child(B, dserver)
    out(f"  server: {ds.recv()}")

    def dsend():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.sendto(b"hello", dp)
        s.close()
    check(A, "sendto B's datagram socket", dsend)
    out(f"  server: {ds.recv()}")
    ds.wait()

    out("== FIFO between two users")
    fp = os.path.join(t, "a.fifo")
    check(A, "mkfifo 0644", lambda: os.mkfifo(fp, 0o644))
    out(f"  a.fifo: {lsmode(fp)}")

    def writer(ch):
        ch.send("start")
        with open(fp, "w") as f:
            for i in range(1000):
                f.write(f"line {i}\n")
        ch.send("written")
    wr = Child(A, writer)
    wr.recv()

    def reader():
        with open(fp) as f:
            lines = f.read().splitlines()
        return f"{len(lines)} lines, last {lines[-1]!r}"
    check(B, "read the FIFO while A writes", reader)
    out(f"  writer: {wr.recv()}")
    wr.wait()
    check(B, "open the FIFO for writing (0644)", open_close(fp, os.O_WRONLY | os.O_NONBLOCK))
    check(B, "unlink A's FIFO", lambda: os.unlink(fp))
    check(A, "unlink own FIFO", lambda: os.unlink(fp))


def locks(d):
    out("== locks between two processes")
    t = os.path.join(d, "st")
    lp = os.path.join(t, "lockfile")
    write_file(lp, "lock me\n", 0o666)
    os.chmod(lp, 0o666)
    os.link(lp, os.path.join(t, "lockfile.link"))

    kinds = {
        "fcntl F_SETLK": (fcntl.F_SETLK, fcntl.F_GETLK),
        "fcntl F_OFD_SETLK": (getattr(fcntl, "F_OFD_SETLK", 37), getattr(fcntl, "F_OFD_GETLK", 36)),
    }

    def setlk(cmd, fd, typ, start=0, length=0):
        fcntl.fcntl(fd, cmd, struct.pack("hhqqi4x", typ, 0, start, length, 0))

    def getlk(cmd, fd, typ):
        r = fcntl.fcntl(fd, cmd, struct.pack("hhqqi4x", typ, 0, 0, 0, 0))
        ltype, _, start, length, pid = struct.unpack("hhqqi4x", r)
        return ltype, start, length, pid

    for kind, (setc, getc) in kinds.items():
        def holder(ch, setc=setc):
            fd = os.open(lp, os.O_RDWR)
            setlk(setc, fd, fcntl.F_WRLCK, 0, 100)
            ch.send(f"locked {os.getpid()}")
            ch.recv()
            if setc == fcntl.F_SETLK:
                # POSIX: closing any fd of the file drops the process's locks
                os.close(os.open(lp, os.O_RDONLY))
            else:
                os.close(fd)
            ch.send("released")
            ch.recv()
        h = Child(A, holder)
        hpid = int(h.recv().split()[1])

        def contender(setc=setc, getc=getc, name="lockfile"):
            fd = os.open(os.path.join(t, name), os.O_RDWR)
            res = []
            try:
                setlk(setc, fd, fcntl.F_WRLCK, 50, 10)
                res.append("got it")
            except OSError as e:
                res.append(ename(e.errno))
            try:
                setlk(setc, fd, fcntl.F_RDLCK, 100, 10)
                res.append("beyond: got it")
            except OSError as e:
                res.append("beyond: " + ename(e.errno))
            ltype, start, length, pid = getlk(getc, fd, fcntl.F_WRLCK)
            if ltype == fcntl.F_UNLCK:
                res.append("getlk: unlocked")
            else:
                who = "holder" if pid == hpid else ("-1" if pid == -1 else "other pid")
                res.append(f"getlk: {'write' if ltype == fcntl.F_WRLCK else ltype} {start}+{length} pid {who}")
            os.close(fd)
            return ", ".join(res)
        out(f"  B: {kind} while A holds 0+100: {run_as(B, contender)}")
        out(f"  B: {kind} through a hard link: {run_as(B, lambda c=contender: c(name='lockfile.link'))}")
        h.send("release")
        out(f"  A: {h.recv()}")
        out(f"  B: {kind} after: {run_as(B, contender)}")
        h.send("end")
        h.wait()

    def fholder(ch):
        fd = os.open(lp, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        ch.send("locked")
        ch.recv()
        os.close(fd)
        ch.send("closed")
        ch.recv()

    def fcontend(op):
        def f():
            fd = os.open(lp, os.O_RDONLY)
            try:
                fcntl.flock(fd, op | fcntl.LOCK_NB)
            finally:
                os.close(fd)
        return f
    h = Child(A, fholder)
    h.recv()
    check(B, "flock LOCK_EX|LOCK_NB while A holds LOCK_EX", fcontend(fcntl.LOCK_EX))
    check(B, "flock LOCK_SH|LOCK_NB while A holds LOCK_EX", fcontend(fcntl.LOCK_SH))
    h.send("close")
    out(f"  A: {h.recv()}")
    check(B, "flock LOCK_EX|LOCK_NB after A closed", fcontend(fcntl.LOCK_EX))
    h.send("end")
    h.wait()
    r = subprocess.run(["flock", "-n", lp, "-c", "flock -n -E 7 " + lp + " true; echo $?"],
                       capture_output=True, text=True)
    out(f"  flock(1) nested in another process: {r.stdout.strip()} rc {r.returncode}")


def access(d):
    out("== allow_other, modes, umask, setgid directories")
    t = os.path.join(d, "st")
    j = lambda n: os.path.join(t, n)  # noqa: E731
    check(B, "create b_own, read it", lambda: (write_file(j("b_own"), "B reads\n"), read_file(j("b_own")))[1])
    check(A, "create a_secret 0600", lambda: write_file(j("a_secret"), "secret\n", 0o600))
    check(B, "read a_secret", lambda: read_file(j("a_secret")))
    check(B, "write a_secret", open_close(j("a_secret"), os.O_WRONLY))
    check(B, "access(a_secret, R_OK)", lambda: os.access(j("a_secret"), os.R_OK))
    check(A, "read a_secret", lambda: read_file(j("a_secret")))
    for um in (0o022, 0o027, 0o077, 0o002):
        def mk(um=um):
            base = j(f"um{um:03o}")
            write_file(base + ".f", "x", 0o666)
            os.mkdir(base + ".d", 0o777)
            os.mkfifo(base + ".p", 0o666)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(base + ".s")
            s.close()
            return " ".join(lsmode(base + x) for x in (".f", ".d", ".p", ".s"))
        check(A, f"umask {um:03o}: file dir fifo socket", mk, umask=um)
    out("-- setgid directory of group G")
    g = os.path.join(d, "sg")
    os.mkdir(g)
    os.chown(g, 0, G)
    os.chmod(g, 0o2775)
    k = lambda n: os.path.join(g, n)  # noqa: E731
    check(A, "create in sg (A in G)", lambda: (write_file(k("a_in"), "x", 0o664), lsmode(k("a_in")))[1], groups=[G], umask=0o002)
    check(A, "mkdir in sg", lambda: (os.mkdir(k("a_dir")), lsmode(k("a_dir")))[1], groups=[G], umask=0o002)
    check(A, "create 2775 in sg/a_dir", lambda: (write_file(k("a_dir/x"), "x", 0o2775), lsmode(k("a_dir/x")))[1], groups=[G], umask=0o002)
    check(A, "symlink in sg", lambda: (os.symlink("a_in", k("a_sl")), lsmode(k("a_sl")))[1], groups=[G], umask=0o002)
    check(B, "read A's file there (B in G)", lambda: read_file(k("a_in")), groups=[G])
    check(B, "write A's 0664 file there (B in G)", open_close(k("a_in"), os.O_WRONLY), groups=[G])
    check(B, "write A's 0664 file there (B not in G)", open_close(k("a_in"), os.O_WRONLY))
    os.chmod(g, 0o3777)
    check(B, "create 2755 in sg (B not in G): setgid bit dropped",
          lambda: (write_file(k("b_in"), "x", 0o2755), lsmode(k("b_in")))[1])
    check(B, "mkdir in sg (B not in G)", lambda: (os.mkdir(k("b_dir")), lsmode(k("b_dir")))[1])
    check(B, "chmod g+s own file in sg (B not in G)",
          lambda: (os.chmod(k("b_in"), 0o2755), lsmode(k("b_in")))[1])


def inotify(d):
    out("== inotify on a directory of the mount")
    t = os.path.join(d, "watched")
    os.mkdir(t)
    os.chmod(t, 0o1777)
    IN_NONBLOCK = 0o4000
    masks = {0x2: "MODIFY", 0x4: "ATTRIB", 0x8: "CLOSE_WRITE", 0x10: "CLOSE_NOWRITE",
             0x20: "OPEN", 0x40: "MOVED_FROM", 0x80: "MOVED_TO", 0x100: "CREATE",
             0x200: "DELETE", 0x40000000: "ISDIR"}
    fd = libc.inotify_init1(IN_NONBLOCK)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    wd = libc.inotify_add_watch(fd, t.encode(), 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200)
    if wd < 0:
        raise OSError(ctypes.get_errno(), "inotify_add_watch")

    def ops():
        write_file(os.path.join(t, "f"), "hello")
        os.mkdir(os.path.join(t, "sub"))
        os.rename(os.path.join(t, "f"), os.path.join(t, "g"))
        os.chmod(os.path.join(t, "g"), 0o600)
        with open(os.path.join(t, "g"), "a") as f:
            f.write("more")
        os.mkfifo(os.path.join(t, "p"))
        os.symlink("g", os.path.join(t, "l"))
        os.unlink(os.path.join(t, "g"))
        os.unlink(os.path.join(t, "p"))
        os.unlink(os.path.join(t, "l"))
        os.rmdir(os.path.join(t, "sub"))
    check(B, "operations in the watched directory", ops)
    evs = []
    buf = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        buf += chunk
    off = 0
    cookies = {}
    while off < len(buf):
        _, mask, cookie, ln = struct.unpack_from("iIII", buf, off)
        name = buf[off + 16:off + 16 + ln].rstrip(b"\0").decode()
        off += 16 + ln
        words = "|".join(v for k, v in masks.items() if mask & k)
        c = ""
        if cookie:
            c = " cookie#%d" % cookies.setdefault(cookie, len(cookies) + 1)
        evs.append(f"{words} {name}{c}")
    os.close(fd)
    for e in evs:
        out(f"  {e}")


# --- protected_* ------------------------------------------------------------

def protected(d, plant_in=None):
    """The other users' files are made by A through DIR, or, with
    plant_in, in plant_in (the backing directory) after the victims
    looked their names up through DIR and found nothing. Each victim
    has its own names, so that its O_CREAT opens are the first the
    kernel sees of them; with plant_in, only those are made."""
    sysctls = {n: read_file(f"/proc/sys/fs/{n}")
               for n in ("protected_regular", "protected_fifos", "protected_symlinks")}
    out("== fs.protected_*: " + " ".join(f"{k}={v}" for k, v in sysctls.items()))
    pr = os.path.join(d, "pr")      # 1777 root
    gw = os.path.join(d, "gw")      # 1770 root:G, group-writable
    ad = os.path.join(d, "ad")      # 1777 A: the file's owner owns the directory
    cd = os.path.join(d, "cd")      # 1777 C, holding root's files
    for p, uid, gid, mode in ((pr, 0, 0, 0o1777), (gw, 0, G, 0o1770), (ad, A, A, 0o1777),
                              (cd, C, C, 0o1777)):
        os.mkdir(p)
        os.chown(p, uid, gid)
        os.chmod(p, mode)
    target = os.path.join(d, "target")
    write_file(target, "target\n", 0o644)
    victims = ((B, [G]), (0, []), (A, [G]))
    base = plant_in or d
    # (dir, name, what): f a 0666 file, p a 0666 FIFO, l a symlink to
    # target, l2 a symlink to f
    names = (("pr", "f"), ("pr", "p"), ("pr", "l"), ("pr", "l2"), ("pr", "d"),
             ("gw", "f"), ("gw", "p"), ("ad", "f"), ("ad", "l"), ("cd", "r"), ("cd", "rp"))
    if plant_in:
        # the victims look first: the kernel caches that the names are absent
        for who, grp in victims:
            for dd, n in names:
                p = os.path.join(d, dd, f"{n}_{NAMES[who]}")
                r = run_as(who, lambda p=p: os.lstat(p), groups=grp)
                if r != "ENOENT":
                    out(f"{NAMES[who]}: lstat {p}: {r}")

    def make():
        for who, _ in victims:
            v = NAMES[who]
            for dd, n in names:
                p = os.path.join(base, dd, f"{n}_{v}")
                if n == "f":
                    write_file(p, "A's\n", 0o666)
                elif n == "p":
                    os.mkfifo(p, 0o666)
                elif n == "l":
                    os.symlink(target, p)
                elif n == "l2":
                    os.symlink(f"f_{v}", p)
                elif n == "d":
                    os.mkdir(p)
    out(f"A makes the files: {run_as(A, make, groups=[G], umask=0)}")

    def make_root():
        for who, _ in victims:
            write_file(os.path.join(base, "cd", f"r_{NAMES[who]}"), "root's\n", 0o666)
            os.mkfifo(os.path.join(base, "cd", f"rp_{NAMES[who]}"), 0o666)
    out(f"root makes its files in cd: {run_as(0, make_root, umask=0)}")
    RW, WR, RD = os.O_RDWR, os.O_WRONLY, os.O_RDONLY
    CR, NB = os.O_CREAT, os.O_NONBLOCK
    for who, grp in victims:
        v = NAMES[who]
        j = lambda n: os.path.join(d, n + "_" + v)  # noqa: E731
        out(f"-- {v}, O_CREAT")
        check(who, "open pr/f O_WRONLY|O_CREAT", open_close(j("pr/f"), WR | CR), groups=grp)
        check(who, "open pr/p O_RDONLY|O_NONBLOCK|O_CREAT", open_close(j("pr/p"), RD | NB | CR), groups=grp)
        check(who, "open pr/l O_RDONLY|O_CREAT (A's symlink to root's file)", open_close(j("pr/l"), RD | CR), groups=grp)
        check(who, "open pr/l2 O_WRONLY|O_CREAT (A's symlink to A's file)", open_close(j("pr/l2"), WR | CR), groups=grp)
        check(who, "open pr/d O_RDONLY|O_CREAT (a directory)", open_close(j("pr/d"), RD | CR), groups=grp)
        check(who, "open gw/f O_WRONLY|O_CREAT", open_close(j("gw/f"), WR | CR), groups=grp)
        check(who, "open gw/p O_RDONLY|O_NONBLOCK|O_CREAT", open_close(j("gw/p"), RD | NB | CR), groups=grp)
        check(who, "open ad/f O_WRONLY|O_CREAT", open_close(j("ad/f"), WR | CR), groups=grp)
        check(who, "open ad/l O_RDONLY|O_CREAT", open_close(j("ad/l"), RD | CR), groups=grp)
        check(who, "read ad/f", lambda: read_file(j("ad/f")), groups=grp)
        check(who, "open cd/r O_WRONLY|O_CREAT (root's file, C's directory)", open_close(j("cd/r"), WR | CR), groups=grp)
        check(who, "open cd/rp O_RDONLY|O_NONBLOCK|O_CREAT (root's FIFO)", open_close(j("cd/rp"), RD | NB | CR), groups=grp)
        if plant_in:
            continue
        out(f"-- {v}, without O_CREAT")
        check(who, "open pr/f O_CREAT|O_EXCL", open_close(j("pr/f"), WR | CR | os.O_EXCL), groups=grp)
        check(who, "open pr/f O_RDWR", open_close(j("pr/f"), RW), groups=grp)
        check(who, "open pr/p O_RDONLY|O_NONBLOCK", open_close(j("pr/p"), RD | NB), groups=grp)
        check(who, "read pr/l (A's symlink)", lambda: read_file(j("pr/l")), groups=grp)
        check(who, "readlink pr/l", lambda: os.readlink(j("pr/l")) == target, groups=grp)
        check(who, "open pr/l O_RDONLY|O_NOFOLLOW", open_close(j("pr/l"), RD | os.O_NOFOLLOW), groups=grp)
        check(who, "read ad/l", lambda: read_file(j("ad/l")), groups=grp)
    check(A, "open pr/new O_WRONLY|O_CREAT (a new file)", open_close(os.path.join(d, "pr/new"), WR | CR))


def main():
    part, d = sys.argv[1], sys.argv[2]
    os.umask(0o022)
    if part == "main":
        sticky(d)
        mktemps(d)
        sockets_fifos(d)
        locks(d)
        access(d)
        inotify(d)
    elif part == "protected":
        protected(d)
    elif part == "plant":
        protected(d, sys.argv[3])
    else:
        sys.exit(f"unknown part {part}")


main()
