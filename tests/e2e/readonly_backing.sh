#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# readonly_backing: the backing directory is a read-only bind mount.  Per
# DESIGN.md "Promises" (a clear error, nothing lost) the documented
# behaviour is: the mount succeeds, reads work, and every change fails at
# once with EROFS (create, mkdir, write to an existing file, truncate,
# unlink, rename, setattr) instead of being accepted into RAM and lost
# later.  The unmount exits 0 and the backing directory is unchanged.
# zramfsctl umount unmounts a mount made with -o ro.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_root "makes a read-only bind mount"

B=$ZR_TMP/backing RO=$ZR_TMP/ro M=$ZR_TMP/mnt
mkdir -p "$B/sub" "$RO" "$M"
head -c 3000000 /dev/urandom >"$B/data"
echo "hello" >"$B/sub/text"
zr_sums "$B" >"$ZR_TMP/sums"
mount --bind "$B" "$RO" || zr_skip "cannot make a bind mount"
mount -o remount,bind,ro "$RO" || fail "cannot remount the bind mount read-only"
touch "$RO/x" 2>/dev/null && fail "the bind mount is not read-only"

zr_mount "" "$RO" "$M"
M=$ZR_MNT
say "reads work"
zr_same_sums "$ZR_TMP/sums" "$M" "reading through the mount"
ls -l "$M/sub" >/dev/null || fail "readdir failed"

say "changes fail with EROFS"
E="Read-only file system"
zr_expect_err "$E" touch "$M/new"
zr_expect_err "$E" mkdir "$M/newdir"
zr_expect_err "$E" bash -c "echo more >>'$M/sub/text'"
zr_expect_err "$E" bash -c "echo over >'$M/sub/text'"
zr_expect_err "$E" truncate -s 10 "$M/data"
zr_expect_err "$E" rm "$M/sub/text"
zr_expect_err "$E" mv "$M/data" "$M/data2"
zr_expect_err "$E" chmod 0600 "$M/data"
zr_expect_err "$E" ln -s data "$M/link"
zr_drop_kcache
zr_same_sums "$ZR_TMP/sums" "$M" "nothing changed through the mount"
zr_umount
zr_same_sums "$ZR_TMP/sums" "$B" "backing directory unchanged"

# A mount made read-only (-o ro) over a backing directory that is not:
# `zramfsctl umount` unmounts it, exit 0 and silent (its control file
# cannot be opened for writing, which stopped the unmount before,
# helper-72).
if zr_real; then
	say "zramfsctl umount of a mount made with -o ro"
	zr_mount "ro" "$B" "$M"
	zr_expect_err "$E" touch "$ZR_MNT/new"
	"$ZRAMFSCTL" umount "$ZR_MNT" 2>"$ZR_TMP/ctl.err" || fail "zramfsctl umount of a read-only mount failed: $(cat "$ZR_TMP/ctl.err")"
	[ ! -s "$ZR_TMP/ctl.err" ] || fail "zramfsctl umount of a read-only mount said: $(cat "$ZR_TMP/ctl.err")"
	zr_is_mounted "$ZR_MNT" && fail "$ZR_MNT is still mounted after zramfsctl umount"
	zr_wait_pid "$ZR_PID" 10 || fail "the daemon did not exit after zramfsctl umount"
	ZR_PID=
	zr_same_sums "$ZR_TMP/sums" "$B" "backing directory unchanged after the -o ro mount"
fi
say "ok"
