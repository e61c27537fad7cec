#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# mount_over_self: `zramfs DIR` mounts over DIR itself.  The files already in
# DIR must stay visible through the mount (the daemon opened DIR before
# mounting), and what is written through the mount must be in DIR, on the
# underlying directory, once unmounted.  A second `zramfs DIR` while it is
# mounted is refused (it stacked a second daemon on the first mount).
. "$(dirname "$0")/lib.sh"
zr_init

D=$ZR_TMP/dir R=$ZR_TMP/ref
mkdir -p "$D/sub/deeper" "$R"
say "populating $D before the mount"
head -c 300000 /dev/urandom >"$D/old.bin"
seq 1 20000 >"$D/sub/numbers.txt"
echo "deep" >"$D/sub/deeper/leaf"
ln -s old.bin "$D/link"
cp -a "$D/." "$R/"

zr_mount "" "$D"
if zr_real; then
	mountpoint -q "$D" || fail "$D is not a mount point"
fi
say "checking the old files are visible through the mount"
zr_sums "$R" >"$ZR_TMP/sums.old"
zr_same_sums "$ZR_TMP/sums.old" "$ZR_MNT" "old contents through the mount"
[ "$(readlink "$ZR_MNT/link")" = old.bin ] || fail "symlink target changed"

say "writing new data and changing old files through the mount"
head -c 2000000 /dev/urandom >"$R/new.bin"
cp "$R/new.bin" "$ZR_MNT/new.bin"
seq 20001 30000 >>"$R/sub/numbers.txt"
seq 20001 30000 >>"$ZR_MNT/sub/numbers.txt"
mkdir "$R/newdir" "$ZR_MNT/newdir"
echo hello >"$R/newdir/f"
echo hello >"$ZR_MNT/newdir/f"
rm "$R/sub/deeper/leaf" "$ZR_MNT/sub/deeper/leaf"
zr_sums "$R" >"$ZR_TMP/sums.new"
zr_same_sums "$ZR_TMP/sums.new" "$ZR_MNT" "new contents through the mount"
if zr_real; then
	say "a second zramfs over the same directory is refused"
	zr_expect_err "already a zramfs mount" timeout 30 "$ZRAMFS" -f "$D"
	[ "$(awk -v p="$D" '$5 == p' /proc/self/mountinfo | wc -l)" = 1 ] ||
		fail "$D is mounted more than once"
fi
zr_umount

if zr_real; then
	! mountpoint -q "$D" || fail "$D still a mount point"
fi
zr_same_sums "$ZR_TMP/sums.new" "$D" "the directory itself after unmount"
[ ! -e "$D/sub/deeper/leaf" ] || fail "a file removed through the mount is back"
