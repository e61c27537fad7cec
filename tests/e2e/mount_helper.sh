#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# mount_helper: `mount -t fuse.zramfs` and an /etc/fstab-style line work
# through mount.fuse3 (which starts the daemon in the background); options
# reach the daemon, a bad one is refused with nothing mounted, and after
# umount the daemon is gone and the data is in the backing directory. A start
# that fails after the daemon went to the background fails the command.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "mounts through mount.fuse3"
zr_need_tool mount mount.fuse3 pgrep

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
echo before >"$B/old"
# `mount -t fuse.zramfs` makes mount.fuse3 run `zramfs` by name, but mount
# clears PATH for its helpers, so the shell finds it only where it is
# installed (/usr/local/bin after `make install`). The daemon under test is
# named by path instead, as mount.fuse3's `-t fuse PROGRAM#SOURCE` allows.
# When an installed zramfs is this very binary (after `make install` from
# this build), `-t fuse.zramfs` is used as well.
SRC="$ZRAMFS#$B"
TYPES="fuse"
if inst=$(env -i /bin/sh -c 'command -v zramfs') && cmp -s "$inst" "$ZRAMFS"; then
	TYPES="fuse fuse.zramfs"
else
	say "(no installed zramfs identical to $ZRAMFS: mount -t fuse.zramfs left out)"
fi
src_of() { if [ "$1" = fuse ]; then echo "$SRC"; else echo "$B"; fi; }

# the daemons of this test, by their backing path (they are not our children)
daemons() { pgrep -f "zramfs.*$B" || true; }
gone() {
	for _ in $(seq 1 100); do
		[ -z "$(daemons)" ] && return 0
		sleep 0.1
	done
	return 1
}
# (on a failure, the unmount of zr_cleanup ends them; wait for them before
# their backing directory goes)
ZR_ATEXIT+=('gone || pkill -9 -f "zramfs.*$B"')

for t in $TYPES; do
	say "mount -t $t with options"
	rm -f "$B/new"
	mount -t "$t" "$(src_of "$t")" "$M" -o size=32M,comp=zstd,dirty_expire=1h ||
		fail "mount -t $t failed"
	zr_is_mounted "$M" || fail "not mounted after mount -t $t"
	grep -q "^comp zstd$" "$M/.zramfs/config" || fail "comp=zstd did not reach the daemon"
	grep -q "^size 33554432$" "$M/.zramfs/config" || fail "size=32M did not reach the daemon"
	[ "$(cat "$M/old")" = before ] || fail "existing file not visible"
	head -c 3000000 /dev/urandom >"$ZR_TMP/data"
	cp "$ZR_TMP/data" "$M/new"
	umount "$M" || fail "umount failed"
	gone || fail "daemon still running after umount: $(daemons)"
	cmp "$ZR_TMP/data" "$B/new" || fail "data not in the backing directory after umount"
done

say "fstab line (mount MOUNTPOINT)"
FSTAB=$ZR_TMP/fstab
# with the words only mount(8) and systemd read, as the README suggests
echo "$SRC $M fuse size=16M,noauto,allow_other,nofail,x-systemd.requires-mounts-for=$B 0 0" >"$FSTAB"
mount -T "$FSTAB" "$M" || fail "mount through an fstab line failed"
zr_is_mounted "$M" || fail "not mounted from the fstab line"
awk -v m="$M" '$5 == m' /proc/self/mountinfo | grep -q allow_other || fail "allow_other not in effect"
cmp "$ZR_TMP/data" "$M/new" || fail "data differs through the fstab mount"
umount "$M" || fail "umount failed"
gone || fail "daemon still running after umount: $(daemons)"

say "a bad option through mount -t: refused, nothing mounted"
if mount -t fuse "$SRC" "$M" -o size=lots 2>"$ZR_TMP/err"; then
	umount "$M"
	fail "mount accepted size=lots"
fi
grep -q "size" "$ZR_TMP/err" || fail "message does not name the option: $(cat "$ZR_TMP/err")"
! zr_is_mounted "$M" || fail "something is mounted after a refused mount"
gone || fail "a daemon is left after a refused mount"

# helper-66: a start that fails after the daemon went to the background
# (here no thread can start, through zr_fault.so) is the exit status of the
# mount: before, zramfs exited 0 at the fork and the daemon unmounted behind
# it, so that a script went on writing into the mount point's own directory.
say "a failure after the fork: the mount fails, nothing is left mounted"
FAULT=$(zr_helper zr_fault.so)
rc=0
ZR_FAULT_THREAD_LEADER=1 LD_PRELOAD=$FAULT ASAN_OPTIONS=verify_asan_link_order=0 \
	"$ZRAMFS" "$B" "$M" 2>"$ZR_TMP/err" || rc=$?
if [ "$rc" = 0 ]; then
	zr_is_mounted "$M" && umount "$M"
	fail "zramfs exited 0 though its start failed after the fork"
fi
grep -q "cannot start the signal thread" "$ZR_TMP/err" ||
	fail "the reason does not reach the terminal: $(cat "$ZR_TMP/err")"
! zr_is_mounted "$M" || fail "something is mounted after a failed start"
gone || fail "a daemon is left after a failed start"
say "ok: exit status $rc: $(cat "$ZR_TMP/err")"
