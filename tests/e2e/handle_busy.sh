#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# handle_busy: a file renamed or removed in the backing directory behind
# the daemon's back is reached through its file handle (behind_back.sh).
# ext4 fails open_by_handle_at(2) with ENOMEM, not ESTALE, while a new
# file is being created with the inode number of the handle's file, which
# was freed: numbers are reused at once, by anyone on that filesystem (a
# parallel `make check` did it, and the final writeback of behind_back.sh
# failed once). That state lasts microseconds: the daemon asks again for a
# while, and only a lasting ENOMEM fails the writeback, which keeps the
# data dirty and succeeds once the handle opens. zr_fault.so, preloaded
# into the daemon, fails the first N opens by handle with ENOMEM while a
# trigger file exists.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the fault is injected into the daemon"
zr_need_root "opening files by handle needs CAP_DAC_READ_SEARCH"
zr_stats_on || zr_skip "needs the .zramfs control directory"
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
N=8
for i in $(seq $N); do head -c 9000 /dev/urandom >"$ZR_TMP/src$i"; done

# mount_faulty FAILS: the first FAILS opens by handle fail while armed;
# max_fds=16 and the small files written last keep no fd of the others
mount_faulty() {
	ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_HANDLE_ENOMEM=$1 \
		zr_mount_fault "max_fds=16,block_size=4k,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
	if grep -q "not opened by handle on this backing filesystem" "$ZR_LOG"; then
		zr_skip "files are not opened by handle on the backing filesystem here (TMPDIR=${TMPDIR:-/tmp}): $(cat "$ZR_LOG")"
	fi
}

# setup DIR: N files renamed and N removed behind the daemon's back, with
# their data dirty in the tier
setup() {
	local d=$ZR_MNT/$1 i

	mkdir -p "$d/ren" "$d/del" "$d/fill"
	for i in $(seq $N); do
		cp "$ZR_TMP/src$i" "$d/ren/r$i"
		cp "$ZR_TMP/src$i" "$d/del/d$i"
	done
	for i in $(seq 64); do echo "filler $i" >"$d/fill/f$i"; done
	[ "$(zr_stat fds_open)" -le 16 ] || fail "fds_open $(zr_stat fds_open) above max_fds=16"
	[ "$(zr_stat blocks_dirty)" -ge $((N * 2 * 3)) ] ||
		fail "only $(zr_stat blocks_dirty) dirty blocks: the case is not tested"
	for i in $(seq $N); do mv "$B/$1/ren/r$i" "$B/$1/ren/s$i"; done
	rm "$B/$1"/del/d*
}

# check DIR: the renamed files hold their data; no block is dirty
check() {
	local i

	[ "$(zr_stat blocks_dirty)" = 0 ] || fail "$(zr_stat blocks_dirty) blocks still dirty"
	for i in $(seq $N); do
		cmp "$ZR_TMP/src$i" "$B/$1/ren/s$i" || fail "$1/ren/s$i (renamed behind the daemon's back) is not the data written"
	done
}

say "the first 3 opens by handle say ENOMEM: asked again, the writeback succeeds"
mount_faulty 3
setup a
rd0=$(zr_stat removed_dropped)
touch "$ZR_TMP/armed"
echo "writeback all" >"$ZR_MNT/.zramfs/control" ||
	fail "writeback all failed on a passing ENOMEM of open_by_handle_at: $(grep "cannot open the backing file" "$ZR_LOG" | head -1)"
rm "$ZR_TMP/armed"
check a
[ "$(zr_stat removed_dropped)" -gt "$rd0" ] || fail "removed_dropped stayed at $rd0: the removed files were not told apart"
! grep -q "cannot open the backing file" "$ZR_LOG" || fail "a passing ENOMEM was logged: $(grep "cannot open the backing file" "$ZR_LOG" | head -1)"
zr_umount
! grep -q "final writeback failed" "$ZR_LOG" || fail "the final writeback failed: $(grep "final writeback failed" "$ZR_LOG" | head -1)"

say "every open by handle says ENOMEM: the writeback fails, the data stays dirty until it opens"
mount_faulty 1000000
setup b
touch "$ZR_TMP/armed"
if (echo "writeback all" >"$ZR_MNT/.zramfs/control") 2>"$ZR_TMP/wb.err"; then
	fail "writeback all succeeded although no renamed file could be opened"
fi
# the error is the handle's (the names say ENOENT: renamed away)
grep -q "Cannot allocate memory" "$ZR_TMP/wb.err" ||
	fail "writeback all did not fail with the handle's ENOMEM: $(cat "$ZR_TMP/wb.err")"
grep -q "through its file handle: Cannot allocate memory" "$ZR_LOG" ||
	fail "the log does not give the handle's ENOMEM: $(grep "cannot open the backing file" "$ZR_LOG" | head -1)"
[ "$(zr_stat blocks_dirty)" -ge $((N * 3)) ] ||
	fail "only $(zr_stat blocks_dirty) blocks still dirty after the failed writeback: data was dropped"
rm "$ZR_TMP/armed"
zr_ctl writeback all
check b
zr_umount
say "ok"
