#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# refused_reads: after the daemon refused WRITEs of the kernel's writeback
# (ENOSPC: a 4 MiB budget over an 8 MiB tmpfs), reads of the file show what
# zramfs stores, not the refused data. The kernel ends the refused pages'
# writeback with the error and keeps them, clean, in its cache: without
# the refusal thread a cached read() showed that data, which an O_DIRECT
# read (served by the daemon) and the file after a remount did not have.
# The writer's close must still report the error (DESIGN.md, Promises).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the refused WRITEs and their pages are the daemon's"
zr_need_root "mounts a tmpfs"
zr_need_tool python3

B=$ZR_TMP/backing
zr_mount_cramped "$B" "$ZR_TMP/mnt"
M=$ZR_MNT

say "24 MiB, random data in every other MiB, over a budget and a disk that cannot take it;"
say "then cached reads against reads the daemon serves (O_DIRECT), for up to 10 s"
head -c 12M /dev/urandom >"$ZR_TMP/src"
# (the daemon knows the size: reads of the file are whole)
zr_write_refused "$M/f" "$ZR_TMP/src" $((24 << 20))
python3 - "$M/f" "$ZR_TMP/src" <<'PY' || fail "reads show data that zramfs does not store"
import mmap, os, sys, time
path = sys.argv[1]
MiB, PAGE = 1 << 20, 4096
with open(sys.argv[2], "rb") as f:
    src = f.read()
wrote = {2 * k: src[k * MiB:(k + 1) * MiB] for k in range(12)}

def cached():
    with open(path, "rb") as f:
        return [f.read(MiB) for _ in range(24)]

def direct():
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf, out = mmap.mmap(-1, MiB), []
    for i in range(24):
        n = os.preadv(fd, [buf], i * MiB)
        out.append(bytes(buf[:n]))
    os.close(fd)
    return out

def lost(d):
    """pages written that read otherwise (not stored)"""
    return sum(1 for i in wrote for p in range(0, MiB, PAGE)
               if d[i][p:p + PAGE] != wrote[i][p:p + PAGE])

t0 = time.monotonic()
while True:
    a, b = cached(), direct()
    bad = [i for i in range(24) if a[i] != b[i]]
    if not bad or time.monotonic() - t0 > 10:
        break
    time.sleep(0.2)
print("     pages written and not stored: %d read from the daemon, %d cached" % (lost(b), lost(a)))
if lost(b) == 0:
    sys.exit("the daemon stores every page: nothing was refused, the test proves nothing")
if bad:
    print("     MiB that read otherwise cached than from the daemon after 10 s: %s" % bad)
    sys.exit(1)
if any(a[i] != bytes(MiB) for i in range(1, 24, 2)):
    sys.exit("a MiB never written reads as data")
print("     they agree after %.1f s" % (time.monotonic() - t0))
PY
# (the refused WRITEs' blocks that zramfs did take stay dirty until the
# disk has room: the unmount waits for them)
mount -o remount,size=64m "$B" || fail "cannot grow the backing tmpfs"
zr_umount
say "ok: the refused data no longer reads back"
