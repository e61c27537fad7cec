#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# stream.sh: streaming past the budget (the KVM TMEM experiment): 2 GiB of
# zeros and 2 GiB of random data written (dd bs=1M conv=fdatasync) through
# zramfs with size=512M, a plain directory and zram+ext4.
#
# The random data comes from /dev/urandom once, into a tmpfs file, so that
# generating it is not measured.  For zramfs the daemon's CPU time
# (utime+stime of /proc/PID/stat) during the write is reported as seconds per
# GiB and microseconds per 4 KiB page.  --quick: 256 MiB through size=64M.
# The systems take turns run by run (lib.sh, "Rounds").  Output: stream.tsv
# (medians), stream_runs.tsv (each run).
. "$(dirname "$0")/lib.sh"

bench_init "plain,zram,zramfs,zramfs-none" 600 120 "$@"

if [ "$QUICK" = 1 ]; then
	TOTAL=$((256 << 20)); BUDGET=64M
else
	TOTAL=$((2048 << 20)); BUDGET=512M
fi
HZ=$(getconf CLK_TCK)

src_tmpfs $((TOTAL + (16 << 20)))
head -c "$TOTAL" /dev/urandom >"$SRC/random"

tsv_header "$OUT/stream.tsv" system data bytes write_MBps cpu_s_per_GiB us_per_4k_page
tsv_header "$OUT/stream_runs.tsv" system data round write_MBps cpu_s_per_GiB
mapfile -t SYSL < <(systems_list)
printf '   %-14s %-7s %10s %10s %12s\n' system data MB/s cpu_s/GiB us/4k_page
for data in zero random; do
	if [ "$data" = zero ]; then in=/dev/zero; else in=$SRC/random; fi
	for run in $(seq "$RUNS"); do
		for sys in $(round_order "$run" "${SYSL[@]}"); do
			mnt=$BENCH_TMP/mnt-$sys
			extra=
			case $sys in zramfs*) extra=size=$BUDGET ;; esac
			mount_system "$sys" "$mnt" "$extra"
			pid=$(daemon_pid "$mnt")
			c0=0
			[ -n "$pid" ] && c0=$(daemon_cpu_ticks "$pid")
			drop_caches
			t0=$(now)
			dd if="$in" of="$mnt/f" bs=1M count=$((TOTAL >> 20)) conv=fdatasync status=none
			w=$(mbps "$TOTAL" "$(elapsed "$t0")") c=NA
			if [ -n "$pid" ]; then
				c=$(awk -v t=$(($(daemon_cpu_ticks "$pid") - c0)) -v hz="$HZ" -v b="$TOTAL" \
					'BEGIN { printf "%.3f", t / hz / (b / 2^30) }')
			fi
			rm -f "$mnt/f"
			umount_system "$mnt"
			keep "$sys $data" w "$w"; keep "$sys $data" c "$c"
			tsv_row "$OUT/stream_runs.tsv" "$sys" "$data" "$run" "$w" "$c"
		done
	done
	for sys in "${SYSL[@]}"; do
		w=$(kept "$sys $data" w) c=$(kept "$sys $data" c) us=NA
		[ "$c" != NA ] && us=$(awk -v c="$c" 'BEGIN { printf "%.2f", c * 1e6 / 262144 }')
		printf '   %-14s %-7s %10s %10s %12s\n' "$sys" "$data" "$w" "$c" "$us"
		tsv_row "$OUT/stream.tsv" "$sys" "$data" "$TOTAL" "$w" "$c" "$us"
	done
done
