#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# cpu_latency: while requests come in bursts the daemon holds a PM QoS CPU
# latency request (/dev/cpu_dma_latency) of cpu_latency µs, and drops it
# half a second after the last burst; a light load never raises it;
# cpu_latency=off never asks.
#
# Other mounts (tests running in parallel) may hold requests of their own,
# so the machine-wide value is only checked from above: while our mount is
# busy it must be at most what we asked.  That the request is dropped when
# idle, and raised again by the next burst, is read from the daemon's own
# counters (a stats read is a few requests, not a burst).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the latency request is the daemon's"
zr_stats_on || zr_skip "needs the .zramfs control directory"
[ -r /dev/cpu_dma_latency ] && [ -w /dev/cpu_dma_latency ] ||
	zr_skip "no writable /dev/cpu_dma_latency (not root, or a container)"

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"

# system_latency: the machine-wide CPU latency limit, µs
system_latency() { od -An -t d4 -N4 /dev/cpu_dma_latency | tr -d ' '; }

# busy: a burst of small-file requests on the mount
busy() {
	local i
	mkdir -p "$ZR_MNT/burst"
	for i in $(seq 200); do echo "$i" >"$ZR_MNT/burst/f$i"; done
	rm -rf "$ZR_MNT/burst"
}

for want in 0 20; do
	say "cpu_latency=$want: held while busy, dropped when idle"
	zr_mount "cpu_latency=$want" "$B" "$M"
	[ "$(awk '$1 == "cpu_latency" { print $2 }' "$ZR_MNT/.zramfs/config")" = "$want" ] ||
		fail "config does not show cpu_latency $want"
	busy
	lat=$(system_latency)
	[ "$lat" -le "$want" ] || fail "the machine-wide latency limit is $lat µs while the mount is busy, want <= $want"
	[ "$(zr_stat cpu_latency_held)" = 1 ] || fail "cpu_latency_held is not 1 right after requests"
	r1=$(zr_stat cpu_latency_raised)
	[ "$r1" -ge 1 ] || fail "cpu_latency_raised is $r1 after requests"
	r2=$(zr_stat cpu_latency_raised)
	[ "$r2" = "$r1" ] || fail "the request was raised again between two stats reads ($r1 -> $r2): it was not held"
	sleep 1.5
	echo light >"$ZR_MNT/light"
	[ "$(zr_stat cpu_latency_held)" = 0 ] || fail "the request is still held 1.5 s after the last burst"
	r3=$(zr_stat cpu_latency_raised)
	[ "$r3" = "$r2" ] || fail "a light load raised the request ($r2 -> $r3)"
	busy
	r4=$(zr_stat cpu_latency_raised)
	[ "$r4" = $((r3 + 1)) ] || fail "cpu_latency_raised went $r3 -> $r4 over a new burst, want one more"
	[ "$(zr_stat cpu_latency_held)" = 1 ] || fail "the request is not held after a new burst"
	zr_umount
done

say "cpu_latency=off asks for nothing"
zr_mount "cpu_latency=off" "$B" "$M"
busy
[ "$(awk '$1 == "cpu_latency" { print $2 }' "$ZR_MNT/.zramfs/config")" = off ] ||
	fail "config does not show cpu_latency off"
[ "$(zr_stat cpu_latency_raised)" = 0 ] || fail "cpu_latency=off raised the request"
[ "$(zr_stat cpu_latency_held)" = 0 ] || fail "cpu_latency=off holds the request"
zr_umount
say "ok"
