#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# unlink_race: the two names of a file, in two directories, removed at the
# same moment by two processes, while the file is open with data written
# through it and its daemon fd pushed out of the cache (max_fds=16): the
# open file must stay readable and writable until it is closed, and then
# nothing is left that cannot be written back (the daemon exits at once
# when unmounted).  200 rounds.  (Without the daemon's pin of an open file
# whose last name goes, round 0 fails with ESTALE; the window in which the
# two removals overlap inside the daemon is a few microseconds, and this
# did not catch them unserialised in 3 runs: it guards the outcome.)
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "races two unlinks inside the daemon"
zr_need_tool python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B/a" "$B/b" "$B/o" "$M"
for i in $(seq 40); do echo "other $i" >"$B/o/f$i"; done
zr_mount "max_fds=16,dirty_expire=1h" "$B" "$M"

python3 - "$ZR_MNT" <<'PY' || fail "see above"
import os, sys
m = sys.argv[1]
bad = 0
for r in range(200):
    x, y = "%s/a/x%d" % (m, r), "%s/b/y%d" % (m, r)
    data = os.urandom(70000)
    fd = os.open(x, os.O_RDWR | os.O_CREAT, 0o644)
    os.link(x, y)
    os.pwrite(fd, data, 0)
    os.fsync(fd)
    os.pwrite(fd, b"more", 70000)       # dirty in the kernel until the close
    for i in range(1, 41):               # push the file's fd out of the daemon's cache
        open("%s/o/f%d" % (m, i)).read()
    r1, w1 = os.pipe()
    pids = []
    for name in (x, y):
        pid = os.fork()
        if pid == 0:
            os.read(r1, 1)               # both go at once
            os._exit(0 if os.unlink(name) is None else 1)
        pids.append(pid)
    os.write(w1, b"go")
    for pid in pids:
        os.waitpid(pid, 0)
    os.close(r1)
    os.close(w1)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        if os.pread(fd, 70004, 0) != data + b"more":
            print("FAIL: round %d: the open file reads back wrong" % r)
            bad = 1
        os.pwrite(fd, b"tail", 70004)
        os.fsync(fd)
    except OSError as e:
        print("FAIL: round %d: the open file became unreachable: %s" % (r, e))
        bad = 1
    os.close(fd)
    if bad:
        break
sys.exit(bad)
PY
[ "$(zr_stat blocks_dirty)" = 0 ] || fail "dirty blocks left: $(zr_stat blocks_dirty)"
zr_umount
left=$(find "$B/a" "$B/b" -mindepth 1)
[ -z "$left" ] || fail "names left in the backing directory: $left"
