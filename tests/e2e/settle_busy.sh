#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# settle_busy: blocks that writers stored to be compressed later are
# compressed even when requests never pause for the 50 ms the fill thread
# waits for. A reader of .zramfs/stats every 20 ms (a monitor) keeps the
# requests going; small files of text fill more than half the share of the
# budget that pending blocks may take (an eighth of size=16m), and they
# must all be compressed within 5 s of the last write, with the hot codec,
# by the writeback thread's forced slices (its idle pass would take them
# only at its second sweep, 10 s after the mount, with the cold codec).
# Then they read back right, and the fill thread, with nothing left to
# do, wakes about once a second (not every 50 ms), but at once for a
# writer's pending block.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=90
zr_init
zr_need_daemon "the daemon's fill thread and statistics"
zr_stats_on || zr_skip "needs the tier's statistics; ZR_E2E_NOSTATS=1"
zr_need_tool cat cmp head xargs python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
find /usr/include -type f -name '*.h' -readable 2>/dev/null | LC_ALL=C sort >"$ZR_TMP/list"
xargs -r cat <"$ZR_TMP/list" 2>/dev/null | head -c $((40 << 10)) >"$ZR_TMP/small" || true
[ "$(stat -c %s "$ZR_TMP/small")" = $((40 << 10)) ] ||
	zr_skip "too little text under /usr/include (install libc6-dev)"

zr_mount "size=16m,dirty_expire=1h" "$B" "$M"
M=$ZR_MNT
t0=$(date +%s%N)

# the monitor: a read of the statistics every 20 ms (one process, no fork
# between reads), for 60 s at most (it ends by itself should this script
# die); stopped below
python3 - "$M/.zramfs/stats" <<'PY' &
import sys, time
end = time.monotonic() + 60
while time.monotonic() < end:
    try:
        with open(sys.argv[1]) as f:
            f.read()
    except OSError:
        pass
    time.sleep(0.02)
PY
mon=$!
stop_monitor() {
	kill "$mon" 2>/dev/null || true
	wait "$mon" 2>/dev/null || true
}

# 26 blocks of 40 KiB are more than half of the 2 MiB share: files are
# written 10 at a time until that many are pending (a forced slice may
# come in the middle of the writes and leave fewer)
say "files of 40 KiB of text, written while the monitor reads"
n=0 p=0
while [ "$p" -lt 26 ]; do
	[ "$n" -lt 200 ] || { stop_monitor; fail "only $p blocks pending after $n files"; }
	for i in $(seq $((n + 1)) $((n + 10))); do
		cp "$ZR_TMP/small" "$M/small$i" || { stop_monitor; fail "cp small$i failed"; }
	done
	n=$((n + 10))
	p=$(zr_stat blocks_pending)
done
t1=$(date +%s%N)
say "$p blocks pending compression after $n files ($(((t1 - t0) / 1000000)) ms after the mount)"

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
	fail "$cold blocks went cold: the idle pass compressed them, not a forced slice"

for i in $(seq "$n"); do
	cmp "$ZR_TMP/small" "$M/small$i" || fail "small$i differs once compressed"
done

say "with nothing queued or pending, the fill thread wakes once a second"
pid=$(zr_stat pid)
fill=
for t in /proc/"$pid"/task/*; do
	[ "$(cat "$t/comm" 2>/dev/null)" = zramfs-fill ] && fill=$t
done
[ -n "$fill" ] || fail "no thread named zramfs-fill in daemon $pid"
sleep 1.1	# (the wait it was in when the last block settled)
w0=$(awk '$1 == "voluntary_ctxt_switches:" { print $2 }' "$fill/status")
sleep 3
w1=$(awk '$1 == "voluntary_ctxt_switches:" { print $2 }' "$fill/status")
say "$((w1 - w0)) wakeups in 3 s"
[ $((w1 - w0)) -le 6 ] || fail "the idle fill thread woke $((w1 - w0)) times in 3 s"

# a writer's pending block wakes it: settling starts once requests pause
# for 50 ms, not when its idle second ends (0.5 s later on average)
say "a small file written to an idle mount is compressed within 0.45 s (median of 5)"
times=()
for k in 1 2 3 4 5; do
	sleep 1.2	# (into its idle wait)
	cp "$ZR_TMP/small" "$M/idle$k" || fail "cp idle$k failed"
	s0=$(date +%s%N)
	while [ "$(zr_stat blocks_pending)" != 0 ]; do
		[ $(($(date +%s%N) - s0)) -lt 5000000000 ] || fail "idle$k still pending after 5 s"
		sleep 0.1	# (a read of the statistics is a request too)
	done
	times+=($((($(date +%s%N) - s0) / 1000000)))
done
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
say "compressed after ${times[*]} ms; median $median"
[ "$median" -le 450 ] || fail "a small file waited $median ms (median) to be compressed"
zr_umount
for i in $(seq "$n"); do
	cmp "$ZR_TMP/small" "$B/small$i" || fail "small$i differs in the backing directory"
done
say "ok"
