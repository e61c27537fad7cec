#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# clock_step: the daemon's writeback and fill threads time their waits on
# the monotonic clock, so that a step of the system clock does not stop
# them. zr_fault.so runs the daemon's CLOCK_REALTIME an hour ahead of the
# kernel's (ZR_FAULT_CLOCK_AHEAD_S), as a clock stepped back by an hour
# would: with waits timed on that clock (as until helper-88's review), the
# writeback thread slept an hour, and data written with dirty_expire=200ms
# stayed dirty. Here it must be written back within seconds.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the writeback thread is the daemon's"
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
ZR_FAULT_CLOCK_AHEAD_S=3600 zr_mount_fault "dirty_expire=200ms" "$B" "$M"
M=$ZR_MNT
sleep 1	# (the threads' first waits begin)
head -c $((256 << 10)) /dev/urandom >"$ZR_TMP/src"
cp "$ZR_TMP/src" "$M/f" || fail "cannot write f"
for i in $(seq 100); do
	[ "$(zr_stat blocks_dirty)" = 0 ] && cmp -s "$ZR_TMP/src" "$B/f" && break
	sleep 0.1
done
say "after $((i / 10)).$((i % 10)) s: blocks_dirty $(zr_stat blocks_dirty), writebacks $(zr_stat writebacks)"
[ "$(zr_stat blocks_dirty)" = 0 ] ||
	fail "f is still dirty 10 s after its write with dirty_expire=200ms: the writeback thread waits on the stepped clock"
cmp "$ZR_TMP/src" "$B/f" || fail "the backing file of f is not what was written"
zr_umount
say "ok"
