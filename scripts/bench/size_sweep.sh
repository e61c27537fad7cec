#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# size_sweep.sh: compcache's size sweep: one workload on zramfs with size= at
# 10, 25, 50, 75 and 100% of its working set, and on a plain directory.
#
# The workload is fio: a 512 MiB file (128 MiB with --quick) of data that
# compresses about 2:1 (buffer_compress_percentage=50), laid out and
# written back first, then random reads and writes (70/30, 16 KiB, zipf 1.1
# access skew, the hot/cold shape of real working sets) until 1 GiB (256 MiB)
# has moved.  Reported: elapsed time of the random phase, bytes written
# to the device of BENCH_DISK during it (/proc/diskstats; noisy on a shared
# machine; the backing files' writes often stay in the page cache until
# the kernel's own dirty_expire), and for zramfs the bytes it wrote to the
# backing files during it (bytes_written_backing: what left the tier, or
# went around it).  Output: size_sweep.tsv.
. "$(dirname "$0")/lib.sh"

bench_init "plain,zramfs" 600 120 "$@"
command -v fio >/dev/null || die "fio is needed"

if [ "$QUICK" = 1 ]; then WS=128; IO=256; PCTS="25 100"; else WS=512; IO=1024; PCTS="10 25 50 75 100"; fi

fio_job() {
	fio --name=sweep --directory="$1" --filename=ws --size=${WS}m --bs=16k \
		--ioengine=psync --buffer_compress_percentage=50 --refill_buffers \
		--randrepeat=1 --random_distribution=zipf:1.1 "${@:2}" \
		--output-format=terse >/dev/null
}

tsv_header "$OUT/size_sweep.tsv" system size_pct size_bytes secs disk_bytes backing_bytes
printf '   %-8s %6s %12s %8s %12s %12s\n' system pct size secs disk_bytes backing_bytes

# backing_written MNT: bytes_written_backing of the zramfs at MNT, NA elsewhere
backing_written() {
	if [ -n "$(daemon_pid "$1")" ]; then
		zstat "$1" bytes_written_backing
	else
		echo NA
	fi
}
for sys in $(systems_list); do
	pcts=$PCTS
	case $sys in zramfs*) ;; *) pcts=NA ;; esac
	for pct in $pcts; do
		T=() D=() W=()
		size=NA extra=
		[ "$pct" != NA ] && size=$((WS * pct / 100 << 20)) extra=size=$size
		for run in $(seq "$RUNS"); do
			mnt=$BENCH_TMP/mnt-$sys
			mount_system "$sys" "$mnt" "$extra"
			fio_job "$mnt" --rw=write --fsync_on_close=1
			if [ -n "$(daemon_pid "$mnt")" ]; then echo "writeback all" >"$mnt/.zramfs/control"; fi
			drop_caches
			d0=$(disk_written) w0=$(backing_written "$mnt")
			t0=$(now)
			fio_job "$mnt" --rw=randrw --rwmixread=70 --io_size=${IO}m
			T+=("$(elapsed "$t0")")
			D+=("$(($(disk_written) - d0))")
			w1=$(backing_written "$mnt")
			if [ "$w0" = NA ]; then W+=(NA); else W+=("$((w1 - w0))"); fi
			rm -f "$mnt/ws"
			umount_system "$mnt"
		done
		t=$(median_of "${T[@]}") d=$(median_of "${D[@]}") w=$(median_of "${W[@]}")
		printf '   %-8s %6s %12s %8s %12s %12s\n' "$sys" "$pct" "$size" "$t" "$d" "$w"
		tsv_row "$OUT/size_sweep.tsv" "$sys" "$pct" "$size" "$t" "$d" "$w"
	done
done
