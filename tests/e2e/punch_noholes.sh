#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# punch_noholes: fallocate PUNCH_HOLE on a backing filesystem that cannot
# punch holes (NFSv3, vfat), simulated with zr_fault.so (ZR_FAULT_NOPUNCH:
# ext2, which this test once used, punches holes on current kernels). The
# range reads as zeros through the mount, after the tier drops its clean
# blocks, and in the backing file after unmount, for data on disk and for
# dirty data; a punch whose extension of the backing file fails changes
# nothing (it once dropped the dirty blocks that held the file's size
# first); a punch whose write of zeros fails part way (the filesystem
# fills up) leaves the tier and the disk agreeing on the block it stopped in
# (a clean copy of it once read the old data, and half zeros after reclaim
# dropped it), for 128 KiB blocks (two writes of zeros a block) and 4 KiB
# ones (a short write ends inside a block); and a 1 GiB punch in 4 KiB
# blocks stays within a 1 MiB budget (as dirty zero blocks in the tier it
# took 6 MiB of map).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "punches holes through the daemon"
zr_need_tool fallocate python3 cmp
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
# mount_nopunch OPTS: zramfs over $B, whose punches fail with EOPNOTSUPP
mount_nopunch() {
	ZR_FAULT_NOPUNCH=1 ZR_FAULT_FTRUNCATE_ERR=1 ZR_FAULT_NAME=h ZR_FAULT_ARMED=$ZR_TMP/armed \
		zr_mount_fault "$1" "$B" "$M"
}
mount_nopunch "size=32M,dirty_expire=1h"

say "1 MiB of 0xff, fsynced (f) or left dirty (g), then a hole of 300000 bytes at 100000"
python3 - "$ZR_MNT" "$ZR_TMP/expected" <<'PY' || fail "writing the files failed"
import os, sys
m, e = sys.argv[1], sys.argv[2]
data = b"\xff" * (1 << 20)
for name, sync in (("f", True), ("g", False)):
    with open(os.path.join(m, name), "wb") as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())
exp = bytearray(data)
exp[100000:400000] = bytes(300000)
open(e, "wb").write(bytes(exp))
PY
for n in f g; do
	fallocate -p -o 100000 -l 300000 "$ZR_MNT/$n" || fail "fallocate -p of $n failed"
	cmp "$ZR_TMP/expected" "$ZR_MNT/$n" || fail "hole in $n not zero through the mount"
done
zr_ctl drop_clean
sync
zr_drop_kcache
for n in f g; do
	cmp "$ZR_TMP/expected" "$ZR_MNT/$n" || fail "hole in $n not zero after drop_clean"
done
say "1 MiB of dirty 0xff in h, a punch of its last 960 KiB whose extension of the backing file fails"
head -c $((1 << 20)) /dev/zero | tr '\0' '\377' >"$ZR_TMP/h"
cp "$ZR_TMP/h" "$ZR_MNT/h" || fail "writing h failed"
[ "$(stat -c %s "$B/h")" -lt $((1 << 20)) ] || fail "backing h is already 1 MiB: the case needs its data dirty"
touch "$ZR_TMP/armed"
fallocate -p -o 65536 -l $(((1 << 20) - 65536)) "$ZR_MNT/h" 2>/dev/null &&
	fail "the punch of h succeeded though the backing file could not be extended"
rm -f "$ZR_TMP/armed"
cmp "$ZR_TMP/h" "$ZR_MNT/h" || fail "the failed punch changed h through the mount"
zr_umount
for n in f g; do
	cmp "$ZR_TMP/expected" "$B/$n" || fail "hole in $n not zero in the backing file"
done
# the backing filesystem punched nothing: the zeros are written out
[ "$(du -k "$B/f" | cut -f1)" -ge 1024 ] || fail "backing f has holes ($(du -k "$B/f" | cut -f1) KiB): the no-holes path was not taken"
cmp "$ZR_TMP/h" "$B/h" || fail "backing h ($(stat -c %s "$B/h") bytes) is not the 1 MiB written: the failed punch lost data"

# punch_enospc BYTES OPT: with block_size=OPT (BYTES bytes), 1 MiB of 0xff
# in p, fsynced (clean in the tier), and a punch of [128 KiB, 896 KiB)
# whose write of zeros stops at byte AT (the filesystem is full there): 5000
# bytes into the second half of 128 KiB block 3, in the sixth 64 KiB write
# of zeros (which writes those 5000 bytes and returns short). The whole
# blocks before AT read as zeros, the rest as before, through the mount
# before and after the tier drops its clean blocks, and in the backing file
# after unmount. The first read is from the kernel's cache, which kept the
# old pages of the range after a failed punch until the daemon told it to
# drop them.
punch_enospc() {
	local bs=$1 at=$((3 * 131072 + 65536 + 5000)) z
	z=$((at / bs * bs))	# where the whole zeroed blocks end
	say "a punch of clean blocks of $bs bytes whose write of zeros fails at byte $at"
	rm -f "$B/f" "$B/g" "$B/h" "$B/p"
	ZR_FAULT_NOPUNCH=1 ZR_FAULT_PWRITE_AT=$at ZR_FAULT_NAME=p ZR_FAULT_ARMED=$ZR_TMP/armed \
		zr_mount_fault "size=32M,block_size=$2,dirty_expire=1h" "$B" "$M"
	python3 - "$ZR_MNT/p" "$ZR_TMP/p.exp" "$z" <<'PY' || fail "writing p failed"
import os, sys
data = b"\xff" * (1 << 20)
with open(sys.argv[1], "wb") as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())
exp = bytearray(data)
exp[131072:int(sys.argv[3])] = bytes(int(sys.argv[3]) - 131072)
open(sys.argv[2], "wb").write(bytes(exp))
PY
	[ "$(zr_stat blocks_dirty)" = 0 ] && [ "$(zr_stat orig_data_size)" -ge $((1 << 20)) ] ||
		fail "p is not all clean in the tier ($(zr_stat blocks_dirty) dirty blocks, $(zr_stat orig_data_size) bytes held): the case needs it so"
	touch "$ZR_TMP/armed"
	fallocate -p -o 131072 -l $((6 * 131072)) "$ZR_MNT/p" 2>/dev/null &&
		fail "the punch of p succeeded though its write of zeros failed"
	rm -f "$ZR_TMP/armed"
	cp "$ZR_MNT/p" "$ZR_TMP/p.before" || fail "reading p failed"
	zr_ctl drop_clean
	zr_drop_kcache
	cmp "$ZR_TMP/p.before" "$ZR_MNT/p" ||
		fail "p reads otherwise once the tier drops its clean blocks: the tier and the disk disagree"
	cmp "$ZR_TMP/p.exp" "$ZR_MNT/p" ||
		fail "p is not zeros up to byte $z and 0xff after it"
	zr_umount
	cmp "$ZR_TMP/p.exp" "$B/p" || fail "backing p is not what the mount read"
}
if zr_stats_on; then
	punch_enospc 131072 128k
	punch_enospc 4096 4k
fi

if zr_stats_on; then
	say "a 1 GiB punch with 4 KiB blocks and a 1 MiB budget"
	rm -f "$B/f" "$B/g" "$B/h" "$B/p"
	mount_nopunch "size=1m,block_size=4k,dirty_expire=1h"
	head -c $((1 << 20)) /dev/urandom >"$ZR_TMP/head"
	cp "$ZR_TMP/head" "$ZR_MNT/big" && truncate -s 1G "$ZR_MNT/big" && sync "$ZR_MNT/big" ||
		fail "making the 1 GiB file failed"
	fallocate -p -o 4096 -l $(((1 << 30) - 4096)) "$ZR_MNT/big" || fail "the 1 GiB punch failed"
	budget=$(zr_stat budget) max=$(zr_stat mem_used_max)
	say "mem_used_max $max, budget $budget"
	[ "$max" -le $((budget + 4 * 4096)) ] ||
		fail "mem_used_max $max: the punch took the tier past its budget $budget"
	[ "$(stat -c %s "$ZR_MNT/big")" = $((1 << 30)) ] || fail "the punch changed the size"
	head -c 4096 "$ZR_TMP/head" | cmp - <(head -c 4096 "$ZR_MNT/big") || fail "the first block changed"
	zr_drop_kcache
	[ "$(tail -c +4097 "$ZR_MNT/big" | head -c $((8 << 20)) | tr -d '\0' | wc -c)" = 0 ] ||
		fail "the punched range is not zeros"
	zr_umount
	[ "$(stat -c %s "$B/big")" = $((1 << 30)) ] || fail "backing big has size $(stat -c %s "$B/big")"
fi
