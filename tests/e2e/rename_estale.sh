#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# rename_estale: GETATTRs and opens of objects that renames move, which are
# never removed, must never fail (tmpfs never says ESTALE). zr_renamestat
# exchanges files, directories and symlinks (RENAME_EXCHANGE, across two
# directories) and moves files away and back, while other processes hold
# an O_PATH fd of every object and ask for its attributes with
# statx(AT_STATX_FORCE_SYNC) (a GETATTR each time, which the kernel does
# not retry), statx and open the names, with max_fds=16 and more objects
# than that, so that the daemon reaches them through their names. Between
# a rename's backing call and the daemon's record of the new names, a name
# reaches another file, or nothing: a GETATTR there looked again for
# 10 ms, then answered ESTALE, and answered ENOENT at once for a name that
# was gone; so a rename's thread held up (CPU load) made fstat(2) of a
# live file fail. Part 1 holds each rename whose new name is n1, m0.* or
# m1.0 60 ms after its backing call (zr_fault.so's
# ZR_FAULT_RENAME_DELAY_MS) to make those windows certain: thousands of
# failures in 4 s before the fix. Part 2 runs CPU hogs instead, no fault.
# Part 3 holds a plain rename of a file 300 ms, and opens (an OPEN, whose
# reopen by name retried 46 ms) and fstats the file through an O_PATH fd
# in between: both failed with ENOENT before the fix. (A chmod there
# would wait for the rename: the kernel holds the file's inode lock.)
# Every statx and open must succeed; no length of time is asserted.
ZR_TIMEOUT=${ZR_TIMEOUT:-60}
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the names are the daemon's"
zr_need_tool python3
RS=$(zr_helper zr_renamestat)
FAULT=$(zr_helper zr_fault.so)
SECS=${ZR_RENAME_ESTALE_SECS:-4}

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
say "part 1: each rename to n1, m0.* or m1.0 held 60 ms after its backing call"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_RENAME_NAME='n1|m0.*|m1.0' ZR_FAULT_RENAME_DELAY_MS=60 \
	zr_mount_fault "max_fds=16" "$B" "$M"
mkdir "$ZR_MNT/t1"
touch "$ZR_TMP/armed"
rc=0; out=$("$RS" -T "$SECS" -R 2 -Q 2 -n 24 "$ZR_MNT/t1" 2>&1) || rc=$?
rm -f "$ZR_TMP/armed"
echo "$out" | sed 's/^/  -- /'
[ $rc -eq 0 ] || fail "part 1: a statx or open of a live object failed"
zr_umount

say "part 2: CPU hogs, no fault"
zr_mount "max_fds=16" "$B" "$M"
mkdir "$ZR_MNT/t2"
rc=0; out=$("$RS" -T "$SECS" -R 3 -Q 3 -H 4 -n 64 "$ZR_MNT/t2" 2>&1) || rc=$?
echo "$out" | sed 's/^/  -- /'
[ $rc -eq 0 ] || fail "part 2: a statx or open of a live object failed"
zr_umount

say "part 3: open and fstat of a file held open while its rename is held 300 ms"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_RENAME_NAME='f|g' ZR_FAULT_RENAME_DELAY_MS=300 \
	zr_mount_fault "max_fds=16" "$B" "$M"
mkdir "$ZR_MNT/t3"
touch "$ZR_TMP/armed"
python3 - "$ZR_MNT/t3" <<'PY' || fail "part 3: see above"
import ctypes, errno, os, sys, time
d = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
AT_EMPTY_PATH, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, SYS_statx = 0x1000, 0x2000, 0x7ff, 332
open(d + "/f", "w").write("f")
for i in range(24):
    open("%s/o%d" % (d, i), "w").write("o")
opath = os.open(d + "/f", os.O_PATH)
got = {"open": [], "fstat": []}
for rnd in range(4):
    for i in range(24):         # the file's fd leaves the daemon's cache
        os.close(os.open("%s/o%d" % (d, i), os.O_RDONLY))
    src, dst = ("f", "g") if rnd % 2 == 0 else ("g", "f")
    pid = os.fork()
    if pid == 0:
        os.rename("%s/%s" % (d, src), "%s/%s" % (d, dst))
        os._exit(0)
    time.sleep(0.1)             # (in the hold, most likely: it is not asserted)
    try:                        # an OPEN, no lookup of a name
        os.close(os.open("/proc/self/fd/%d" % opath, os.O_RDONLY))
        got["open"].append("ok")
    except OSError as e:
        got["open"].append(errno.errorcode[e.errno])
    buf = ctypes.create_string_buffer(256)
    if libc.syscall(SYS_statx, opath, b"", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC,
                    STATX_BASIC_STATS, buf) == 0:
        got["fstat"].append("ok")
    else:
        got["fstat"].append(errno.errorcode[ctypes.get_errno()])
    _, st = os.waitpid(pid, 0)
    assert st == 0, "a rename failed"
print("  -- %s" % got)
assert all(r == "ok" for v in got.values() for r in v), "an open or fstat failed"
PY
rm -f "$ZR_TMP/armed"
zr_umount
say "ok"
