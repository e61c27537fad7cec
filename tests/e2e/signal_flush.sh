#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# signal_flush: SIGTERM and SIGINT make the daemon write everything back,
# unmount and exit 0; the backing directory then holds every byte.  Data is
# kept dirty (dirty_expire=1h) so only the signal path can have written it.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "signals the daemon"

B=$ZR_TMP/backing M=$ZR_TMP/mnt S=$ZR_TMP/src
mkdir -p "$B" "$M" "$S/dir"
head -c $((12 << 20)) /dev/urandom >"$S/rand"
dd if=/dev/zero of="$S/zeros" bs=1M count=8 status=none
find /usr/include -type f -name '*.h' 2>/dev/null | head -n 400 | xargs -r cat 2>/dev/null |
	head -c $((6 << 20)) >"$S/text" || true
for i in $(seq 1 200); do echo "small $i" >"$S/dir/s$i"; done
zr_sums "$S" >"$ZR_TMP/sums"

for sig in TERM INT; do
	say "SIG$sig"
	rm -rf "${B:?}"/*
	zr_mount "size=128M,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
	cp -a "$S/." "$ZR_MNT/"
	d=$(zr_stat blocks_dirty)
	say "blocks_dirty $d before the signal"
	[ "$d" -gt 0 ] || fail "no dirty blocks before SIG$sig: the test would prove nothing"
	pid=$ZR_PID
	kill -s "$sig" "$pid"
	zr_wait_pid "$pid" 60 || fail "daemon did not exit within 60 s of SIG$sig"
	rc=$ZR_WAIT_RC
	ZR_PID=
	[ "$rc" = 0 ] || fail "daemon exited with status $rc after SIG$sig (expected 0)"
	! zr_is_mounted "$M" || fail "$M still mounted after SIG$sig"
	zr_same_sums "$ZR_TMP/sums" "$B" "backing directory after SIG$sig"
done
