#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# settle_busy: blocks that writers stored to be compressed later are
# compressed even when requests never pause for the 50 ms the fill thread
# waits for. A reader of .zramfs/stats every 20 ms (a monitor) keeps the
# requests going; 40 small files of text fill more than half the share of
# the budget that pending blocks may take (an eighth of size=16m), and they
# must all be compressed within 5 s of the last write, by the fill thread
# with the hot codec (the writeback thread's idle pass would take them
# only at its second sweep, 10 s after the mount, with the cold codec).
# Then they read back right.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=90
zr_init
zr_need_daemon "the daemon's fill thread and statistics"
zr_stats_on || zr_skip "needs the tier's statistics; ZR_E2E_NOSTATS=1"
zr_need_tool cat cmp head xargs

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
find /usr/include -type f -name '*.h' -readable 2>/dev/null | LC_ALL=C sort >"$ZR_TMP/list"
xargs -r cat <"$ZR_TMP/list" 2>/dev/null | head -c $((40 << 10)) >"$ZR_TMP/small" || true
[ "$(stat -c %s "$ZR_TMP/small")" = $((40 << 10)) ] ||
	zr_skip "too little text under /usr/include (install libc6-dev)"

zr_mount "size=16m,dirty_expire=1h" "$B" "$M"
M=$ZR_MNT
t0=$(date +%s%N)

# the monitor: a read of the statistics every 20 ms, for 30 s at most (it
# ends by itself should this script die); stopped below
(
	for i in $(seq 1500); do
		cat "$M/.zramfs/stats" >/dev/null 2>&1 || true
		sleep 0.02
	done
) &
mon=$!
stop_monitor() {
	kill "$mon" 2>/dev/null || true
	wait "$mon" 2>/dev/null || true
}

say "40 files of 40 KiB of text, written while the monitor reads"
for i in $(seq 40); do
	cp "$ZR_TMP/small" "$M/small$i" || { stop_monitor; fail "cp small$i failed"; }
done
t1=$(date +%s%N)
p=$(zr_stat blocks_pending)
say "$p blocks pending compression after the writes ($(((t1 - t0) / 1000000)) ms after the mount)"
# 26 blocks of 40 KiB are more than half of the 2 MiB share
[ "$p" -ge 26 ] || { stop_monitor; fail "only $p blocks pending after the writes: nothing to test"; }

settled=
for i in $(seq 50); do
	if [ "$(zr_stat blocks_pending)" = 0 ]; then
		settled=$(($(date +%s%N) - t1))
		break
	fi
	sleep 0.1
done
cold=$(zr_stat blocks_cold)
kill -0 "$mon" 2>/dev/null || fail "the monitor stopped early"
stop_monitor
[ -n "$settled" ] ||
	fail "$(zr_stat blocks_pending) blocks still pending 5 s after the writes, with requests every 20 ms"
say "all compressed $((settled / 1000000)) ms after the writes; blocks_cold $cold"
[ "$cold" = 0 ] ||
	fail "$cold blocks went cold: the idle pass compressed them, not the fill thread"

for i in $(seq 40); do
	cmp "$ZR_TMP/small" "$M/small$i" || fail "small$i differs once compressed"
done
zr_umount
for i in $(seq 40); do
	cmp "$ZR_TMP/small" "$B/small$i" || fail "small$i differs in the backing directory"
done
say "ok"
