#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# many_files: 30,000 files in three directories are created (each with a
# little data), listed, stat'ed, read, survive a remount, and are removed.
# The open-file limit here is 20,000, so a daemon that keeps one descriptor
# per inode fails; its descriptor count must stay far below (< 5000).
# The slowest test: about 35 s here (file creation costs ~0.4 ms each).
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=240
zr_init

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
NDIR=3 PER=10000 TOTAL=30000 MAXFD=5000
zr_mount "size=64M" "$B" "$M"
M=$ZR_MNT

# fds WHEN: the daemon's open descriptors must stay under MAXFD.
fds() {
	zr_real || return 0
	local n
	n=$(zr_fd_count "$ZR_PID")
	say "daemon has $n open descriptors ($1)"
	[ "$n" -lt "$MAXFD" ] || fail "daemon holds $n descriptors ($1), limit for this test $MAXFD"
}

say "creating $TOTAL files"
for d in $(seq 1 $NDIR); do
	mkdir "$M/d$d"
	for ((i = 0; i < PER; i++)); do
		echo "file $d/$i" >"$M/d$d/f$i" || fail "creating d$d/f$i failed"
	done
done
fds "after creating"

say "listing"
for d in $(seq 1 $NDIR); do
	n=$(ls -f "$M/d$d" | grep -vc '^\.\.\?$')
	[ "$n" = "$PER" ] || fail "d$d lists $n entries, expected $PER"
done
n=$(find "$M" -type f -name 'f*' | wc -l)
[ "$n" = "$TOTAL" ] || fail "find counts $n files, expected $TOTAL"
fds "after find"

say "stat and read every file"
n=$(find "$M" -type f -name 'f*' -printf '%s\n' | awk '$1 > 0' | wc -l)
[ "$n" = "$TOTAL" ] || fail "$((TOTAL - n)) files are empty"
zr_drop_kcache
(cd "$M" && find . -type f -name 'f*' -print0 | xargs -0 cat) >"$ZR_TMP/all"
[ "$(wc -l <"$ZR_TMP/all")" = "$TOTAL" ] || fail "reading all files gave $(wc -l <"$ZR_TMP/all") lines"
[ "$(sort -u "$ZR_TMP/all" | wc -l)" = "$TOTAL" ] || fail "file contents are not all distinct"
[ "$(cat "$M/d2/f1234")" = "file 2/1234" ] || fail "d2/f1234 holds '$(cat "$M/d2/f1234")'"
fds "after reading every file"
if zr_stats_on; then
	say "stats: files $(zr_stat files)"
fi
zr_umount

n=$(find "$B" -type f -name 'f*' | wc -l)
[ "$n" = "$TOTAL" ] || fail "backing directory has $n files after unmount, expected $TOTAL"
[ "$(cat "$B/d3/f9999")" = "file 3/9999" ] || fail "backing d3/f9999 wrong"

zr_mount "size=64M" "$B" "$M"
M=$ZR_MNT
n=$(find "$M" -type f -name 'f*' | wc -l)
[ "$n" = "$TOTAL" ] || fail "$n files after remount, expected $TOTAL"
fds "after remount and find"
say "removing"
rm -rf "$M/d1" "$M/d2" "$M/d3" || fail "rm -rf failed"
n=$(find "$M" -mindepth 1 | wc -l)
[ "$n" = 0 ] || fail "$n entries left after rm -rf"
fds "after removing"
zr_umount
n=$(find "$B" -mindepth 1 | wc -l)
[ "$n" = 0 ] || fail "backing directory has $n entries left after removal"
