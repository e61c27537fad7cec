#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# copy_range_mtime: the backing file keeps the mtime the mount showed after
# a copy_file_range(2) into the file.  With its writeback cache the kernel
# times the copy itself, and sends its time in a SETATTR only when it
# moves it: not for a copy in the same clock tick as the last time it
# sent.  The daemon stamped its own clock on the file for such a write
# (a copy_file_range, a direct write), and that time, a few ms later than
# the mount's, stayed on the backing file: after a remount the file had
# another mtime than the mount showed.  A hole punched right before (whose
# time the kernel sends at once) puts the copy in that tick, most of the
# time; helper-70's extension of zr_difffuzz found it.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the times on the backing file are the daemon's"
zr_need_tool python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
N=16
zr_mount "" "$B" "$M"
for i in $(seq $N); do
	head -c 400000 /dev/urandom >"$ZR_MNT/src$i"
	head -c 400000 /dev/urandom >"$ZR_MNT/dst$i"
done
sleep 0.2
# punch a hole in each dst, copy into it at once, print the mtime it shows
python3 - "$ZR_MNT" "$N" >"$ZR_TMP/shown" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
d, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1):
    s = os.open(os.path.join(d, "src%d" % i), os.O_RDONLY)
    t = os.open(os.path.join(d, "dst%d" % i), os.O_WRONLY)
    if libc.fallocate(t, 3, 4096, 4096) != 0:        # PUNCH_HOLE | KEEP_SIZE
        sys.exit("fallocate: %s" % os.strerror(ctypes.get_errno()))
    if os.copy_file_range(s, t, 100000, 20000, 200000) != 100000:
        sys.exit("copy_file_range: short copy")
    os.close(s)
    os.close(t)
for i in range(1, n + 1):
    st = os.stat(os.path.join(d, "dst%d" % i))
    print("dst%d %d" % (i, st.st_mtime_ns))
PY
zr_umount
bad=0
while read -r name shown; do
	on_disk=$(stat -c %.9Y "$B/$name" | tr -d .)
	if [ "$on_disk" != "$shown" ]; then
		echo "  $name: the mount showed mtime $shown, the backing file has $on_disk" >&2
		bad=$((bad + 1))
	fi
done <"$ZR_TMP/shown"
[ "$bad" = 0 ] || fail "$bad of $N files have another mtime on the backing file than the mount showed"
say "ok: $N files keep the mtime the mount showed after a punch and a copy_file_range"
