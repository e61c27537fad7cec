#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# idle_buffers: daemon threads give their 1 MiB request buffers back when
# idle.  Six writers of 1 MiB requests fill the buffers of many libfuse
# workers; within a few seconds of idle time the daemon's RSS outside the
# tier (rss_bytes - mem_used_total) must drop by at least 4 MiB (the old
# daemon kept it all: 29 MB outside the tier after four such writers, 5.5 MB
# now) and buffer_trims count it.  Requests after the trim still work: the
# files read back intact; two rounds, so buffers given back fill and go
# back again, and after six readers the RSS outside the tier comes back
# to within 4 MiB of what it was before them (READ replies are built in a
# per-thread buffer given back the same way; the old daemon: +15 MiB.
# Until the trim came to count from a thread's last large request, the
# threads that served this test's own stats reads, every 0.2 s, kept
# theirs: 2-14 MiB above the level before, now 0-1 MiB).
# Six writers keep 7 to 10 threads busy, hence 4 MiB and 4 trims (the old
# daemon gave none back).  (With busy_poll=off threads sleep in read(2)
# and keep their buffers: session.c.)
ZR_TIMEOUT=180
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "measures the daemon's RSS"

head -c $((32 << 20)) /dev/urandom >"$ZR_TMP/rand"
want=$(md5sum <"$ZR_TMP/rand" | cut -d' ' -f1)

# RSS of the daemon outside the tier
outside() { echo $(($(zr_stat rss_bytes) - $(zr_stat mem_used_total))); }

opts=seq_cutoff=0
B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
zr_mount "$opts" "$B" "$M"
M=$ZR_MNT
for round in 1 2; do
	say "round $round: six writers of 1 MiB requests"
	pids=()
	t0=$(zr_stat buffer_trims) busy=0
	for j in 1 2 3 4 5 6; do
		dd if="$ZR_TMP/rand" of="$M/r$round$j" bs=1M conv=fdatasync status=none &
		pids+=($!)
	done
	# the most the buffers took while the writers ran: on a busy machine
	# the first writers end a second or more before the last, and their
	# threads give their buffers back meanwhile (a make -j2 check once
	# saw 4 MiB outside the tier after the writes, and no trim after)
	while kill -0 "${pids[@]}" 2>/dev/null; do
		o=$(outside)
		[ "$o" -gt "$busy" ] && busy=$o
		sleep 0.1
	done
	wait "${pids[@]}" || fail "round $round: a writer failed"
	o=$(outside)
	[ "$o" -gt "$busy" ] && busy=$o
	idle=$busy
	for _ in $(seq 50); do
		sleep 0.2
		idle=$(outside) t1=$(zr_stat buffer_trims)
		[ "$idle" -le $((busy - (4 << 20))) ] && [ "$t1" -ge $((t0 + 4)) ] && break
	done
	say "outside the tier: up to $((busy >> 20)) MiB while the writers ran, $((idle >> 20)) MiB idle; buffer_trims $t0 -> $t1"
	[ "$idle" -le $((busy - (4 << 20))) ] ||
		fail "round $round: RSS outside the tier went from $busy to only $idle bytes in 10 s of idle time"
	[ "$t1" -ge $((t0 + 4)) ] || fail "round $round: buffer_trims moved from $t0 to $t1 only"
	sleep 1.5	# every thread idle by now: the level the reads come back to
	idle=$(outside)
	say "requests after the trim: six readers, cold ($((idle >> 20)) MiB outside the tier before them)"
	cp "$ZR_TMP/rand" "$M/again"
	zr_drop_kcache
	pids=()
	for f in r${round}1 r${round}2 r${round}3 r${round}4 r${round}6 again; do
		( [ "$(dd if="$M/$f" bs=1M status=none | md5sum | cut -d' ' -f1)" = "$want" ] ) &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || fail "round $round: a file read back changed"
	done
	# READs are answered from per-thread buffers given back in the same
	# way (the old daemon's malloc() per READ kept 1 MiB chunks in
	# glibc's arenas: 20-23 MiB outside the tier after four readers,
	# against 7-10 before them)
	busy=$(outside)
	for _ in $(seq 50); do
		sleep 0.2
		rd=$(outside)
		[ "$rd" -le $((idle + (4 << 20))) ] && break
	done
	say "outside the tier: $((busy >> 20)) MiB after the reads, $((rd >> 20)) MiB idle"
	[ "$rd" -le $((idle + (4 << 20))) ] ||
		fail "round $round: RSS outside the tier $rd bytes in 10 s of idle time after the reads, $idle after the writes"
done
zr_umount
say "ok"
