#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# rename_readlink: READLINK, GETXATTR and LISTXATTR during a rename of
# ours must answer for the inode asked about, not for the file that its
# name reaches from the backing call to the daemon's record of the new
# names. They read through the name unchecked: during an exchange of two
# symlinks, the first readlink(2) of one got the other's target, which the
# kernel keeps as the symlink's (FUSE_CAP_CACHE_SYMLINKS): after the
# exchange, readlink of the symlink answered the other's target until the
# inode left the kernel's cache. An fgetxattr(2) of an open file whose fd
# had left the daemon's cache (max_fds=16, 24 other files opened) got the
# other file's value. zr_fault.so holds each exchange 300 ms after its
# backing call; in between, the symlink is read for the first time and the
# open file's xattr is asked for.
ZR_TIMEOUT=${ZR_TIMEOUT:-60}
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the names are the daemon's"
zr_need_tool python3
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_RENAME_NAME='s*b|f2' ZR_FAULT_RENAME_DELAY_MS=300 \
	zr_mount_fault "max_fds=16" "$B" "$M"
mkdir "$ZR_MNT/t"
touch "$ZR_TMP/armed"
python3 - "$ZR_MNT/t" <<'PY' || fail "see above"
import ctypes, errno, os, sys, time
t = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2
def exchange(a, b):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
for i in range(24):
    open("%s/o%d" % (t, i), "w").write("o")
xattrs = True
for n in ("1", "2"):
    open("%s/f%s" % (t, n), "w").write(n)
    try:
        os.setxattr("%s/f%s" % (t, n), "user.tag", n.encode())
    except OSError as e:
        if e.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        xattrs = False
fd1 = os.open(t + "/f1", os.O_RDONLY)
bad = []
for rnd in range(4):
    a, b = "%s/s%da" % (t, rnd), "%s/s%db" % (t, rnd)
    os.symlink("ta%d" % rnd, a)
    os.symlink("tb%d" % rnd, b)
    for i in range(24):         # f1's fd leaves the daemon's cache
        os.close(os.open("%s/o%d" % (t, i), os.O_RDONLY))
    pid = os.fork()
    if pid == 0:
        exchange(t + "/f1", t + "/f2")
        os._exit(0)
    time.sleep(0.1)             # (in the hold, most likely: it is not asserted)
    if xattrs:
        v = os.getxattr(fd1, "user.tag")
        if v != b"1":
            bad.append("round %d: fgetxattr of f1's fd during the exchange: %r" % (rnd, v))
        l = os.listxattr(fd1)
        if "user.tag" not in l:
            bad.append("round %d: flistxattr of f1's fd: %r" % (rnd, l))
    _, st = os.waitpid(pid, 0)
    assert st == 0, "an exchange failed"
    pid = os.fork()
    if pid == 0:
        exchange(a, b)
        os._exit(0)
    time.sleep(0.1)
    os.readlink(a)              # (either target: it is concurrent)
    _, st = os.waitpid(pid, 0)
    assert st == 0, "an exchange failed"
    got = (os.readlink(a), os.readlink(b))
    if got != ("tb%d" % rnd, "ta%d" % rnd):
        bad.append("round %d: after the exchange, readlink says %r" % (rnd, got))
for b_ in bad:
    print("  -- " + b_)
assert not bad, "an answer was another file's"
print("  -- ok (xattrs %s)" % ("checked" if xattrs else "not supported here"))
PY
rm -f "$ZR_TMP/armed"
zr_umount
say "ok"
