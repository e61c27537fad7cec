#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# syncfs_fail: at unmount the daemon writes everything back and syncs the
# backing filesystem. When that syncfs fails (EIO, as when the device
# refused writes the page cache had taken, which the kernel may then give
# up), the data is not known to be on disk: the daemon must not exit (it
# used to exit 1 with the data gone from RAM), but mark what it holds dirty,
# write it again and retry until a syncfs succeeds. zr_fault.so, preloaded
# into the daemon, fails syncfs while a trigger file exists. When blocks
# had left RAM before such a failure, their data may be lost: the daemon
# says so and exits with status 1. A filesystem mounted inside the backing
# directory is synced too, and its failure counts the same (only the
# backing root's was synced, so a failure there went unseen; helper-88),
# also under a mount over the backing directory itself.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=120
zr_init
zr_need_daemon "the fault is injected into the daemon"
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
head -c $((4 << 20)) /dev/urandom >"$ZR_TMP/src"
# mount_faulty: zramfs over $B with zr_fault.so failing syncfs while
# $ZR_TMP/armed exists (the daemon may be built with ASan, whose runtime
# wants to be first)
mount_faulty() {
	ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_SYNCFS=1 \
		zr_mount_fault "seq_cutoff=0,dirty_expire=1h" "$B" "$M"
}
# lift_fault: the fault lifted, SIGHUP (try at once); the daemon must end
# within 15 s, its status in ZR_WAIT_RC
lift_fault() {
	rm "$ZR_TMP/armed"
	kill -HUP "$ZR_PID"
	zr_wait_pid "$ZR_PID" 15 || fail "the daemon did not finish within 15 s of SIGHUP"
	ZR_PID=
}
mount_faulty
cp "$ZR_TMP/src" "$ZR_MNT/f"
[ "$(zr_stat blocks_dirty)" -gt 0 ] || fail "no dirty blocks before the unmount: the case is not tested"

say "umount while the backing syncfs fails"
touch "$ZR_TMP/armed"
umount "$ZR_MNT" || fail "umount failed"
sleep 4
zr_running "$ZR_PID" || {
	wait "$ZR_PID"
	fail "the daemon exited (status $?) although the backing syncfs failed: $(tail -3 "$ZR_LOG")"
}
n=$(grep -c "final writeback failed (Input/output error)" "$ZR_LOG")
[ "$n" -ge 2 ] || fail "expected at least two failed attempts in 4 s, the log has $n: $(tail -3 "$ZR_LOG")"
# every attempt writes the 64 blocks of the file again
kept=$(grep "final writeback failed" "$ZR_LOG" | tail -1 | sed -n 's/.*: \([0-9]*\) dirty blocks are kept.*/\1/p')
[ "${kept:-0}" -ge 64 ] || fail "the blocks were not marked dirty again: $(grep "final writeback failed" "$ZR_LOG" | tail -1)"

say "the fault lifted, SIGHUP: written again, synced, exit 0"
lift_fault
[ "$ZR_WAIT_RC" = 0 ] || fail "the daemon exited with status $ZR_WAIT_RC"
grep -q "final writeback done after" "$ZR_LOG" || fail "no 'done' line: $(tail -3 "$ZR_LOG")"
cmp "$ZR_TMP/src" "$B/f" || fail "the backing file is not the data written"

# Data written back and dropped from RAM before a syncfs fails cannot be
# written again: the daemon says it may be lost and exits with status 1
# (it exited 0; a failure seen by the low-memory shrink's syncfs, which
# ignored it, was not even seen by the final one: each error is reported
# once per open file)
say "blocks written back and dropped, then a failed syncfs: exit status 1"
rm -f "$B/f" "$B/g"
mount_faulty
cp "$ZR_TMP/src" "$ZR_MNT/f"
echo "writeback all" >"$ZR_MNT/.zramfs/control" || fail "'writeback all' failed"
echo drop_clean >"$ZR_MNT/.zramfs/control" || fail "'drop_clean' failed"
cp "$ZR_TMP/src" "$ZR_MNT/g"
touch "$ZR_TMP/armed"
umount "$ZR_MNT" || fail "umount failed"
sleep 2
lift_fault
[ "$ZR_WAIT_RC" = 1 ] || fail "the daemon exited with status $ZR_WAIT_RC, not 1, after data that had left RAM met a failed syncfs"
grep -q "may be lost" "$ZR_LOG" || fail "no 'may be lost' line: $(tail -3 "$ZR_LOG")"
cmp "$ZR_TMP/src" "$B/g" || fail "g, held in RAM, is not whole in the backing directory"

# (the phases below mount a tmpfs: root only)
if [ "$(id -u)" != 0 ]; then
	say "not root: the phases with a tmpfs inside the backing directory are not run"
	say "ok"
	exit 0
fi

say "a tmpfs mounted inside the backing directory, whose syncfs fails"
rm -f "$B/f" "$B/g"
zr_mount_tmpfs "$B/sub" 16m
dev=$(stat -c %d "$B/sub")
[ "$dev" != "$(stat -c %d "$B")" ] || fail "the tmpfs at $B/sub is on the backing root's device"
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_SYNCFS=1 ZR_FAULT_SYNCFS_DEV=$dev \
	zr_mount_fault "seq_cutoff=0,dirty_expire=1h" "$B" "$M"
cp "$ZR_TMP/src" "$ZR_MNT/sub/f"
[ "$(zr_stat blocks_dirty)" -gt 0 ] || fail "no dirty blocks before the unmount: the case is not tested"
touch "$ZR_TMP/armed"
umount "$ZR_MNT" || fail "umount failed"
sleep 3
zr_running "$ZR_PID" || {
	wait "$ZR_PID"
	fail "the daemon exited (status $?) although the syncfs of the filesystem under sub/ failed: $(tail -3 "$ZR_LOG")"
}
grep -q "final writeback failed (Input/output error)" "$ZR_LOG" ||
	fail "no failed attempt in the log: $(tail -3 "$ZR_LOG")"
lift_fault
[ "$ZR_WAIT_RC" = 0 ] || fail "the daemon exited with status $ZR_WAIT_RC"
cmp "$ZR_TMP/src" "$B/sub/f" || fail "sub/f is not the data written"

# zramfs over its own backing directory (-s: one thread), with a tmpfs
# mounted inside: the first write there makes the daemon keep a
# descriptor of that tmpfs. It opened the mount's absolute path, which
# leads through zramfs's own mount: it asked itself, in the OPEN it was
# serving, and waited for ever (helper-89)
say "a tmpfs inside a backing directory zramfs is mounted over (-s)"
D=$ZR_TMP/self
mkdir -p "$D/sub"
zr_mount_tmpfs "$D/sub" 16m
echo old >"$D/sub/x"
ZR_DAEMON_ARGS="-s" zr_mount "dirty_expire=1h" "$D"
timeout -s KILL 10 sh -c "echo new >>'$D/sub/x'" || {
	# (a daemon waiting for itself: killed first, or the unmount of the
	# cleanup would wait for it too)
	kill -KILL "$ZR_PID" 2>/dev/null
	fail "the append to sub/x through a mount over its backing directory hung or failed"
}
zr_umount
[ "$(cat "$D/sub/x")" = "old
new" ] || fail "sub/x holds '$(cat "$D/sub/x")' after the unmount"
say "ok"
