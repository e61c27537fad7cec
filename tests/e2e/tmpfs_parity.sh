#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# tmpfs_parity: zramfs against tmpfs (and ext4 where tmpfs lacks a call)
# for the calls tools make about space and layout: every fallocate mode
# and its errors, SEEK_DATA/SEEK_HOLE (data in RAM, written back, holes
# punched, at and past EOF), st_blocks and du, statfs, FIEMAP,
# FS_IOC_GETFLAGS, FICLONE and cp --reflink=auto, copy_file_range across
# filesystems, utimensat/futimens by the owner and by another user,
# fallocate -d and cp --sparse=always, and posix_fallocate past the room
# of the backing filesystem and past its largest file.  The checks are in
# tmpfs_parity.py; where zramfs answers otherwise on purpose they assert
# what zramfs(8) promises instead (and say why).  Then the file the failed
# posix_fallocate left is checked after a remount.
# (tests/e2e/difffuzz.sh compares the data of fallocate, punch and
# truncate with tmpfs; this test the answers around them.)
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "compares the daemon with tmpfs"
zr_need_root "mounts a tmpfs and an ext4 image, runs a check as another user"
zr_need_tool python3 mkfs.ext4 fallocate cp du cmp
CHECKS=${TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/tmpfs_parity.py

IMG=$ZR_TMP/ext4.img E4=$ZR_TMP/e4 T=$ZR_TMP/tmpfs M=$ZR_TMP/mnt
mkdir -p "$E4" "$M"
chmod 0755 "$ZR_TMP" "$E4" "$M"
# the backing filesystem: small, so that it fills, and its own (df and
# statfs of the mount are that filesystem's)
truncate -s 64M "$IMG"
mkfs.ext4 -q -F "$IMG" || fail "mkfs.ext4 failed"
mount -o loop "$IMG" "$E4" || zr_skip "cannot mount a loop device here"
mkdir -p "$E4/backing" "$E4/ref"
chmod 0755 "$E4/backing" "$E4/ref"
# the daemon's orphan directory, made at the first file removed while
# open, here at once: its two inodes would move f_ffree in the middle of
# the statfs counts (the daemon takes it, and removes it at the unmount)
mkdir -m 0700 -p "$E4/backing/.zramfs/unlinked"
zr_mount_tmpfs "$T" 64M
chmod 0755 "$T"

BS=65536
zr_mount "size=32M,block_size=64k,dirty_expire=1h,allow_other" "$E4/backing" "$M"
M=$ZR_MNT

PF_EXPECTED=$ZR_TMP/pf.expected python3 "$CHECKS" "$M" "$T" "$E4/ref" "$E4/backing" "$BS" ||
	fail "zramfs answers otherwise than tmpfs (the DIFF lines above)"

say "remount: the file a failed posix_fallocate left, then written, is whole"
zr_umount
zr_mount "size=32M,block_size=64k" "$E4/backing" "$M"
cmp "$M/pf" "$ZR_TMP/pf.expected" || fail "pf differs after the remount"
[ "$(stat -c %s "$M/pf")" = $((2 << 20)) ] || fail "pf is $(stat -c %s "$M/pf") bytes after the remount"
zr_umount
