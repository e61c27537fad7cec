#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# append_two_procs: two processes append lines to one file at the same time,
# each through its own O_APPEND descriptor (`>>`), one write() per line.
# With O_APPEND every write lands at the end: no line may be lost, torn or
# interleaved, and each writer's lines stay in order.  A third phase opens
# and closes the file for every line (`>>` per line) from both processes.
. "$(dirname "$0")/lib.sh"
zr_init

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
N=4000
zr_mount "size=64M" "$B" "$M"
M=$ZR_MNT

# writer TAG FILE: N lines "TAG n padding", lines of varying length; bash's
# echo does one write() per line.
writer() {
	local i pad=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
	for ((i = 1; i <= N; i++)); do
		echo "$1 $i ${pad:0:$((i % 97))} end"
	done >>"$2"
}
writer_reopen() {
	local i
	for ((i = 1; i <= N / 4; i++)); do
		echo "$1 $i reopened end" >>"$2"
	done
}

# verify FILE COUNT WHEN: every line well formed; each tag's numbers 1..COUNT
# in order.
verify() {
	awk -v n="$2" '
		!/^[AB] [0-9]+ x* ?end$/ && !/^[CD] [0-9]+ reopened end$/ {
			print "torn line " NR ": " substr($0, 1, 80); bad = 1; exit 1 }
		{ if ($2 != last[$1] + 1) {
			print "line " NR ": " $1 " " $2 " after " last[$1] + 0; bad = 1; exit 1 }
		  last[$1] = $2 }
		END { if (!bad) for (t in last) if (last[t] != n) {
			print t ": " last[t] " lines, expected " n; exit 1 } }
	' "$1" || fail "appended lines lost, torn or out of order ($3)"
}

say "two writers, $N lines each, O_APPEND descriptors held open"
: >"$M/log"
writer A "$M/log" &
p1=$!
writer B "$M/log" &
p2=$!
wait "$p1" || fail "writer A failed"
wait "$p2" || fail "writer B failed"
[ "$(wc -l <"$M/log")" = $((2 * N)) ] || fail "log has $(wc -l <"$M/log") lines, expected $((2 * N))"
verify "$M/log" "$N" "while mounted"
interleaved=$(awk 'NR > 1 && $1 != prev { n++ } { prev = $1 } END { print n + 0 }' "$M/log")
say "writers alternated $interleaved times"

say "two writers opening the file for every line"
writer_reopen C "$M/log2" &
p1=$!
writer_reopen D "$M/log2" &
p2=$!
wait "$p1" || fail "writer C failed"
wait "$p2" || fail "writer D failed"
verify "$M/log2" $((N / 4)) "reopen, while mounted"

zr_drop_kcache
verify "$M/log" "$N" "after dropping the kernel cache"
zr_umount
verify "$B/log" "$N" "backing file after unmount"
verify "$B/log2" $((N / 4)) "backing file after unmount"
