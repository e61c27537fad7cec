#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fd_exhaustion: the daemon runs out of file descriptors (its soft limit is
# lowered to 64 with prlimit while 200 directory handles are held open
# through the mount).  Nothing may go wrong in silence: a listing through a
# directory handle opened before returns every name or fails, never fewer; unlinking an open file with dirty
# data either works (the file stays readable through its fd) or fails, and
# then the name stays.  Once the handles are closed, everything is back.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "exhausts the daemon's file descriptors"
zr_need_tool prlimit python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B/list" "$B/other" "$M"
for i in $(seq 200); do mkdir "$B/h$i"; done
for i in $(seq 20); do echo "entry $i" >"$B/list/e$i"; done
for i in $(seq 40); do echo "other $i" >"$B/other/o$i"; done
zr_mount "max_fds=16,dirty_expire=1h" "$B" "$M"
soft=$(prlimit --pid "$ZR_PID" --nofile --output SOFT --noheadings)

python3 - "$ZR_MNT" "$ZR_PID" "$soft" <<'PY' || fail "see above"
import os, subprocess, sys
m, pid, soft = sys.argv[1], sys.argv[2], sys.argv[3]
data = os.urandom(300000)
with open(m + "/f", "wb") as f:       # dirty in the daemon after the close
    f.write(data)
fd = os.open(m + "/f", os.O_RDWR)
lfd = os.open(m + "/list", os.O_RDONLY | os.O_DIRECTORY)  # a handle opened in time
for i in range(1, 41):                # push the fds of f and list out of the daemon's cache
    open("%s/other/o%d" % (m, i)).read()
subprocess.run(["prlimit", "--pid", pid, "--nofile=64:"], check=True)
held = []
try:
    for i in range(1, 201):
        try:
            held.append(os.open("%s/h%d" % (m, i), os.O_RDONLY | os.O_DIRECTORY))
        except OSError:
            pass
    print("     holding %d directory handles, daemon fds: %d" %
          (len(held), len(os.listdir("/proc/%s/fd" % pid))))
    bad = 0
    for _ in range(5):
        try:
            names = os.listdir(lfd)
            if len(names) != 20:
                print("FAIL: a listing returned %d of 20 names, no error" % len(names))
                bad = 1
        except OSError as e:
            print("     listing failed, as it may:", e.strerror)
    try:
        os.unlink(m + "/f")
        unlinked = True
        print("     unlink of the open file worked")
    except OSError as e:
        unlinked = False
        print("     unlink of the open file failed, as it may:", e.strerror)
finally:
    for h in held:
        os.close(h)
    subprocess.run(["prlimit", "--pid", pid, "--nofile=%s:" % soft], check=True)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
if os.pread(fd, len(data), 0) != data:
    print("FAIL: the open file reads back wrong")
    bad = 1
os.close(fd)
os.close(lfd)
if unlinked == os.path.exists(m + "/f"):
    print("FAIL: unlink %s, yet the name is %s" % ("worked" if unlinked else "failed",
                                                   "there" if unlinked else "gone"))
    bad = 1
if sorted(os.listdir(m + "/list")) != sorted("e%d" % i for i in range(1, 21)):
    print("FAIL: the listing is wrong once the handles are closed")
    bad = 1
sys.exit(bad)
PY
zr_umount
