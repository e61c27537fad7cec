#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# touch_writeback: `touch -d` of a file while its dirty blocks are written
# back. A writeback puts back on the backing file the mtime the file
# showed (its pwrite moves it); it read that time, then stamped it. A
# SETATTR of the mtime between the two (made wide by zr_fault.so's
# ZR_FAULT_FUTIMENS_DELAY_MS) was overwritten on disk by the older time:
# the mount showed the new time, and after a remount the file had the old
# one (helper-61). Then truncates to the size a file has (see below).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the writeback is the daemon's"
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_NAME=f ZR_FAULT_FUTIMENS_DELAY_MS=1500 \
	zr_mount_fault "dirty_expire=1h" "$B" "$M"
head -c 200000 /dev/urandom >"$ZR_TMP/f"
cp "$ZR_TMP/f" "$M/f"
[ "$(zr_stat blocks_dirty)" -gt 0 ] || fail "f is not dirty in RAM"

say "touch -d @1000000000 while the writeback of f waits to stamp its mtime"
touch "$ZR_TMP/armed"
echo "writeback all" >"$M/.zramfs/control" &
wb=$!
for i in $(seq 50); do
	[ -e "$ZR_TMP/armed" ] || break
	sleep 0.1
done
[ ! -e "$ZR_TMP/armed" ] || fail "the writeback did not reach its stamp"
touch -m -d @1000000000 "$M/f" || fail "touch failed"
wait "$wb" || fail "writeback all failed"
[ "$(stat -c %Y "$M/f")" = 1000000000 ] ||
	fail "the mount shows mtime $(stat -c %Y "$M/f"), not the one set"
zr_umount
[ "$(stat -c %Y "$B/f")" = 1000000000 ] ||
	fail "the backing file has mtime $(stat -c %Y "$B/f") after unmount, not the one set"
cmp "$ZR_TMP/f" "$B/f" || fail "the backing file of f is not whole"

# A truncate(2) to the size a file has already changes nothing, its mtime
# included (POSIX; the kernel keeps a cached file's mtime with the writeback
# cache and sends no new one then). zramfs stamped the time of the truncate
# on the backing file, which the mount showed only after a remount
# (helper-67). An open with O_TRUNC marks the mtime whatever the size.
say "truncate to the same size keeps the mtime, on the mount and on disk"
zr_mount "" "$B" "$M"
printf '' >"$M/t0"
printf 'hello' >"$M/t5"
touch -m -d @1000000000 "$M/t0" "$M/t5" "$M/f"
# truncate(2): coreutils' truncate calls ftruncate(2), which Linux makes
# mark the times whatever the size
python3 -c 'import os, sys; os.truncate(sys.argv[1], 0); os.truncate(sys.argv[2], 5)' \
	"$M/t0" "$M/t5" || fail "truncate(2) failed"
: >"$M/f" || fail "O_TRUNC of f failed"
for n in t0 t5; do
	[ "$(stat -c %Y "$M/$n")" = 1000000000 ] ||
		fail "$n: the mount shows mtime $(stat -c %Y "$M/$n") after a truncate to its size"
done
[ "$(stat -c %Y "$M/f")" != 1000000000 ] || fail "f: O_TRUNC left the mtime as it was"
zr_umount
for n in t0 t5; do
	[ "$(stat -c %Y "$B/$n")" = 1000000000 ] ||
		fail "$n: the backing file has mtime $(stat -c %Y "$B/$n") after a truncate to its size, not the one the mount showed"
done
[ "$(stat -c %Y "$B/f")" != 1000000000 ] || fail "f: O_TRUNC left the backing file's mtime as it was"
[ "$(cat "$B/t5")" = hello ] || fail "t5 lost its data"
say "ok"
