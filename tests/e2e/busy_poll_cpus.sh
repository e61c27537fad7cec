#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# busy_poll_cpus: during a burst the leader reads /dev/fuse in a loop only
# while the CPUs have time to spare, as its loop would take time from
# other work otherwise.  One client alone (a loop of listxattr calls, a
# round trip each) leaves the CPUs idle or polling much of the time: the
# leader polls (busy_poll_ms grows).  With a CPU hog per CPU beside the
# same client, a look at /proc/stat (one every 0.1 s at most) finds the
# CPUs busy: busy_poll_stops counts it and the polling stops
# (busy_poll_ms grows by little), and the leader waits for each request in
# a read(2) that blocks rather than in poll(2) and a read after it
# (busy_poll_sleeps grows by little).  Once the hogs are gone, it starts again.
# (The phases without hogs are tried five times, as other work on the
# machine may keep the CPUs busy for a while; the one with hogs is not.
# The hogs run for about 2 s, which may slow tests run beside this one.)
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "busy polling is the daemon's"
zr_stats_on || zr_skip "needs the .zramfs control directory"
zr_need_tool python3 nproc
[ -r /proc/stat ] || zr_skip "no /proc/stat to look at the CPUs with"
[ "$(nproc)" -ge 2 ] ||
	zr_skip "one CPU: the client needs it while the leader would poll, so the leader seldom polls"

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
zr_mount "" "$B" "$M"
[ "$(zr_config busy_poll)" = 20 ] || fail "config shows busy_poll '$(zr_config busy_poll)', want 20"
echo x >"$ZR_MNT/f"

# client SECS: listxattr on one file in a loop for SECS seconds (each one a
# LISTXATTR request: the kernel does not cache the answer)
client() {
	python3 - "$ZR_MNT/f" "$1" <<'PY'
import os, sys, time
end = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < end:
    for _ in range(100):
        os.listxattr(sys.argv[1])
    n += 100
print(n)
PY
}

# polled SECS: runs the client for SECS seconds; sets POLLED to how many
# ms the leader polled meanwhile and REQS to the requests the client made
polled() {
	local p0 p1
	p0=$(zr_stat busy_poll_ms)
	REQS=$(client "$1") || fail "the client failed"
	p1=$(zr_stat busy_poll_ms)
	POLLED=$((p1 - p0))
}

# polls_alone WHAT: runs the client alone until the leader polled at least
# 75 ms (5%) of 1.5 s, five times at most (other work on the machine, a
# parallel `make check`, may keep the CPUs busy for a while); sets ALONE
polls_alone() {
	local k
	client 0.5 >/dev/null || fail "the client failed"	# (into the burst)
	for k in 1 2 3 4 5; do
		polled 1.5
		ALONE=$POLLED
		say "  ${ALONE} ms of polling in 1.5 s ($REQS requests)"
		[ "$ALONE" -lt 75 ] || return 0
	done
	fail "$1: the leader polled ${ALONE} ms in 1.5 s, want >= 75 (5%)"
}

say "one client alone: the leader polls"
polls_alone "one client alone"
alone=$ALONE

say "a CPU hog on every CPU beside it: the polling stops"
ncpu=$(nproc)
zr_hogs_start "$ncpu"
client 0.5 >/dev/null || fail "the client failed"	# (a look or more meanwhile)
sleeps=$(zr_stat busy_poll_sleeps)
polled 1.5
busy=$POLLED
sleeps=$(($(zr_stat busy_poll_sleeps) - sleeps))
stops=$(zr_stat busy_poll_stops)
say "  ${busy} ms of polling in 1.5 s ($REQS requests, $sleeps sleeps in poll); busy_poll_stops $stops"
[ $((sleeps * 10)) -le "$REQS" ] ||
	fail "with $ncpu CPU hogs the leader slept in poll(2) $sleeps times for $REQS requests, want at most a tenth (a blocking read instead)"
[ "$stops" -ge 1 ] || fail "no look found the CPUs busy with $ncpu hogs running"
[ "$busy" -le 15 ] && [ $((busy * 5)) -le "$alone" ] ||
	fail "with $ncpu CPU hogs the leader polled ${busy} ms in 1.5 s (alone: ${alone}), want <= 15 and <= a fifth"
zr_hogs_stop

say "the hogs gone: the polling starts again"
polls_alone "after the hogs"
zr_umount
say "ok"
