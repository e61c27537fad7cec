#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# touch_writeback: `touch -d` of a file while its dirty blocks are written
# back. A writeback puts back on the backing file the mtime the file
# showed (its pwrite moves it); it read that time, then stamped it. A
# SETATTR of the mtime between the two (made wide by zr_fault.so's
# ZR_FAULT_FUTIMENS_DELAY_MS) was overwritten on disk by the older time:
# the mount showed the new time, and after a remount the file had the old
# one (helper-61).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the writeback is the daemon's"
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_NAME=f ZR_FAULT_FUTIMENS_DELAY_MS=1500 \
	LD_PRELOAD=$FAULT ASAN_OPTIONS=verify_asan_link_order=0 \
	zr_mount "dirty_expire=1h" "$B" "$M"
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
say "ok"
