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
# Output: stream.tsv.
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
printf '   %-14s %-7s %10s %10s %12s\n' system data MB/s cpu_s/GiB us/4k_page
for sys in $(systems_list); do
	for data in zero random; do
		W=() C=()
		for run in $(seq "$RUNS"); do
			mnt=$BENCH_TMP/mnt-$sys
			extra=
			case $sys in zramfs*) extra=size=$BUDGET ;; esac
			mount_system "$sys" "$mnt" "$extra"
			if [ "$data" = zero ]; then in=/dev/zero; else in=$SRC/random; fi
			pid=$(daemon_pid "$mnt")
			c0=0
			[ -n "$pid" ] && c0=$(daemon_cpu_ticks "$pid")
			drop_caches
			t0=$(now)
			dd if="$in" of="$mnt/f" bs=1M count=$((TOTAL >> 20)) conv=fdatasync status=none
			W+=("$(mbps "$TOTAL" "$(elapsed "$t0")")")
			if [ -n "$pid" ]; then
				C+=("$(awk -v t=$(($(daemon_cpu_ticks "$pid") - c0)) -v hz="$HZ" -v b="$TOTAL" \
					'BEGIN { printf "%.3f", t / hz / (b / 2^30) }')")
			fi
			rm -f "$mnt/f"
			umount_system "$mnt"
		done
		w=$(median_of "${W[@]}")
		c=NA us=NA
		if [ ${#C[@]} -gt 0 ]; then
			c=$(median_of "${C[@]}")
			us=$(awk -v c="$c" 'BEGIN { printf "%.2f", c * 1e6 / 262144 }')
		fi
		printf '   %-14s %-7s %10s %10s %12s\n' "$sys" "$data" "$w" "$c" "$us"
		tsv_row "$OUT/stream.tsv" "$sys" "$data" "$TOTAL" "$w" "$c" "$us"
	done
done
