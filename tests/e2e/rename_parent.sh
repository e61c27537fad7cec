#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# rename_parent: a GETATTR, READ or OPEN of a file whose directory (or
# that directory's parent, or the file itself) a rename of ours is moving
# must not fail. zr_rename_wait() waits for a rename of the inode asked
# about, in GETATTR and OPEN; a rename of one of its directories changes
# no name of the file, but the parent's name reaches nothing from the
# backing call to the daemon's record of the new name, and, with the
# parent's fd out of the daemon's cache (max_fds=16, 24 other files
# opened), the parent's reopen by name retried 46 ms, then failed: a
# statx(2) of an O_PATH descriptor of the file, and an fstatat(2) relative
# to an fd of the directory, failed with ESTALE. A READ of an open file
# whose fd left the cache reopens it the same way, and failed so for a
# rename of the file itself too.
# zr_fault.so holds each rename to D, E, G, H, f or g 600 ms after its
# backing call; in between, the file (G/D/f at first) is statx'ed with
# AT_STATX_FORCE_SYNC and opened through an O_PATH descriptor, and read
# (its page dropped) through a descriptor held open, in rounds that rename
# its directory, that directory's parent, and the file; a name not looked
# up yet is looked up relative to an fd of the file's directory (LOOKUP),
# and the directory's parent is listed through a new handle (READDIR):
# both reach the directory by its name too. No length of time is
# asserted: only that every statx, read, lookup, listing and open
# succeeds.
ZR_TIMEOUT=${ZR_TIMEOUT:-60}
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the names are the daemon's"
zr_need_tool python3
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_RENAME_NAME='D|E|G|H|f|g' ZR_FAULT_RENAME_DELAY_MS=600 \
	zr_mount_fault "max_fds=16" "$B" "$M"
mkdir -p "$ZR_MNT/t/G/D"
# names the kernel has not looked up yet, one a round (made in the backing
# directory, so that no entry of them is cached)
for i in $(seq 0 11); do echo x > "$B/t/G/D/x$i"; done
touch "$ZR_TMP/armed"
python3 - "$ZR_MNT/t" <<'PY' || fail "see above"
import ctypes, errno, os, sys, time
t = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
AT_EMPTY_PATH, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, SYS_statx = 0x1000, 0x2000, 0x7ff, 332
open(t + "/G/D/f", "w").write("f")
for i in range(24):
    open("%s/o%d" % (t, i), "w").write("o")
opath = os.open(t + "/G/D/f", os.O_PATH)
got = {"open": [], "fstat": [], "read": [], "lookup": [], "readdir": []}
dfd = os.open(t + "/G/D", os.O_RDONLY | os.O_DIRECTORY)    # f's directory
gfd = os.open(t + "/G", os.O_RDONLY | os.O_DIRECTORY)      # and its parent
# (directory, name, new name): the file's directory, its parent, the file
moves = [("G", "D", "E"), (".", "G", "H"), ("H/E", "f", "g"),
         ("H", "E", "D"), (".", "H", "G"), ("G/D", "g", "f")]
rfd = os.open(t + "/G/D/f", os.O_RDONLY)
for rnd in range(12):
    for i in range(24):         # the directories' fds leave the daemon's cache
        os.close(os.open("%s/o%d" % (t, i), os.O_RDONLY))
    d, src, dst = moves[rnd % len(moves)]
    pid = os.fork()
    if pid == 0:
        os.rename("%s/%s/%s" % (t, d, src), "%s/%s/%s" % (t, d, dst))
        os._exit(0)
    time.sleep(0.1)             # (in the hold, most likely: it is not asserted)
    try:                        # first: a READ (its page dropped) of an open file
        os.posix_fadvise(rfd, 0, 0, os.POSIX_FADV_DONTNEED)
        got["read"].append("ok" if os.pread(rfd, 8, 0) == b"f" else "short")
    except OSError as e:
        got["read"].append(errno.errorcode[e.errno])
    try:                        # a listing through a new handle of G
        ents = os.listdir("/proc/self/fd/%d" % gfd)
        got["readdir"].append("ok" if len(ents) == 1 else "got %r" % ents)
    except OSError as e:
        got["readdir"].append(errno.errorcode[e.errno])
    try:                        # a LOOKUP relative to the directory's fd
        os.stat("x%d" % rnd, dir_fd=dfd)
        got["lookup"].append("ok")
    except OSError as e:
        got["lookup"].append(errno.errorcode[e.errno])
    buf = ctypes.create_string_buffer(256)    # (before the OPEN, which caches an fd)
    if libc.syscall(SYS_statx, opath, b"", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC,
                    STATX_BASIC_STATS, buf) == 0:
        got["fstat"].append("ok")
    else:
        got["fstat"].append(errno.errorcode[ctypes.get_errno()])
    try:                        # an OPEN, no lookup of a name
        os.close(os.open("/proc/self/fd/%d" % opath, os.O_RDONLY))
        got["open"].append("ok")
    except OSError as e:
        got["open"].append(errno.errorcode[e.errno])
    _, st = os.waitpid(pid, 0)
    assert st == 0, "a rename failed (round %d, %s)" % (rnd, got)
print("  -- %s" % got)
assert all(r == "ok" for v in got.values() for r in v), "a request failed"
PY
rm -f "$ZR_TMP/armed"
zr_umount
say "ok"
