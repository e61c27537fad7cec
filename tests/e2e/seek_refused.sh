#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# seek_refused: SEEK_DATA/SEEK_HOLE agree with read() after the daemon
# refused WRITEs of the kernel's cache. A 4 MiB budget over an 8 MiB tmpfs;
# a writer puts 12 MiB of random data in every other MiB of a file and
# closes it: the writeback WRITEs that fit nowhere are refused (ENOSPC,
# which the writer's close reports), and the kernel keeps their pages,
# clean, in its cache. Once the tmpfs is grown, a reader (no writer open)
# walks the file with SEEK_DATA/SEEK_HOLE: every hole it is told of must
# read as zeros. lseek leaves the kernel's cache alone when no writer is
# open (5221bd6), and then reported holes over those pages, which read as
# data (helper-83); a refused WRITE now has the next lseek drop them.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the refused WRITEs and lseek's answer are the daemon's"
zr_need_root "mounts a tmpfs"
zr_need_tool python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$M"
zr_mount_tmpfs "$B" 8m
zr_mount "size=4M,dirty_expire=200ms" "$B" "$M"
M=$ZR_MNT

say "12 MiB of random data, every other MiB, over a budget and a disk that cannot take it"
python3 - "$M/f" <<'PY' || fail "the writer failed: $?"
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
err = None
try:
    for i in range(0, 24, 2):
        os.pwrite(fd, os.urandom(1 << 20), i << 20)
except OSError as e:
    err = e
try:
    os.close(fd)
except OSError as e:
    err = err or e
print("     the writer got: %s" % (err,))
if err is None:
    sys.exit("no error: 12 MiB fitted in a 4 MiB budget over an 8 MiB disk")
PY
mount -o remount,size=64m "$B" || fail "cannot grow the backing tmpfs"

say "a reader walks the holes"
python3 - "$M/f" <<'PY' || fail "SEEK_HOLE reported a hole where read() finds data"
import errno, os, sys
r = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(r).st_size
pos, holes = 0, []
while pos < size:
    try:
        d = os.lseek(r, pos, os.SEEK_DATA)
    except OSError as e:
        if e.errno != errno.ENXIO:
            sys.exit("SEEK_DATA at %d: %s" % (pos, e))
        d = size
    if d > pos:
        holes.append((pos, d))
    if d >= size:
        break
    pos = os.lseek(r, d, os.SEEK_HOLE)
bad = 0
for a, b in holes:
    data = os.pread(r, b - a, a)
    nz = len(data) - data.count(0)
    if nz:
        print("     hole [%d, %d) reported, %d non-zero bytes read there" % (a, b, nz))
        bad += 1
print("     %d holes reported, %d over data" % (len(holes), bad))
sys.exit(1 if bad or not holes else 0)
PY
zr_umount
say "ok: the holes reported read as zeros"
