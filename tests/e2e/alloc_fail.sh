#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# alloc_fail: truncate while the compressed pool cannot allocate (the
# daemon's fault hook: ZRAMFS_FAULTS=1 and fail_alloc=N in .zramfs/control).
# A shrink must store the last block with its tail zeroed; when the pool
# refuses, the block's part before the end goes to the backing file and the
# block leaves RAM, and the truncate succeeds. When the backing file refuses
# that too (full), the truncate fails and changes nothing: the size, every
# byte, and the backing file (it used to be cut first: a failed truncate
# left zeros in the file and a backing file of neither size). A grow needs
# no allocation. A punch hole whose edge blocks the pool refuses fails
# with ENOSPC and changes nothing, in RAM or on disk (it used to punch the
# backing file first: clean blocks in RAM kept the old data, and read as
# zeros once dropped). Each case is checked through the mount and, after
# the unmount, in the backing directory.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the fault hook is the daemon's"
zr_stats_on || zr_skip "needs the .zramfs control directory"

M=$ZR_TMP/mnt B=$ZR_TMP/backing
mkdir -p "$M"
zr_mount_tmpfs "$B" 4m
head -c 150000 /dev/urandom | base64 -w 100 >"$ZR_TMP/text"
head -c 200000 "$ZR_TMP/text" >"$ZR_TMP/src"
ctl() { echo "$1" >"$ZR_MNT/.zramfs/control"; }

ZRAMFS_FAULTS=1 zr_mount "dirty_expire=1h,block_size=64k,seq_cutoff=0" "$B" "$M"
M=$ZR_MNT
cp "$ZR_TMP/src" "$M/a"
cp "$ZR_TMP/src" "$M/b"
head -c 100000 "$ZR_TMP/src" >"$M/c"
[ "$(zr_stat blocks_dirty)" -ge 9 ] || fail "only $(zr_stat blocks_dirty) dirty blocks: the case is not tested"
ctl "fail_alloc=bogus" 2>/dev/null && fail "fail_alloc=bogus was taken"

say "the pool refuses: a shrink writes the last block's head to the backing file"
before=$(zr_stat bytes_written_backing)
ctl "fail_alloc=0"
truncate -s 70000 "$M/a" || fail "truncate of a to 70000 failed while the pool refuses"
ctl "fail_alloc=-1"
wrote=$(($(zr_stat bytes_written_backing) - before))
[ "$wrote" = $((70000 - 65536)) ] || fail "the truncate wrote $wrote bytes to the backing file, want the head of its last block, $((70000 - 65536))"
[ "$(stat -c %s "$M/a")" = 70000 ] || fail "a is $(stat -c %s "$M/a") bytes, want 70000"
truncate -s 100000 "$M/a" || fail "truncate of a back to 100000 failed"
zr_drop_kcache
{ head -c 70000 "$ZR_TMP/src"; head -c 30000 /dev/zero; } >"$ZR_TMP/a.want"
cmp "$ZR_TMP/a.want" "$M/a" || fail "a after the shrink and the grow is not the data with zeros past 70000"

say "the pool refuses the edges of a hole: the punch fails, nothing changes"
cp "$ZR_TMP/src" "$M/d"
sync "$M/d"	# written back, clean copies in RAM: the old code punched the disk under them
[ "$(stat -c %s "$B/d")" = 200000 ] || fail "d is not in the backing file after its fsync"
zr_drop_kcache
ctl "fail_alloc=0"
fallocate -p -o 30000 -l 100000 "$M/d" 2>"$ZR_TMP/err" && fail "a punch succeeded while the pool refuses its edge blocks"
grep -q "No space left on device" "$ZR_TMP/err" || fail "the punch failed with: $(cat "$ZR_TMP/err")"
ctl "fail_alloc=-1"
zr_drop_kcache
cmp "$ZR_TMP/src" "$M/d" || fail "d changed in a punch that failed"
ctl "drop_clean"
zr_drop_kcache
cmp "$ZR_TMP/src" "$M/d" || fail "d read from the disk differs after a punch that failed"
fallocate -p -o 30000 -l 100000 "$M/d" || fail "a punch failed with room in the pool"
{ head -c 30000 "$ZR_TMP/src"; head -c 100000 /dev/zero; tail -c +130001 "$ZR_TMP/src"; } >"$ZR_TMP/d.want"
zr_drop_kcache
cmp "$ZR_TMP/d.want" "$M/d" || fail "d after the punch is not the data with a hole at 30000+100000"

say "the pool and the backing filesystem refuse: the truncate fails, nothing changes"
head -c 8m /dev/zero >"$B/filler" 2>/dev/null || true	# fills the tmpfs (ENOSPC)
ctl "fail_alloc=0"
truncate -s 70000 "$M/b" 2>"$ZR_TMP/err" && fail "truncate of b succeeded with the pool and the disk full"
grep -q "No space left on device" "$ZR_TMP/err" || fail "truncate of b failed with: $(cat "$ZR_TMP/err")"
truncate -s 120000 "$M/c" || fail "a grow of c failed while the pool refuses"
ctl "fail_alloc=-1"
[ "$(stat -c %s "$M/b")" = 200000 ] || fail "b is $(stat -c %s "$M/b") bytes after the failed truncate, want 200000"
[ "$(stat -c %s "$B/b")" = 0 ] || fail "the backing file of b is $(stat -c %s "$B/b") bytes after the failed truncate, want 0 (nothing written back)"
zr_drop_kcache
cmp "$ZR_TMP/src" "$M/b" || fail "b changed in a truncate that failed"
{ head -c 100000 "$ZR_TMP/src"; head -c 20000 /dev/zero; } >"$ZR_TMP/c.want"
cmp "$ZR_TMP/c.want" "$M/c" || fail "c after the grow is not the data with zeros past 100000"

say "room again: everything reaches the backing directory at unmount"
rm "$B/filler"
zr_umount
cmp "$ZR_TMP/a.want" "$B/a" || fail "backing a is not the data with zeros past 70000"
cmp "$ZR_TMP/src" "$B/b" || fail "backing b is not the data written"
cmp "$ZR_TMP/c.want" "$B/c" || fail "backing c is not the data with zeros past 100000"
cmp "$ZR_TMP/d.want" "$B/d" || fail "backing d is not the data with its hole"

say "without ZRAMFS_FAULTS the hook is refused"
zr_mount "" "$B" "$M"
ctl "fail_alloc=0" 2>/dev/null && fail "fail_alloc=0 was taken by a daemon started without ZRAMFS_FAULTS=1"
zr_umount
say "ok"
