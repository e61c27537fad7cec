#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# umount_wait: umount(8) of a FUSE mount returns before the daemon has
# written back what it holds; `zramfsctl umount` returns only once the
# daemon has exited, with every byte in the backing directory (-l detaches
# at once and does not wait).  When the backing
# directory cannot take the data (a full tmpfs), it refuses to unmount, and
# the data stays readable in RAM until there is room.  A plain umount(8)
# over a full backing directory: the daemon keeps the data (longer than the
# 30 s after which it used to give up), and writes it back once there is
# room; SIGHUP makes it try at once.  Meanwhile a new mount of the same
# backing directory is refused.  A stopped daemon (SIGSTOP): zramfsctl
# umount says so within seconds and finishes once it goes on; --lazy
# detaches at once.  A mount whose daemon was killed is unmounted, with a
# message that its unsaved data is lost.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=180
zr_init
zr_need_daemon "waits for the daemon"
zr_need_root "unmounts and mounts a tmpfs"
zr_stats_on || zr_skip "needs the .zramfs control directory"

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
head -c $((64 << 20)) /dev/urandom >"$ZR_TMP/src"

# umounted_by waits|lazy CMD...: unmount our mount with CMD, then check what
# a caller may rely on: nothing mounted, and once the daemon is gone (at
# once for "waits", in the background for "lazy") the data is complete
umounted_by() {
	local mode=$1
	shift
	"$@" || fail "'$*' failed"
	if [ "$mode" = waits ] && zr_running "$ZR_PID"; then
		fail "'$*' returned while the daemon $ZR_PID still runs"
	fi
	zr_is_mounted "$ZR_MNT" && fail "$ZR_MNT is still mounted after '$*'"
	zr_wait_pid "$ZR_PID" 60 || fail "daemon $ZR_PID did not exit after '$*'"
	[ "$ZR_WAIT_RC" = 0 ] || fail "daemon exited with status $ZR_WAIT_RC"
	ZR_PID=
	cmp "$ZR_TMP/src" "$B/f" || fail "the backing file is not complete after '$*'"
	rm -f "$B/f"
}

for how in waits lazy; do
	say "64 MiB of dirty data, zramfsctl umount ($how)"
	# seq_cutoff=0: the data stays dirty in RAM, none goes to disk early
	zr_mount "seq_cutoff=0,dirty_expire=1h" "$B" "$M"
	cp "$ZR_TMP/src" "$ZR_MNT/f"
	[ "$(zr_stat blocks_dirty)" -gt 0 ] || fail "no dirty blocks before the unmount: the case is not tested"
	[ "$(zr_stat pid)" = "$ZR_PID" ] || fail "stats pid is $(zr_stat pid), the daemon is $ZR_PID"
	if [ "$how" = waits ]; then
		umounted_by waits "$ZRAMFSCTL" umount "$ZR_MNT"
	else
		# --lazy: detached at once, the daemon finishes in the background
		umounted_by lazy "$ZRAMFSCTL" umount -l "$ZR_MNT"
	fi
done

say "a full backing directory: not unmounted, nothing lost"
FB=$ZR_TMP/fullback
zr_mount_tmpfs "$FB" 16m
zr_mount "seq_cutoff=0,dirty_expire=1h,size=256M" "$FB" "$M"
cp "$ZR_TMP/src" "$ZR_MNT/f"
zr_expect_err "not unmounted" "$ZRAMFSCTL" umount "$ZR_MNT"
zr_is_mounted "$ZR_MNT" || fail "unmounted although the data could not be written back"
zr_running "$ZR_PID" || fail "the daemon exited although the data could not be written back"
# (only the bytes are compared here)
cat "$ZR_MNT/f" >"$ZR_TMP/back" 2>/dev/null || true
cmp "$ZR_TMP/src" "$ZR_TMP/back" || fail "the data reads back wrong after the failed unmount"
mount -o remount,size=128m "$FB" || fail "cannot enlarge the tmpfs"
"$ZRAMFSCTL" umount "$ZR_MNT" || fail "zramfsctl umount failed once there was room"
zr_wait_pid "$ZR_PID" 5 || fail "daemon $ZR_PID did not go"
ZR_PID=
cmp "$ZR_TMP/src" "$FB/f" || fail "the backing file is not complete after the second unmount"
umount "$FB"

say "umount(8) over a full backing directory: the daemon waits for room"
zr_mount_tmpfs "$FB" 16m
zr_mount "seq_cutoff=0,dirty_expire=1h,size=256M" "$FB" "$M"
cp "$ZR_TMP/src" "$ZR_MNT/f"
umount "$ZR_MNT" || fail "umount failed"
sleep 35
zr_running "$ZR_PID" || fail "the daemon exited with data it could not write back"
grep -q "dirty blocks are kept in RAM" "$ZR_LOG" ||
	fail "the daemon did not log that it keeps the data: $(tail -3 "$ZR_LOG")"
# a new mount of the same backing directory meanwhile would have its data
# overwritten by the old daemon's blocks: refused (after waiting 10 s)
OLD_PID=$ZR_PID
zr_expect_err "locked: by another zramfs daemon" timeout 30 "$ZRAMFS" -f "$FB" "$M"
zr_is_mounted "$M" && fail "mounted over a backing directory whose daemon is still writing back"
mount -o remount,size=128m "$FB" || fail "cannot enlarge the tmpfs"
# (its next attempt would be 63 s after the unmount, past this wait)
ZR_PID=$OLD_PID
kill -HUP "$ZR_PID"
zr_wait_pid "$ZR_PID" 15 || fail "the daemon did not write back within 15 s of SIGHUP once there was room"
[ "$ZR_WAIT_RC" = 0 ] || fail "the daemon exited with status $ZR_WAIT_RC"
ZR_PID=
cmp "$ZR_TMP/src" "$FB/f" || fail "the backing file is not complete once there was room"
umount "$FB"

say "zramfsctl umount of a stopped daemon: says so, and ends once it goes on"
# (helper-66: it waited for ever in statfs, without a word)
zr_mount "seq_cutoff=0,dirty_expire=1h" "$B" "$M"
cp "$ZR_TMP/src" "$ZR_MNT/f"
STOPPED=$ZR_PID
# (the clean-up's unmount would wait on the stopped daemon: go on first)
cont_fail() {
	kill -CONT "$STOPPED"
	fail "$@"
}
kill -STOP "$STOPPED"
# (the stop reaches each thread on its way: one still busy polling may
# answer the statfs first, and zramfsctl then waits on its next step; a
# CI run saw that. Wait until every thread is stopped.)
all_stopped() {
	local t st
	for t in /proc/"$STOPPED"/task/*/stat; do
		st=$(awk '{ print $3 }' "$t" 2>/dev/null) || continue
		[ "$st" = T ] || [ "$st" = t ] || return 1
	done
}
for _ in $(seq 50); do
	all_stopped && break
	sleep 0.1
done
all_stopped || cont_fail "the daemon's threads did not all stop within 5 s of SIGSTOP"
"$ZRAMFSCTL" umount "$ZR_MNT" 2>"$ZR_TMP/stopped.err" &
CTL=$!
ZR_ATEXIT+=('kill -9 "$CTL" 2>/dev/null')
for _ in $(seq 200); do
	grep -q "has not answered" "$ZR_TMP/stopped.err" && break
	sleep 0.1
done
grep -q "has not answered its statfs" "$ZR_TMP/stopped.err" ||
	cont_fail "zramfsctl umount said nothing in 20 s about a stopped daemon: $(cat "$ZR_TMP/stopped.err")"
zr_is_mounted "$ZR_MNT" || cont_fail "unmounted while the daemon was stopped"
say "ok: $(cat "$ZR_TMP/stopped.err")"
kill -CONT "$STOPPED"
wait "$CTL" || fail "zramfsctl umount failed once the daemon went on: $(cat "$ZR_TMP/stopped.err")"
umounted_by waits true

say "zramfsctl umount --lazy of a stopped daemon: detached at once"
zr_mount "seq_cutoff=0,dirty_expire=1h" "$B" "$M"
cp "$ZR_TMP/src" "$ZR_MNT/f"
STOPPED=$ZR_PID
kill -STOP "$STOPPED"
timeout 20 "$ZRAMFSCTL" umount -l "$ZR_MNT" ||
	cont_fail "zramfsctl umount -l of a stopped daemon failed or hung"
kill -CONT "$STOPPED"
umounted_by lazy true

say "zramfsctl umount of a mount whose daemon was killed"
zr_mount "" "$B" "$M"
ls "$M" >/dev/null	# (the root's attributes cached by the kernel)
kill -9 "$ZR_PID"
zr_wait_pid "$ZR_PID" 10 || fail "the killed daemon did not go"
ZR_PID=
out=$("$ZRAMFSCTL" umount "$M" 2>&1) || fail "zramfsctl umount of a dead mount failed: $out"
echo "$out" | grep -q "the mount has lost its daemon" || fail "zramfsctl umount of a dead mount said: $out"
! zr_is_mounted "$M" || fail "the dead mount is still mounted"

say "zramfsctl umount of something that is not zramfs"
zr_expect_err "not a zramfs mount" "$ZRAMFSCTL" umount "$ZR_TMP"
say "ok"
