#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fallocate_race: an extending fallocate(2) against a writeback in flight.
# A dirty block of zeros past the backing file's end is written back as an
# extension of the backing file (fstat, then ftruncate to the block's end,
# no data written). An fallocate that extends the file meanwhile must wait
# for it (it takes the file's I/O mutex, as truncate does): run in between,
# its own ftruncate came first, the writeback's then cut the backing file
# back, and the file came back 64 KiB long after a remount instead of
# 1 MiB. zr_fault.so, preloaded into the daemon, holds the writeback's
# ftruncate for 600 ms so that the fallocate lands in that window.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the delay is injected into the daemon"
zr_stats_on || zr_skip "needs the .zramfs control directory"
zr_need_tool fallocate
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
# (the daemon may be built with ASan, whose runtime wants to be first)
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_NAME=f ZR_FAULT_FTRUNCATE_DELAY_MS=600 \
	zr_mount_fault "seq_cutoff=0,dirty_expire=1h,block_size=64k" "$B" "$M"
M=$ZR_MNT

say "a dirty block of zeros past the backing file's end"
head -c 65536 /dev/zero >"$M/f"	# close: the kernel's pages reach the daemon
[ "$(zr_stat blocks_dirty)" -ge 1 ] || fail "no dirty block: the case is not tested"
[ "$(stat -c %s "$B/f")" = 0 ] || fail "the backing file is $(stat -c %s "$B/f") bytes before the writeback"

say "writeback all, held in its ftruncate, and fallocate -l 1M meanwhile"
touch "$ZR_TMP/armed"
t0=$(date +%s%N)
echo "writeback all" >"$M/.zramfs/control" &
wb=$!
for _ in $(seq 500); do [ -e "$ZR_TMP/armed" ] || break; sleep 0.01; done
[ ! -e "$ZR_TMP/armed" ] || fail "the writeback did not reach its ftruncate within 5 s"
fallocate -l 1M "$M/f" || fail "fallocate failed"
t1=$(date +%s%N)
wait "$wb" || fail "writeback all failed"
say "fallocate returned after $(((t1 - t0) / 1000000)) ms"
[ "$(stat -c %s "$M/f")" = 1048576 ] || fail "the file is $(stat -c %s "$M/f") bytes through the mount, want 1048576"
[ "$(stat -c %s "$B/f")" = 1048576 ] ||
	fail "the backing file is $(stat -c %s "$B/f") bytes, want 1048576: the writeback's ftruncate cut it back after the fallocate"
zr_umount
[ "$(stat -c %s "$B/f")" = 1048576 ] || fail "after the unmount the backing file is $(stat -c %s "$B/f") bytes, want 1048576"
cmp -n 1048576 "$B/f" /dev/zero || fail "the backing file is not all zeros"
say "ok"
