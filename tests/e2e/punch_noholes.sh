#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# punch_noholes: fallocate PUNCH_HOLE on a backing filesystem that cannot
# punch holes (ext2): the range reads as zeros through the mount, after the
# tier drops its clean blocks, and in the backing file after unmount.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "punches holes through the daemon"
zr_need_tool mkfs.ext2 fallocate python3 cmp

IMG=$ZR_TMP/ext2.img B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
truncate -s 64M "$IMG"
mkfs.ext2 -q -F "$IMG" || fail "mkfs.ext2 failed"
mount -o loop "$IMG" "$B" || zr_skip "cannot mount a loop device here"
zr_mount "size=32M,dirty_expire=1h" "$B" "$M"

say "1 MiB of 0xff, fsynced, then a hole of 300000 bytes at 100000"
python3 - "$ZR_MNT/f" "$ZR_TMP/expected" <<'PY' || fail "writing the file failed"
import os, sys
p, e = sys.argv[1], sys.argv[2]
data = b"\xff" * (1 << 20)
with open(p, "wb") as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())
exp = bytearray(data)
exp[100000:400000] = bytes(300000)
open(e, "wb").write(bytes(exp))
PY
fallocate -p -o 100000 -l 300000 "$ZR_MNT/f" || fail "fallocate -p failed"
cmp "$ZR_TMP/expected" "$ZR_MNT/f" || fail "hole not zero through the mount"
zr_ctl drop_clean
sync
echo 3 >/proc/sys/vm/drop_caches
cmp "$ZR_TMP/expected" "$ZR_MNT/f" || fail "hole not zero after drop_clean"
zr_umount
cmp "$ZR_TMP/expected" "$B/f" || fail "hole not zero in the backing file"
umount "$B" || fail "cannot unmount the ext2 image"
