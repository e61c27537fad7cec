# SPDX-License-Identifier: GPL-2.0-or-later
"""tmpfs_parity.py: the calls tools make about space and layout, on zramfs
and on tmpfs (and ext4 where tmpfs has not the call), compared.

Usage: tmpfs_parity.py ZRAMFS_DIR TMPFS_DIR EXT4_DIR BACKING_DIR BLOCK_SIZE

ZRAMFS_DIR is a directory of a zramfs mount (dirty_expire long, so data
stays in RAM until something writes it back) whose backing directory is
BACKING_DIR on the ext4 filesystem of EXT4_DIR (small: it fills);
TMPFS_DIR a tmpfs of about the same size.  Each check runs the same calls on both and compares what
they answer; where zramfs legitimately answers otherwise (the man page,
zramfs(8), says so), the check asserts what zramfs promises and says why.
Every difference found is printed ("DIFF: ..."); the exit status is 1 when
there was one, else 0.  Run as root (a check runs as uid 65534).
"""
import ctypes
import errno
import fcntl
import os
import struct
import subprocess
import sys
import time

ZR, TM, E4, BACK = sys.argv[1:5]
BS = int(sys.argv[5])
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
libc.copy_file_range.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                 ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
libc.copy_file_range.restype = ctypes.c_ssize_t
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]

KEEP, PUNCH, COLLAPSE, ZERO, INSERT, UNSHARE = 0x01, 0x02, 0x08, 0x10, 0x20, 0x40
KiB, MiB = 1 << 10, 1 << 20
diffs = []


def say(msg):
    print("  -- " + msg, flush=True)


def diff(msg):
    print("DIFF: " + msg, flush=True)
    diffs.append(msg)


def expect(cond, msg):
    if not cond:
        diff(msg)


def en(e):
    return errno.errorcode.get(e, str(e))


def falloc(fd, mode, off, length):
    """fallocate(2): "ok" or the errno's name (EOPNOTSUPP, not ENOTSUP)."""
    if libc.fallocate(fd, mode, off, length) == 0:
        return "ok"
    e = ctypes.get_errno()
    return "EOPNOTSUPP" if e == errno.EOPNOTSUPP else en(e)


def call(f, *a):
    try:
        r = f(*a)
        return "ok" if r is None else r
    except OSError as e:
        return en(e.errno)


def new(d, name, data=b"", mode=0o644):
    p = os.path.join(d, name)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)
    if data:
        os.pwrite(fd, data, 0)
    return p, fd


def segments(fd):
    """The data segments SEEK_DATA/SEEK_HOLE report, as (start, end)."""
    out, pos, size = [], 0, os.fstat(fd).st_size
    while pos < size:
        try:
            d = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            break
        h = os.lseek(fd, d, os.SEEK_HOLE)
        out.append((d, h))
        pos = h
    return out


def covers(coarse, fine, gran):
    """Whether @coarse holds every segment of @fine, each widened to
    whole @gran-sized blocks at most (data reported at block granularity)."""
    def blocks(segs):
        s = set()
        for a, b in segs:
            s.update(range(a // gran, (b + gran - 1) // gran))
        return s
    return blocks(fine) <= blocks(coarse) and blocks(coarse) <= blocks(fine)


RAND = os.urandom(4 * MiB)


def rnd(n, at=0):
    return RAND[at:at + n]


# --- fallocate modes and their errors --------------------------------------

def check_fallocate_modes():
    say("fallocate: every mode and bad arguments, errno and size as on tmpfs")
    cases = [
        ("allocate", 0, 0, 64 * KiB), ("allocate past the end", 0, MiB, 256 * KiB),
        ("allocate KEEP_SIZE past the end", KEEP, MiB, 256 * KiB),
        ("PUNCH_HOLE without KEEP_SIZE", PUNCH, 0, 4096),
        ("PUNCH_HOLE|KEEP_SIZE", PUNCH | KEEP, 4096, 8192),
        ("ZERO_RANGE", ZERO, 0, 8192), ("ZERO_RANGE|KEEP_SIZE", ZERO | KEEP, 0, 8192),
        ("COLLAPSE_RANGE", COLLAPSE, 0, 64 * KiB),
        ("COLLAPSE_RANGE unaligned", COLLAPSE, 100, 64 * KiB),
        ("COLLAPSE_RANGE|KEEP_SIZE", COLLAPSE | KEEP, 0, 64 * KiB),
        ("INSERT_RANGE", INSERT, 0, 64 * KiB),
        ("UNSHARE_RANGE", UNSHARE, 0, 64 * KiB), ("UNSHARE_RANGE|KEEP_SIZE", UNSHARE | KEEP, 0, 64 * KiB),
        ("PUNCH_HOLE|ZERO_RANGE", PUNCH | ZERO | KEEP, 0, 4096),
        ("an unknown mode bit", 0x100, 0, 4096),
        ("length 0", 0, 0, 0), ("length -1", 0, 0, -1), ("offset -1", 0, -1, 10),
        ("punch of length 0", PUNCH | KEEP, 0, 0),
        ("offset + length past 2^63", 0, (1 << 63) - 10, 100),
    ]
    for what, mode, off, length in cases:
        res = {}
        for d in (ZR, TM):
            p, fd = new(d, "fa", rnd(MiB))
            r = falloc(fd, mode, off, length)
            res[d] = (r, os.fstat(fd).st_size, os.pread(fd, 2 * MiB, 0))
            os.close(fd)
            os.unlink(p)
        z, t = res[ZR], res[TM]
        expect(z[0] == t[0], "fallocate %s: zramfs %s, tmpfs %s" % (what, z[0], t[0]))
        expect(z[1] == t[1], "fallocate %s: size %d on zramfs, %d on tmpfs" % (what, z[1], t[1]))
        expect(z[2] == t[2], "fallocate %s: the data differ from tmpfs's" % what)
    # the modes tmpfs lacks: ext4 has them; zramfs must refuse them the
    # way a filesystem without them does (EOPNOTSUPP, which makes
    # fallocate(1) and glibc fall back), never EINVAL or ENOSYS
    for what, mode in (("ZERO_RANGE", ZERO), ("COLLAPSE_RANGE", COLLAPSE), ("INSERT_RANGE", INSERT)):
        p, fd = new(E4, "fa", rnd(MiB))
        r = falloc(fd, mode, 0, 64 * KiB)
        os.close(fd)
        os.unlink(p)
        expect(r == "ok", "ext4 does not take %s (%s): the reference is wrong" % (what, r))
    # errors of the descriptor and of the file kind
    for d in (ZR, TM):
        os.close(new(d, "ro")[1])
    res = {}
    for d in (ZR, TM):
        fd = os.open(os.path.join(d, "ro"), os.O_RDONLY)
        res[d] = [falloc(fd, m, 0, 4096) for m in (0, PUNCH | KEEP, ZERO)]
        os.close(fd)
        fd = os.open(os.path.join(d, "ro"), os.O_WRONLY | os.O_APPEND)
        res[d] += [falloc(fd, m, 0, 4096) for m in (0, KEEP, PUNCH | KEEP)]
        os.close(fd)
        os.unlink(os.path.join(d, "ro"))
    expect(res[ZR] == res[TM], "fallocate on read-only and O_APPEND descriptors: zramfs %s, tmpfs %s"
           % (res[ZR], res[TM]))
    # Past the largest file the backing filesystem takes: zramfs answers
    # as that filesystem (EFBIG, zramfs(8)), tmpfs takes it (no limit)
    for what, mode in (("allocate", 0), ("allocate KEEP_SIZE", KEEP), ("punch", PUNCH | KEEP)):
        got = {}
        for d in (ZR, E4):
            p, fd = new(d, "big", rnd(4096))
            got[d] = falloc(fd, mode, 1 << 50, 4096)
            os.close(fd)
            os.unlink(p)
        expect(got[ZR] == got[E4], "fallocate %s at 1 PiB: zramfs %s, its backing ext4 %s"
               % (what, got[ZR], got[E4]))


# --- SEEK_DATA / SEEK_HOLE -------------------------------------------------

def layout(d, name):
    """A sparse file: data [0, 2B), [8B, 9B), hole to 3 MiB (B = block)."""
    p, fd = new(d, name)
    os.pwrite(fd, rnd(2 * BS), 0)
    os.pwrite(fd, rnd(BS, 100), 8 * BS)
    os.ftruncate(fd, 3 * MiB)
    return p, fd


def seek_at(fd, off, whence):
    return call(os.lseek, fd, off, whence)


def check_seek():
    say("SEEK_DATA/SEEK_HOLE: sparse files, data in RAM and written back, punched holes, EOF")
    fds = {d: layout(d, "sp")[1] for d in (ZR, TM)}
    z, t = segments(fds[ZR]), segments(fds[TM])
    expect(z == t, "SEEK_DATA/SEEK_HOLE, data only in RAM: zramfs %s, tmpfs %s" % (z, t))
    size = 3 * MiB
    for off in (size, size + 1, size + MiB, -1, 2 * MiB):
        for wh, wn in ((os.SEEK_DATA, "SEEK_DATA"), (os.SEEK_HOLE, "SEEK_HOLE")):
            a, b = seek_at(fds[ZR], off, wh), seek_at(fds[TM], off, wh)
            expect(a == b, "%s at %d (size %d): zramfs %s, tmpfs %s" % (wn, off, size, a, b))
    # a whole-block hole punched in data that is only in RAM
    for d in (ZR, TM):
        expect(falloc(fds[d], PUNCH | KEEP, BS, BS) == "ok", "punch failed on " + d)
    z, t = segments(fds[ZR]), segments(fds[TM])
    expect(z == t, "SEEK_DATA/SEEK_HOLE after a punch in RAM: zramfs %s, tmpfs %s" % (z, t))
    # written back (fsync), then rewritten in part in RAM
    for d in (ZR, TM):
        os.fsync(fds[d])
        os.pwrite(fds[d], rnd(4096, 7), 12 * BS)
    z, t = segments(fds[ZR]), segments(fds[TM])
    expect(covers(z, t, BS), "SEEK_DATA/SEEK_HOLE after writeback and a rewrite: zramfs %s, tmpfs %s"
           % (z, t))
    # A hole punched inside a block: zramfs keeps and writes back whole
    # blocks, so it reports data at block_size granularity (zramfs(8));
    # tmpfs at 4 KiB
    for d in (ZR, TM):
        falloc(fds[d], PUNCH | KEEP, 4096, 8192)
    z, t = segments(fds[ZR]), segments(fds[TM])
    expect(covers(z, t, BS), "SEEK_DATA/SEEK_HOLE after a punch inside a block: zramfs %s, "
           "tmpfs %s (block granularity expected)" % (z, t))
    for d in (ZR, TM):
        os.close(fds[d])
    # empty, and fallocated (reserved, never written: a hole on both)
    res = {}
    for d in (ZR, TM):
        p, fd = new(d, "e")
        res[d] = [seek_at(fd, 0, os.SEEK_DATA), seek_at(fd, 0, os.SEEK_HOLE)]
        falloc(fd, 0, 0, MiB)
        res[d] += [segments(fd), seek_at(fd, 0, os.SEEK_HOLE)]
        os.close(fd)
    expect(res[ZR] == res[TM], "SEEK_DATA/SEEK_HOLE of an empty, then fallocated file: zramfs %s, tmpfs %s"
           % (res[ZR], res[TM]))
    # Blocks of zeros cost zramfs nothing: past the end of the backing
    # file they are written back as a hole (zramfs(8)); tmpfs keeps the
    # pages written. Both read zeros.
    p, fd = new(ZR, "z", bytes(2 * BS))
    expect(segments(fd) == [], "zeros written to a new file: zramfs reports data %s, "
           "the man page says a hole" % segments(fd))
    expect(os.pread(fd, 2 * BS, 0) == bytes(2 * BS), "zeros written do not read as zeros")
    os.close(fd)
    p, fd = new(TM, "z", bytes(2 * BS))
    expect(segments(fd) == [(0, 2 * BS)], "tmpfs: zeros written are not data: %s" % segments(fd))
    os.close(fd)


# --- st_blocks, du ---------------------------------------------------------

def du(p, *opts):
    out = subprocess.run(["du", "-B1"] + list(opts) + [p], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def near(z, t, extra):
    """zramfs's st_blocks may count whole blocks: at least tmpfs's, at
    most @extra 512-byte units more (a block per data segment)."""
    return t <= z <= t + extra


def check_blocks():
    say("st_blocks and du: written, fsynced, reopened; punched; truncated; sparse")
    per = BS // 512
    fds = {d: new(d, "b", rnd(MiB))[1] for d in (ZR, TM)}
    # written and still open: the data may still be in the kernel's
    # cache, which zramfs learns of only at its flush. With the writeback
    # cache the kernel keeps the st_blocks it was given until the file's
    # next close (it cannot be told to ask for st_blocks alone, and making
    # it ask for every attribute cost two more round trips per fsync: a
    # GETATTR and a GETXATTR at the next write; zramfs(8)). So after an
    # fsync or sync_file_range zramfs may show fewer blocks, never more;
    # after a close and an open, as many as tmpfs
    def open_then_reopened(what):
        z, t = os.fstat(fds[ZR]).st_blocks, os.fstat(fds[TM]).st_blocks
        expect(z <= t + per, "st_blocks of %s, still open: zramfs %d, tmpfs %d" % (what, z, t))
        for d in (ZR, TM):
            os.close(fds[d])
            fds[d] = os.open(os.path.join(d, "b"), os.O_RDWR)
        z, t = os.fstat(fds[ZR]).st_blocks, os.fstat(fds[TM]).st_blocks
        expect(near(z, t, per), "st_blocks of %s, closed and opened: zramfs %d, tmpfs %d"
               % (what, z, t))
    for d in (ZR, TM):
        os.fsync(fds[d])
    open_then_reopened("1 MiB written and fsynced")
    for d in (ZR, TM):
        os.pwrite(fds[d], rnd(MiB, 5), MiB)
        libc.sync_file_range(fds[d], 0, 0, 7)  # (wait before, write, wait after)
    open_then_reopened("2 MiB after sync_file_range")
    for d in (ZR, TM):
        falloc(fds[d], PUNCH | KEEP, 4 * BS, 4 * BS)
    z, t = os.fstat(fds[ZR]).st_blocks, os.fstat(fds[TM]).st_blocks
    expect(near(z, t, per), "st_blocks after a punch of 4 blocks: zramfs %d, tmpfs %d" % (z, t))
    for d in (ZR, TM):
        os.ftruncate(fds[d], 6 * BS + 100)
    z, t = os.fstat(fds[ZR]).st_blocks, os.fstat(fds[TM]).st_blocks
    expect(near(z, t, per), "st_blocks after a truncate: zramfs %d, tmpfs %d" % (z, t))
    for d in (ZR, TM):
        os.close(fds[d])
    # sparse: 4 KiB at 1 GiB (closed: the kernel has flushed it)
    for d in (ZR, TM):
        p, fd = new(d, "s")
        os.pwrite(fd, rnd(4096), 1 << 30)
        os.close(fd)
    z, t = du(os.path.join(ZR, "s")), du(os.path.join(TM, "s"))
    expect(near(z, t, BS), "du of 4 KiB at 1 GiB: zramfs %d, tmpfs %d" % (z, t))
    z, t = du(os.path.join(ZR, "s"), "--apparent-size"), du(os.path.join(TM, "s"), "--apparent-size")
    expect(z == t, "du --apparent-size: zramfs %d, tmpfs %d" % (z, t))
    # reserved with KEEP_SIZE: counted, size 0
    res = {}
    for d in (ZR, TM):
        p, fd = new(d, "k")
        falloc(fd, KEEP, 0, MiB)
        st = os.fstat(fd)
        res[d] = (st.st_blocks, st.st_size)
        os.close(fd)
    expect(res[ZR] == res[TM], "st_blocks, size after fallocate KEEP_SIZE of 1 MiB: zramfs %s, tmpfs %s"
           % (res[ZR], res[TM]))


# --- statfs ----------------------------------------------------------------

def check_statfs():
    say("statfs: the backing filesystem's (zramfs(8)), moving with the data as tmpfs's")
    z, b, t = os.statvfs(ZR), os.statvfs(BACK), os.statvfs(TM)
    for f in ("f_bsize", "f_frsize", "f_blocks", "f_files", "f_namemax"):
        expect(getattr(z, f) == getattr(b, f), "statfs %s: zramfs %d, its backing filesystem %d"
               % (f, getattr(z, f), getattr(b, f)))
    expect(z.f_namemax == t.f_namemax, "f_namemax: zramfs %d, tmpfs %d" % (z.f_namemax, t.f_namemax))

    def free(d):
        s = os.statvfs(d)
        return s.f_bfree * s.f_frsize, s.f_bavail * s.f_frsize, s.f_ffree

    # FUSE sends the release of a closed file and the forget of a removed
    # one in the background: the daemon holds the backing file open until
    # they come (a file removed right after its close may even be removed
    # while the daemon has it open, and is kept in .zramfs/unlinked of
    # the backing directory until its release, zramfs(8)), and the
    # backing filesystem frees its inode and blocks only then. So the
    # counts are waited for (10 s at most), where tmpfs frees at once.
    def released(d, f0):
        for _ in range(100):
            f = free(d)
            if f[2] == f0[2]:
                break
            time.sleep(0.1)
        return f
    # (The orphan directory, .zramfs/unlinked, two inodes, is made at
    # the first file removed while open; the shell made it before the
    # mount, so that it is not made in the middle of the counts.)
    expect(os.path.isdir(os.path.join(BACK, ".zramfs", "unlinked")), "no orphan directory")
    n = 2 * MiB
    for d in (ZR, TM):
        f0 = free(d)
        with open(os.path.join(d, "df"), "wb") as f:
            f.write(rnd(n))
        f1 = free(d)
        os.unlink(os.path.join(d, "df"))
        f2 = released(d, f0)
        name = "zramfs" if d == ZR else "tmpfs"
        # (2 MiB of data in RAM: dirty blocks count as taken, each a
        # whole block, zramfs(8))
        expect(n <= f0[0] - f1[0] <= n + 2 * BS and n <= f0[1] - f1[1] <= n + 2 * BS,
               "%s: f_bfree/f_bavail went from %s to %s for %d bytes written" % (name, f0[:2], f1[:2], n))
        expect(f1[2] == f0[2] - 1 and f2[2] == f0[2], "%s: f_ffree %d, %d with the file, %d after"
               % (name, f0[2], f1[2], f2[2]))
        expect(abs(f2[0] - f0[0]) <= 64 * KiB, "%s: f_bfree %d, %d after the file was removed"
               % (name, f0[0], f2[0]))


# --- ioctls, clones, copy_file_range ---------------------------------------

FS_IOC_GETFLAGS = 0x80086601
FS_IOC_FIEMAP = 0xc020660b
FICLONE = 0x40049409


def ioctl_errno(p, req, arg):
    fd = os.open(p, os.O_RDWR)
    try:
        fcntl.ioctl(fd, req, arg)
        return "ok"
    except OSError as e:
        return "EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else en(e.errno)
    finally:
        os.close(fd)


def check_ioctls():
    say("FIEMAP, FS_IOC_GETFLAGS, FICLONE, cp --reflink, copy_file_range")
    for d in (ZR, TM, E4):
        with open(os.path.join(d, "io"), "wb") as f:
            f.write(rnd(300 * KiB))
    zp, tp, ep = (os.path.join(d, "io") for d in (ZR, TM, E4))
    fiemap = bytearray(struct.pack("=QQLLLL", 0, 1 << 62, 0, 0, 0, 0))
    z, t = ioctl_errno(zp, FS_IOC_FIEMAP, fiemap), ioctl_errno(tp, FS_IOC_FIEMAP, fiemap)
    expect(z == t, "FIEMAP: zramfs %s, tmpfs %s" % (z, t))
    # FUSE forwards FS_IOC_GETFLAGS to the daemon, which has no flags to
    # give (the backing file's would be enforced at writeback, not at the
    # write): ENOTTY, as a filesystem without them, which lsattr/chattr
    # print as "Operation not supported" (zramfs(8)); tmpfs keeps a, i,
    # d and A.
    flags = bytearray(8)
    z = ioctl_errno(zp, FS_IOC_GETFLAGS, flags)
    expect(z == "ENOTTY", "FS_IOC_GETFLAGS: zramfs %s, documented ENOTTY" % z)
    t = ioctl_errno(tp, FS_IOC_GETFLAGS, flags)
    expect(t == "ok", "FS_IOC_GETFLAGS on tmpfs: %s" % t)
    # clones: none on either; cp --reflink=auto copies
    res = {}
    for d in (ZR, TM):
        src = os.open(os.path.join(d, "io"), os.O_RDONLY)
        dst = os.open(os.path.join(d, "cl"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            fcntl.ioctl(dst, FICLONE, src)
            res[d] = "ok"
        except OSError as e:
            res[d] = "EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else en(e.errno)
        os.close(src)
        os.close(dst)
    expect(res[ZR] == res[TM], "FICLONE: zramfs %s, tmpfs %s" % (res[ZR], res[TM]))
    for s, dd in ((ZR, ZR), (ZR, TM), (TM, ZR)):
        dst = os.path.join(dd, "rl")
        r = subprocess.run(["cp", "--reflink=auto", os.path.join(s, "io"), dst], capture_output=True, text=True)
        expect(r.returncode == 0 and open(dst, "rb").read() == rnd(300 * KiB),
               "cp --reflink=auto %s -> %s: %s" % (s, dd, r.stderr.strip() or "data differ"))
        os.unlink(dst)
    # copy_file_range within zramfs copies; across filesystems it is
    # EXDEV as between tmpfs and ext4
    def cfr(src, dst, n):
        a = os.open(src, os.O_RDONLY)
        b = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        r = libc.copy_file_range(a, None, b, None, n, 0)
        e = ctypes.get_errno()
        os.close(a)
        os.close(b)
        return ("ok", r) if r >= 0 else (en(e), -1)
    r = cfr(zp, os.path.join(ZR, "cfr"), 300 * KiB)
    expect(r[0] == "ok" and r[1] > 0 and open(os.path.join(ZR, "cfr"), "rb").read() == rnd(r[1]),
           "copy_file_range within zramfs: %s" % (r,))
    ref = cfr(tp, os.path.join(E4, "cfr"), 300 * KiB)[0]
    for s, dd in ((zp, os.path.join(E4, "cfr")), (ep, os.path.join(ZR, "cfr2")),
                  (zp, os.path.join(TM, "cfr")), (tp, os.path.join(ZR, "cfr3"))):
        r = cfr(s, dd, 300 * KiB)[0]
        expect(r == ref, "copy_file_range %s -> %s: %s, tmpfs -> ext4: %s" % (s, dd, r, ref))


# --- utimensat, futimens ---------------------------------------------------

UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2


class TS(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


def times(a, m):
    if a is None:
        return None
    arr = (TS * 2)()
    for i, v in enumerate((a, m)):
        arr[i].sec, arr[i].nsec = (0, v) if v in (UTIME_NOW, UTIME_OMIT) else divmod(v, 10**9)
    return arr


def utimensat(p, a, m):
    r = libc.utimensat(-100, p.encode(), times(a, m), 0)
    return "ok" if r == 0 else en(ctypes.get_errno())


def futimens(fd, a, m):
    r = libc.futimens(fd, times(a, m))
    return "ok" if r == 0 else en(ctypes.get_errno())


A, M = 1000000000123456789, 1100000000987654321


def utime_table(d):
    """Each call's answer and what the file's times became (relative:
    'set' for the times asked, 'now' for a time at least @t0)."""
    p = os.path.join(d, "ut")
    with open(p, "wb") as f:
        f.write(rnd(3 * BS))
    os.chmod(p, 0o644)
    out = []

    def rel(v, t0):
        return {A: "A", M: "M"}.get(v, "now" if v >= t0 else "old:%d" % v)

    def step(what, r, t0):
        st = os.stat(p)
        out.append((what, r, rel(st.st_atime_ns, t0), rel(st.st_mtime_ns, t0)))
    for what, a, m in (("explicit", A, M), ("omit both", UTIME_OMIT, UTIME_OMIT),
                       ("atime now, mtime omitted", UTIME_NOW, UTIME_OMIT),
                       ("atime omitted, mtime explicit", UTIME_OMIT, A),
                       ("mtime now", UTIME_OMIT, UTIME_NOW), ("NULL", None, None)):
        if what == "atime now, mtime omitted":
            utimensat(p, A, M)
        t0 = time.time_ns() - 2 * 10**9
        step("utimensat " + what, utimensat(p, a, m), t0)
    # futimens on a read-only descriptor, by the owner
    fd = os.open(p, os.O_RDONLY)
    for what, a, m in (("explicit", A, M), ("now", UTIME_NOW, UTIME_NOW), ("omit, explicit", UTIME_OMIT, M)):
        t0 = time.time_ns() - 2 * 10**9
        step("owner futimens read-only " + what, futimens(fd, a, m), t0)
    os.close(fd)
    # ... and by another user, of a file it may not write, then may
    for mode in (0o644, 0o666):
        os.chmod(p, mode)
        utimensat(p, A, M)
        t0 = time.time_ns() - 2 * 10**9
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            res = []
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                fd = os.open(p, os.O_RDONLY)
                for a, m in ((None, None), (UTIME_NOW, UTIME_NOW), (A, M), (UTIME_OMIT, UTIME_OMIT),
                             (UTIME_NOW, UTIME_OMIT)):
                    res.append(futimens(fd, a, m))
                os.close(fd)
                res.append(utimensat(p, UTIME_NOW, UTIME_NOW))
            except OSError as e:
                res.append("setup " + en(e.errno))
            os.write(wfd, " ".join(res).encode())
            os._exit(0)
        os.close(wfd)
        got = os.read(rfd, 4096).decode()
        os.close(rfd)
        os.waitpid(pid, 0)
        step("other user, mode %o: %s" % (mode, got), "", t0)
    # times set after a write, and the data written back: kept
    fd = os.open(p, os.O_WRONLY)
    os.pwrite(fd, rnd(BS, 9), BS)
    os.close(fd)
    utimensat(p, A, M)
    fd = os.open(p, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    step("explicit after a write, then fsync", "", 0)
    return out


def check_utimes():
    say("utimensat UTIME_NOW/UTIME_OMIT, futimens on read-only descriptors, by owner and by another user")
    z, t = utime_table(ZR), utime_table(TM)
    for a, b in zip(z, t):
        expect(a == b, "times: zramfs %s, tmpfs %s" % (a, b))


# --- fallocate -d, cp --sparse=always ---------------------------------------

def check_dig():
    say("fallocate -d and cp --sparse=always: data, holes at block granularity")
    # data, zeros of whole blocks, data, 4 KiB of zeros inside a block
    buf = rnd(BS) + bytes(2 * BS) + rnd(BS - 4096, 11) + bytes(4096) + rnd(BS, 13) + bytes(4 * BS) + rnd(8192, 17)
    segs = {}
    for d in (ZR, TM):
        p = os.path.join(d, "dig")
        with open(p, "wb") as f:
            f.write(buf)
        r = subprocess.run(["fallocate", "-d", p], capture_output=True, text=True)
        expect(r.returncode == 0, "fallocate -d failed on %s: %s" % (d, r.stderr.strip()))
        src = os.path.join(d, "dig.src")
        with open(src, "wb") as f:
            f.write(buf)
        c = os.path.join(d, "dig.cp")
        r = subprocess.run(["cp", "--sparse=always", src, c], capture_output=True, text=True)
        expect(r.returncode == 0, "cp --sparse=always failed on %s: %s" % (d, r.stderr.strip()))
        for q in (p, c):
            expect(open(q, "rb").read() == buf, "%s: data differ after the holes were made" % q)
            fd = os.open(q, os.O_RDONLY)
            segs[q.replace(d, "")] = segs.get(q.replace(d, ""), []) + [segments(fd)]
            os.close(fd)
    for q, (z, t) in segs.items():
        expect(covers(z, t, BS), "%s: SEEK_DATA/SEEK_HOLE zramfs %s, tmpfs %s" % (q, z, t))


# --- posix_fallocate past the limits ----------------------------------------

def check_limits():
    say("posix_fallocate past the room: ENOSPC, data and size kept, the room given back")
    # size= is the RAM budget, not a limit on the data as tmpfs's
    # (zramfs(8)): 40 MiB through size=32M is taken
    p, fd = new(ZR, "pfsize")
    r = call(os.posix_fallocate, fd, 0, 40 * MiB)
    expect(r == "ok" and os.fstat(fd).st_size == 40 * MiB and os.fstat(fd).st_blocks * 512 >= 40 * MiB,
           "zramfs: posix_fallocate of 40 MiB past size=32M: %s, size %d" % (r, os.fstat(fd).st_size))
    os.close(fd)
    os.unlink(p)
    data = rnd(MiB, 3)
    for d in (ZR, TM):
        name = "zramfs" if d == ZR else "tmpfs"
        p, fd = new(d, "pf", data)
        bp = os.path.join(BACK, "pf")
        before = os.statvfs(BACK if d == ZR else d)
        blocks0 = os.fstat(fd).st_blocks
        r = call(os.posix_fallocate, fd, 0, 1 << 30)
        expect(r == "ENOSPC", "%s: posix_fallocate of 1 GiB: %s, want ENOSPC" % (name, r))
        expect(os.fstat(fd).st_size == MiB and os.pread(fd, 2 * MiB, 0) == data,
               "%s: the file changed after a failed posix_fallocate" % name)
        # the room the failed call took is given back, as tmpfs does
        if d == ZR:
            os.sync()
            after = os.statvfs(BACK)
            bb = os.stat(bp).st_blocks if os.path.exists(bp) else 0
            expect(bb * 512 <= 2 * MiB, "zramfs: the backing file holds %d bytes after a failed "
                   "posix_fallocate of a 1 MiB file" % (bb * 512))
        else:
            after = os.statvfs(d)
        lost = (before.f_bfree - after.f_bfree) * after.f_frsize
        expect(lost <= 2 * MiB, "%s: %d bytes of room lost to a failed posix_fallocate" % (name, lost))
        z = os.fstat(fd).st_blocks
        expect(z <= blocks0 + 2 * MiB // 512, "%s: st_blocks %d after a failed posix_fallocate, %d before"
               % (name, z, blocks0))
        # and the room is there for the next write
        r = call(os.pwrite, fd, rnd(MiB, 7), MiB)
        expect(r == MiB, "%s: a write of 1 MiB after a failed posix_fallocate: %s" % (name, r))
        os.fsync(fd)
        os.close(fd)
        if d == ZR and os.environ.get("PF_EXPECTED"):
            # (the shell checks the file after a remount)
            with open(os.environ["PF_EXPECTED"], "wb") as f:
                f.write(data + rnd(MiB, 7))
    # Past the largest file of the backing filesystem: EFBIG as there
    # (zramfs(8)); tmpfs has no such limit
    res = {}
    for d in (ZR, E4):
        p, fd = new(d, "pfbig", rnd(4096))
        res[d] = call(os.posix_fallocate, fd, 1 << 50, 4096)
        os.close(fd)
        os.unlink(p)
    expect(res[ZR] == res[E4], "posix_fallocate at 1 PiB: zramfs %s, ext4 %s" % (res[ZR], res[E4]))


CHECKS = {"fallocate": check_fallocate_modes, "seek": check_seek, "blocks": check_blocks,
          "statfs": check_statfs, "ioctls": check_ioctls, "utimes": check_utimes,
          "dig": check_dig, "limits": check_limits}
for name in (sys.argv[6:] or CHECKS):
    CHECKS[name]()
if diffs:
    print("%d difference(s) from tmpfs" % len(diffs))
    sys.exit(1)
print("no difference from tmpfs but the documented ones")
