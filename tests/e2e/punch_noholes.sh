#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# punch_noholes: fallocate PUNCH_HOLE on a backing filesystem that cannot
# punch holes (NFSv3, vfat), simulated with zr_fault.so (ZR_FAULT_NOPUNCH:
# ext2, which this test once used, punches holes on current kernels). The
# range reads as zeros through the mount, after the tier drops its clean
# blocks, and in the backing file after unmount, for data on disk and for
# dirty data; a punch whose extension of the backing file fails changes
# nothing (it once dropped the dirty blocks that held the file's size
# first); and a 1 GiB punch in 4 KiB blocks stays within a 1 MiB budget
# (as dirty zero blocks in the tier it took 6 MiB of map).
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
		LD_PRELOAD=$FAULT ASAN_OPTIONS=verify_asan_link_order=0 \
		zr_mount "$1" "$B" "$M"
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

if zr_stats_on; then
	say "a 1 GiB punch with 4 KiB blocks and a 1 MiB budget"
	rm -f "$B/f" "$B/g" "$B/h"
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
