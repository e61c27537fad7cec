#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# budget_many_inodes: a 1 MiB budget and 8000 files the kernel still
# remembers. Every file the kernel opened has a record in the daemon
# until the kernel forgets its inode, and reclaim cannot free records;
# when block-less ones counted against the budget, 8000 of them filled
# 1 MiB and a 4 MiB write then failed with ENOSPC on an empty disk. Now
# the write and its fsync succeed and the tier stays within its budget,
# also when every one of 3000 files holds a block.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=120
zr_init

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
zr_mount "size=1m" "$B" "$M"
M=$ZR_MNT

say "creating 8000 empty files"
mkdir "$M/empty"
(cd "$M/empty" && seq 1 8000 | xargs touch) || fail "touch failed"
[ "$(find "$M/empty" -type f | wc -l)" = 8000 ] || fail "not 8000 files"

say "writing 4 MiB with fsync"
find /usr/bin -type f -size +64k | LC_ALL=C sort | xargs -r cat 2>/dev/null |
	head -c $((4 << 20)) >"$ZR_TMP/big.ref" || true
[ "$(stat -c %s "$ZR_TMP/big.ref")" = $((4 << 20)) ] || fail "could not gather 4 MiB from /usr/bin"
dd if="$ZR_TMP/big.ref" of="$M/big" bs=64k conv=fsync status=none ||
	fail "a 4 MiB write with 8000 open-and-closed files in the kernel's cache failed"

say "3000 files of 3 KiB each, then fsync of each"
mkdir "$M/small"
for i in $(seq 1 3000); do
	dd if="$ZR_TMP/big.ref" of="$M/small/$i" bs=3k skip="$i" count=1 status=none ||
		fail "writing small/$i failed"
done
sync -f "$M/small/1" || fail "syncfs failed"

if zr_stats_on; then
	budget=$(zr_stat budget) bs=$(zr_config block_size) max=$(zr_stat mem_used_max)
	say "mem_used_max $max, budget $budget, block_size $bs, enospc $(zr_stat enospc)"
	[ "$max" -le $((budget + 4 * bs)) ] ||
		fail "mem_used_max $max exceeds the budget $budget by more than 4 blocks"
	[ "$(zr_stat enospc)" = 0 ] || fail "writers got ENOSPC $(zr_stat enospc) times"
fi

zr_drop_kcache
cmp "$ZR_TMP/big.ref" "$M/big" || fail "big does not read back"
for i in 1 777 1500 2999 3000; do
	dd if="$ZR_TMP/big.ref" bs=3k skip="$i" count=1 status=none | cmp - "$M/small/$i" ||
		fail "small/$i does not read back"
done
zr_umount
cmp "$ZR_TMP/big.ref" "$B/big" || fail "big in the backing directory differs"
[ "$(find "$B/empty" -type f | wc -l)" = 8000 ] || fail "the backing directory lacks the empty files"
say "ok"
