#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# busy_poll: during a burst of requests one daemon thread polls /dev/fuse
# and serves them itself (busy_poll_leads counts them); once the burst is
# over nothing polls (the daemon uses no CPU while idle); busy_poll=off
# never polls.  A request that waits on others must not hang behind the
# poller: lseek(SEEK_DATA) on a file whose dirty pages are still in the
# kernel's cache makes the kernel write them back (WRITE requests that other
# threads serve) before it is answered, and fsync waits on the disk; both
# run here in the middle of a burst, and their results are checked; so does
# SIGTERM, after which the daemon must end and keep what was written.  A
# lone cold read, with many threads started, must be served by few of them.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "busy polling is the daemon's"
zr_stats_on || zr_skip "needs the .zramfs control directory"
zr_need_tool python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"

# burst N: create and remove N small files (about 10 requests each)
burst() {
	local i
	mkdir -p "$ZR_MNT/burst"
	for i in $(seq "$1"); do echo "$i" >"$ZR_MNT/burst/f$i"; done
	rm -rf "$ZR_MNT/burst"
}

# cpu_ticks: user + system clock ticks of the daemon so far
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$(zr_stat pid)/stat"; }

# req_tasks: the /proc task directories of the daemon's request threads
# (not zramfs-wb, -fill and the like)
req_tasks() {
	local t
	for t in /proc/"$(zr_stat pid)"/task/*; do
		case $(cat "$t/comm" 2>/dev/null) in zramfs-*) continue ;; esac
		echo "$t"
	done
}

# req_switches: voluntary context switches of the request threads so far
req_switches() {
	local t n=0 c
	for t in $(req_tasks); do
		c=$(awk '/^voluntary_ctxt_switches:/ { print $2 }' "$t/status" 2>/dev/null)
		n=$((n + ${c:-0}))
	done
	echo "$n"
}

say "default: the burst is served by the poller"
zr_mount "" "$B" "$M"
[ "$(zr_config busy_poll)" = 20 ] || fail "config shows busy_poll '$(zr_config busy_poll)', want 20"
l0=$(zr_stat busy_poll_leads)
burst 500
l1=$(zr_stat busy_poll_leads)
[ $((l1 - l0)) -ge 2000 ] ||
	fail "the poller read $((l1 - l0)) requests of a 500-file burst (about 6500), want >= 2000"

# A cold sequential read (sent as READs of 512 KiB) must be served by few
# threads: the role goes to the thread that parked last, and while as many
# threads as CPUs decompress, the leader serves its READ in its turn and a
# thread coming back from one reads on. Handed round all threads in
# turn (one shared condition variable), 29 threads took turns and ran
# cold in the CPU's caches. First many threads are started (libfuse starts
# one whenever all are busy: parallel fsyncs keep them so). On 2 CPUs the
# 4 busiest did 85-99% of the work, 77-95% with two CPU hogs beside and
# 63% once beside another test (make -j2 check); taken in turn, 32-38%,
# and 53% with the hogs.
say "a cold sequential read is served by few threads"
if ! zr_can_drop_kcache; then
	say "skipped: cannot drop the page cache here (/proc/sys/vm/drop_caches), so no cold read"
else
	zr_umount
	zr_mount "seq_cutoff=0" "$B" "$M"
	head -c $((48 << 20)) /dev/urandom | base64 -w 0 >"$ZR_MNT/cold"	# 64 MiB
	sum0=$(md5sum <"$ZR_MNT/cold")
	head -c $((1 << 20)) /dev/urandom >"$ZR_TMP/rand"	# (zeros would not reach the disk)
	pids=()
	for i in $(seq 24); do
		(for k in 1 2 3; do
			dd if="$ZR_TMP/rand" of="$ZR_MNT/sync$i" bs=64k count=16 conv=fsync status=none
		done) &
		pids+=($!)
	done
	wait "${pids[@]}" || fail "a writer in fsync failed"
	# ns each request thread ran (schedstat), before and after the read
	cpu_ns() {
		local t
		for t in $(req_tasks); do
			echo "${t##*/} $(cut -d' ' -f1 "$t/schedstat" 2>/dev/null)"
		done | sort
	}
	nt=$(cpu_ns | wc -l)
	ncpu=$(nproc)
	top=$(((ncpu < 4 ? ncpu : 4) + 2))
	[ "$nt" -ge $((top + 4)) ] ||
		fail "24 writers in fsync at once left the daemon with $nt request threads, want >= $((top + 4))"
	sleep 1.5	# every thread back and parked
	cpu_ns >"$ZR_TMP/ns0"
	zr_drop_kcache
	[ "$(md5sum <"$ZR_MNT/cold")" = "$sum0" ] || fail "the file reads back changed after a cold read"
	cpu_ns >"$ZR_TMP/ns1"
	share=$(join -a 2 -e 0 -o 0,1.2,2.2 "$ZR_TMP/ns0" "$ZR_TMP/ns1" | awk '{ print $3 - $2 }' | sort -n -r |
		awk -v top="$top" '{ t += $1; if (NR <= top) s += $1 } END { printf "%d", t ? 100 * s / t : 0 }')
	say "  $nt threads; the $top busiest did $share% of the daemon's CPU time in the read"
	[ "$share" -ge 60 ] ||
		fail "the $top busiest of $nt threads did $share% of the work of one cold read, want >= 60%: requests went round the threads"
	rm -f "$ZR_MNT"/sync* "$ZR_MNT/cold"

	# with one CPU (a daemon started under taskset) every large READ is
	# served in the leader's turn: busy_poll_leads counts them
	say "one CPU: a cold read's READs are served in the leader's turn"
	zr_umount
	cpus=$(taskset -cp $$ | awk '{ print $NF }')
	cpu1=${cpus%%[,-]*}
	taskset -cp "$cpu1" $$ >/dev/null || fail "taskset cannot put this shell on CPU $cpu1"
	zr_mount "seq_cutoff=0" "$B" "$M"
	taskset -cp "$cpus" $$ >/dev/null || fail "taskset cannot give this shell CPUs $cpus back"
	head -c $((48 << 20)) /dev/urandom | base64 -w 0 >"$ZR_MNT/cold"	# 128 READs
	sum0=$(md5sum <"$ZR_MNT/cold")
	zr_drop_kcache
	l0=$(zr_stat busy_poll_leads)
	[ "$(md5sum <"$ZR_MNT/cold")" = "$sum0" ] || fail "the file reads back changed after a cold read (one CPU)"
	l1=$(zr_stat busy_poll_leads)
	say "  busy_poll_leads grew by $((l1 - l0))"
	[ $((l1 - l0)) -ge 64 ] ||
		fail "a cold read of 64 MiB on a one-CPU daemon: busy_poll_leads grew by $((l1 - l0)), want >= 64 (its READs served in turn)"
	rm -f "$ZR_MNT/cold"
	sleep 1.5
	w0=$(req_switches)
	sleep 2
	w1=$(req_switches)
	# (a watchdog left running wakes 250-1000 times a second; with the
	# daemon idle its threads woke up to 41 times, beside another test)
	[ $((w1 - w0)) -le 150 ] ||
		fail "after a cold read the idle daemon's request threads woke $((w1 - w0)) times in 2 s: a watchdog still runs"
	zr_umount
	zr_mount "" "$B" "$M"
fi

say "idle after the burst: nothing polls"
sleep 1.5
t0=$(cpu_ticks)
w0=$(req_switches)
sleep 2
t1=$(cpu_ticks)
w1=$(req_switches)
[ $((t1 - t0)) -le 10 ] || fail "the idle daemon used $((t1 - t0)) ticks of CPU in 2 s: still polling"
# (a watchdog left running wakes 250-1000 times a second)
[ $((w1 - w0)) -le 150 ] || fail "the idle daemon's request threads woke $((w1 - w0)) times in 2 s: a watchdog still runs"

say "lseek and fsync in the middle of a burst"
(
	end=$((SECONDS + 5))
	while [ "$SECONDS" -lt "$end" ]; do burst 100; done
) &
bg=$!
sleep 1	# long enough for every idle thread to have parked
timeout 30 python3 - "$ZR_MNT/sparse" <<'EOF' || fail "lseek/fsync during a burst failed or hung"
import os, sys
p = sys.argv[1]
fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
blk = 1 << 20
for i in range(12):
    # data at blocks 0, 2, 4, ...: written just now, still dirty in the kernel
    os.pwrite(fd, bytes([i + 1]) * 4096, 2 * i * blk)
    d = os.lseek(fd, 0, os.SEEK_DATA)
    assert d == 0, "SEEK_DATA from 0 gave %d" % d
    h = os.lseek(fd, 2 * i * blk, os.SEEK_DATA)
    assert h == 2 * i * blk, "SEEK_DATA at block %d gave %d" % (2 * i, h)
    if i % 3 == 0:
        os.fsync(fd)
for i in range(12):
    got = os.pread(fd, 4096, 2 * i * blk)
    assert got == bytes([i + 1]) * 4096, "block %d reads back wrong" % (2 * i)
os.close(fd)
EOF
wait "$bg" || fail "the background burst failed"
l2=$(zr_stat busy_poll_leads)
[ "$l2" -gt "$l1" ] || fail "busy_poll_leads did not grow during the second burst"
zr_umount

say "SIGTERM in the middle of a burst: every thread ends, the data is kept"
# (libfuse cancels its threads at exit: the parked ones wait on a
# condition variable in the daemon, the leader in poll(2))
rm -rf "${B:?}"/*
zr_mount "" "$B" "$M"
head -c $((4 << 20)) /dev/urandom >"$ZR_TMP/keep"
cp "$ZR_TMP/keep" "$ZR_MNT/keep"
(
	end=$((SECONDS + 20))
	while [ "$SECONDS" -lt "$end" ] && mountpoint -q "$M"; do burst 50 2>/dev/null; done
) &
bg=$!
sleep 1
[ "$(zr_stat busy_poll_leads)" -gt 0 ] || fail "the burst before SIGTERM was not served by the poller"
pid=$ZR_PID
kill -s TERM "$pid"
zr_wait_pid "$pid" 60 || fail "daemon did not exit within 60 s of SIGTERM during a burst"
rc=$ZR_WAIT_RC
ZR_PID=
wait "$bg" 2>/dev/null || true	# the burst fails once the mount is gone
[ "$rc" = 0 ] || fail "daemon exited with status $rc after SIGTERM during a burst (expected 0)"
! zr_is_mounted "$M" || fail "$M still mounted after SIGTERM"
cmp -s "$ZR_TMP/keep" "$B/keep" || fail "a file written before SIGTERM is not intact in the backing directory"

say "busy_poll=off never polls"
zr_mount "busy_poll=off" "$B" "$M"
[ "$(zr_config busy_poll)" = 0 ] || fail "config shows busy_poll '$(zr_config busy_poll)', want 0"
burst 300
[ "$(zr_stat busy_poll_leads)" = 0 ] || fail "busy_poll=off: the poller read $(zr_stat busy_poll_leads) requests"
zr_umount
say "ok"
