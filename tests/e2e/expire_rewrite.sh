#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# expire_rewrite: a file rewritten more often than dirty_expire is still
# written back by age. A log gets a line every 0.2 s, each append an
# open, write and close (so each reaches the daemon at once, and rewrites
# the file's only block); with dirty_expire=1s its first lines must be in
# the backing file while the appends go on, at most 3 s after the first.
# The file's clock is the time its first block was written since it was
# last clean (as Linux counts an inode's): a rewrite must not restart it.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=60
zr_init
zr_need_daemon "writes back by age"
zr_need_tool stat head

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
zr_mount "dirty_expire=1s" "$B" "$M"
M=$ZR_MNT

say "a line every 0.2 s, for 6 s at most"
seen=
for i in $(seq 30); do
	echo "line $i of the log" >>"$M/log" || fail "append $i failed"
	if [ -z "$seen" ] && [ "$(stat -c %s "$B/log" 2>/dev/null || echo 0)" -gt 0 ]; then
		seen=$i
		break
	fi
	sleep 0.2
done
[ -n "$seen" ] ||
	fail "the backing file was still empty after 30 appends over 6 s with dirty_expire=1s"
say "the backing file had data at append $seen"
[ "$seen" -le 16 ] || fail "the first write-back came only at append $seen (about $((seen / 5)) s)"
[ "$(head -1 "$B/log")" = "line 1 of the log" ] ||
	fail "the backing file's first line is '$(head -1 "$B/log")'"
zr_umount
[ "$(wc -l <"$B/log")" = "$seen" ] || fail "$(wc -l <"$B/log") lines after unmount, $seen written"
say "ok"
