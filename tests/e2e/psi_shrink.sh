#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# psi_shrink: memory pressure (PSI "some" avg10 above 10%, fed to the
# daemon from a file through zr_fault.so's ZR_FAULT_PSI) shrinks the tier,
# once per 10 s at most: avg10 goes on showing the stalls of the last 10 s
# after a shrink, and a shrink at every turn of the writeback thread took
# the tier to its floor within seconds.  Over a disk the shrink writes
# dirty blocks back; over a backing directory in RAM (tmpfs) it drops
# clean blocks only, since writing dirty ones back there takes more RAM
# than it frees (helper-53).  Nothing is lost either way.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the shrink is the daemon's"
zr_need_root "mounts a tmpfs"
FAULT=$(zr_helper zr_fault.so)

P=$ZR_TMP/pressure M=$ZR_TMP/mnt
mkdir -p "$M"
# pressure AVG10: what /proc/pressure/memory would say (written whole, then
# renamed: the daemon never reads half a file)
pressure() {
	printf 'some avg10=%s avg60=0.00 avg300=0.00 total=1000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n' \
		"$1" >"$P.new"
	mv "$P.new" "$P"
}
# (base64 text: compressible, its 8 MiB well above the floor of the tier,
# a tenth of its 16 MiB budget)
head -c $((6 << 20)) /dev/urandom | base64 >"$ZR_TMP/a"
head -c $((3 << 20)) /dev/urandom | base64 >"$ZR_TMP/c"

# wait_shrink: until psi_shrinks is 1 (10 s at most), then 3 s more, in
# which a second shrink must not come
wait_shrink() {
	local i
	for i in $(seq 100); do
		[ "$(zr_stat psi_shrinks)" -ge 1 ] && break
		sleep 0.1
	done
	[ "$(zr_stat psi_shrinks)" -ge 1 ] || fail "no shrink within 10 s of the pressure"
	sleep 3
	[ "$(zr_stat psi_shrinks)" = 1 ] ||
		fail "$(zr_stat psi_shrinks) shrinks within 3 s (one per 10 s at most)"
}

for where in disk tmpfs; do
	say "backing directory on $where"
	B=$ZR_TMP/backing-$where
	mkdir -p "$B"
	if [ $where = disk ] && [[ "$(stat -f -c %T "$B")" =~ ^(tmpfs|ramfs)$ ]]; then
		say "skipped: $ZR_TMP is in RAM (set TMPDIR to a directory on a disk)"
		continue
	fi
	[ $where = tmpfs ] && zr_mount_tmpfs "$B" 64m
	pressure 0.00
	ZR_FAULT_PSI=$P zr_mount_fault "size=16M,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
	# a dirty; over tmpfs c too, clean in the tier (over a disk the
	# shrink would take clean blocks first, and write nothing back)
	if [ $where = tmpfs ]; then
		cp "$ZR_TMP/c" "$ZR_MNT/c"
		zr_ctl writeback all
	fi
	cp "$ZR_TMP/a" "$ZR_MNT/a"
	sync -f "$ZR_MNT"
	dirty0=$(zr_stat blocks_dirty) wb0=$(zr_stat bytes_written_back) used0=$(zr_stat mem_used_total)
	[ "$dirty0" -gt 0 ] || fail "no dirty blocks before the pressure"
	[ "$(zr_stat psi_shrinks)" = 0 ] || fail "a shrink before any pressure"
	pressure 45.00
	wait_shrink
	pressure 0.00
	dirty=$(zr_stat blocks_dirty) wb=$(zr_stat bytes_written_back) used=$(zr_stat mem_used_total)
	say "blocks_dirty $dirty0 -> $dirty, bytes_written_back $wb0 -> $wb, mem_used_total $used0 -> $used"
	[ "$used" -lt "$used0" ] || fail "the shrink freed nothing"
	if [ $where = disk ]; then
		[ "$wb" -gt "$wb0" ] || fail "the shrink wrote nothing back"
	else
		[ "$dirty" = "$dirty0" ] && [ "$wb" = "$wb0" ] ||
			fail "over a backing directory in RAM the shrink wrote dirty blocks back"
	fi
	grep -q "memory pressure 45.0%" "$ZR_LOG" || fail "the daemon did not log the shrink"
	zr_drop_kcache
	cmp "$ZR_TMP/a" "$ZR_MNT/a" || fail "a reads back wrong after the shrink"
	[ $where = disk ] || cmp "$ZR_TMP/c" "$ZR_MNT/c" || fail "c reads back wrong after the shrink"
	zr_umount
	cmp "$ZR_TMP/a" "$B/a" || fail "the backing file of a is not whole after unmount"
	[ $where = disk ] || cmp "$ZR_TMP/c" "$B/c" || fail "the backing file of c is not whole after unmount"
	[ $where = tmpfs ] && { umount "$B" || fail "cannot unmount the tmpfs"; }
done
say "ok"
