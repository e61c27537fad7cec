#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# mmap_shared: writes through a shared writable mapping (as linkers, sqlite
# and git do), msync, and read() from another descriptor and process must
# see the bytes; also after the kernel cache is dropped, after unmount in
# the backing directory, and after a remount.  zr_mmap fills bytes that
# depend only on (seed, offset), so a reference made on a plain directory
# must compare equal.
. "$(dirname "$0")/lib.sh"
zr_init
MMAP=$(zr_helper zr_mmap)

B=$ZR_TMP/backing M=$ZR_TMP/mnt R=$ZR_TMP/ref
mkdir -p "$B" "$M" "$R"
zr_mount "size=16M,block_size=16k" "$B" "$M"
M=$ZR_MNT

for d in "$R" "$M"; do
	"$MMAP" write "$d/big" $((24 << 20)) 1 || fail "mmap write of big failed on $d"
	"$MMAP" patch "$d/big" 12345 100000 2 || fail "mmap patch of big failed on $d"
	"$MMAP" patch "$d/big" $((20 << 20)) 4096 3 || fail "mmap patch failed on $d"
	"$MMAP" write "$d/small" 1000 4 || fail "mmap write of small failed on $d"
done
# A file written with write() first, then patched through a mapping.
head -c 200000 /dev/urandom >"$ZR_TMP/w"
cp "$ZR_TMP/w" "$R/existing"
cp "$ZR_TMP/w" "$M/existing"
for d in "$R" "$M"; do
	"$MMAP" patch "$d/existing" 70000 9000 5 || fail "mmap patch of existing failed on $d"
done

check() {
	local f
	for f in big small existing; do
		cmp "$R/$f" "$1/$f" || fail "$f differs from the reference ($2)"
	done
	say "ok: mapped writes read back ($2)"
}
check "$M" "read() by another process"
zr_drop_kcache
check "$M" "after dropping the kernel cache"
zr_ctl drop_clean
check "$M" "after drop_clean"
zr_umount
check "$B" "backing directory after unmount"
zr_mount "" "$B" "$M"
check "$ZR_MNT" "after remount"
"$MMAP" patch "$ZR_MNT/big" 0 8192 6 || fail "mmap patch after remount failed"
"$MMAP" patch "$R/big" 0 8192 6
zr_umount
check "$B" "backing directory after a patch following the remount"
