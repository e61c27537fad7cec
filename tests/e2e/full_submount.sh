#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# full_submount: a filesystem mounted inside the backing directory (here a
# 1 MiB tmpfs at sub/) fills up. Two files there whose writeback it refuses
# with ENOSPC make a reclaim pass pass over the files on that filesystem,
# not over every file: a writer in the rest of the tree, which needs room
# in a full tier, still gets it by the writeback of its own blocks. It used
# to take two refused files for a full backing directory, and that writer
# got ENOSPC at once, its data dropped by the kernel (helper-59). Nothing of
# sub/ is lost: once its tmpfs grows, it is written back.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "reclaim is the daemon's"
zr_need_root "mounts a tmpfs"

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
zr_mount_tmpfs "$B/sub" 1m
# (seq_cutoff=0: the big file goes through the tier, not around it)
zr_mount "size=16M,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
for f in a b; do
	head -c $((3 << 20)) /dev/urandom >"$ZR_TMP/$f"
	cp "$ZR_TMP/$f" "$M/sub/$f" || fail "cannot write sub/$f into RAM"
done
head -c 40960000 /dev/urandom >"$ZR_TMP/c"

# (400 files of 100 KiB: no stream, which the tier would write
# through to the backing file when tight, but files that need room)
say "400 files of 100 KiB into a 16 MiB tier holding 6 MiB that sub/ refuses"
mkdir "$M/d"
for i in $(seq 0 399); do
	dd if="$ZR_TMP/c" of="$M/d/f$i" bs=100k skip=$i count=1 status=none 2>"$ZR_TMP/err" ||
		fail "the write of d/f$i failed: $(cat "$ZR_TMP/err")"
done
say "writeback_errors $(zr_stat writeback_errors), enospc $(zr_stat enospc)"
[ "$(zr_stat writeback_errors)" -gt 0 ] || fail "sub/ refused nothing: is it full?"
[ "$(zr_stat enospc)" = 0 ] || fail "writers were refused room"
zr_drop_kcache
for i in $(seq 0 399); do
	cmp -s <(tail -c +$((i * 102400 + 1)) "$ZR_TMP/c" | head -c 102400) "$M/d/f$i" ||
		fail "d/f$i reads back wrong"
done
for f in a b; do
	cmp "$ZR_TMP/$f" "$M/sub/$f" || fail "sub/$f reads back wrong"
done

say "sub/ grows: its files are written back"
mount -o remount,size=16m "$B/sub" || fail "cannot grow the tmpfs"
zr_ctl writeback all
zr_umount
for f in a b; do
	cmp "$ZR_TMP/$f" "$B/sub/$f" || fail "the backing file of sub/$f is not whole"
done
cat $(for i in $(seq 0 399); do echo "$B/d/f$i"; done) | cmp - "$ZR_TMP/c" ||
	fail "the backing files of d/ are not whole"
say "ok"
