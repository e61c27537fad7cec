#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# sweep_forgotten: the daemon keeps an inode the kernel forgot while its
# blocks are in the tier, and frees it once they have left. 2000 files are
# written, the kernel forgets them (drop_caches), their blocks are written
# back and dropped (`writeback all`, `drop_clean`): within 12 s (the
# writeback thread's sweep runs every 5 s) the tier's file records
# (`files`) must be gone. The sweep walks only the inodes kept so, not the
# whole table; a kept inode it never saw would stay for ever.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=90
zr_init
zr_need_daemon "the daemon's inode table and statistics"
zr_stats_on || zr_skip "needs the tier's statistics; ZR_E2E_NOSTATS=1"
zr_can_drop_kcache || zr_skip "needs /proc/sys/vm/drop_caches (root) to make the kernel forget inodes"

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
zr_mount "dirty_expire=1h" "$B" "$M"
M=$ZR_MNT

say "2000 small files, kept in the tier"
mkdir "$M/d"
(cd "$M/d" && for i in $(seq 2000); do echo "file $i" >"f$i"; done) || fail "writing the files failed"
f0=$(zr_stat files)
say "files $f0"
[ "$f0" -ge 2000 ] || fail "only $f0 file records for 2000 files written"

say "the kernel forgets them; their blocks are written back and dropped"
zr_drop_kcache
zr_ctl "writeback all"
zr_ctl "drop_clean"
f=$f0
for i in $(seq 120); do
	f=$(zr_stat files)
	[ "$f" -lt 100 ] && break
	sleep 0.1
done
say "files $f"
[ "$f" -lt 100 ] || fail "$f file records left 12 s after their blocks left the tier"

say "the files read back (looked up again, from the backing directory)"
for i in 1 777 2000; do
	[ "$(cat "$M/d/f$i")" = "file $i" ] || fail "f$i reads '$(cat "$M/d/f$i")'"
done
zr_umount
[ "$(ls "$B/d" | wc -l)" = 2000 ] || fail "$(ls "$B/d" | wc -l) files in the backing directory"
say "ok"
