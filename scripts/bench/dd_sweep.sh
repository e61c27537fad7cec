#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# dd_sweep.sh: the zram wiki's dd sweep: write (conv=fdatasync) and cold read
# of a file of mixed Debian data at block sizes 64 B .. 1 MiB on each system.
#
# The input is 512 MiB (64 MiB with --quick) of /usr/share/doc, /usr/include,
# /usr/lib/x86_64-linux-gnu/*.so* and /usr/bin concatenated, held on a tmpfs
# so that reading it costs no disk I/O; its lz4 and zstd -3 ratios are
# printed.  64-byte writes use the first 32 MiB (8 MiB with --quick).
# Cold read: caches dropped first (zramfs keeps its data in its own tier,
# which is the point).  The systems take turns run by run (lib.sh,
# "Rounds").  Output: dd_sweep.tsv (one row per system and block size,
# medians), dd_sweep_runs.tsv (each run), dd_data.tsv (the input and its
# ratios).
. "$(dirname "$0")/lib.sh"

bench_init "tmpfs,plain,zram,zramfs,zramfs-none,zramfs-zstd,zramfs-16k" 900 120 "$@"
[ "$QUICK" = 1 ] && SYSTEMS=${SYSTEMS//,zramfs-zstd/} && SYSTEMS=${SYSTEMS//,zramfs-16k/}

if [ "$QUICK" = 1 ]; then
	TOTAL=$((64 << 20)); SMALL=$((8 << 20)); BSS="64 4096 1048576"; DDTO=15
else
	TOTAL=$((512 << 20)); SMALL=$((32 << 20)); BSS=${DD_BS:-64 512 4096 65536 1048576}; DDTO=90
fi

src_tmpfs $((TOTAL + (16 << 20)))
src=$SRC
mixed_data "$TOTAL" "$src/mixed"
R_LZ4=$(ratio_of "$src/mixed" lz4)
R_ZSTD=$(ratio_of "$src/mixed" zstd)
echo "   input: $TOTAL bytes of mixed data, lz4 ratio $R_LZ4, zstd -3 ratio $R_ZSTD"
tsv_header "$OUT/dd_data.tsv" bytes lz4_ratio zstd3_ratio
tsv_row "$OUT/dd_data.tsv" "$TOTAL" "$R_LZ4" "$R_ZSTD"

tsv_header "$OUT/dd_sweep.tsv" system bs bytes write_MBps read_MBps mem_bytes tier_bytes
tsv_header "$OUT/dd_sweep_runs.tsv" system bs round write_MBps read_MBps mem_bytes tier_bytes
mapfile -t SYSL < <(systems_list)
printf '   %-14s %8s %10s %10s %10s %12s\n' system bs bytes write read mem
for bs in $BSS; do
	bytes=$TOTAL
	[ "$bs" -lt 512 ] && bytes=$SMALL
	count=$((bytes / bs))
	for run in $(seq "$RUNS"); do
		for sys in $(round_order "$run" "${SYSL[@]}"); do
			mnt=$BENCH_TMP/mnt-$sys
			mount_system "$sys" "$mnt"
			drop_caches
			t0=$(now)
			if timeout "$DDTO" dd if="$src/mixed" of="$mnt/f" bs="$bs" count="$count" \
				conv=fdatasync status=none; then
				w=$(mbps "$bytes" "$(elapsed "$t0")")
			else
				w=NA
				say "$sys bs=$bs: write did not finish in ${DDTO}s"
			fi
			drop_caches
			m=$(mem_used "$mnt") t=$(tier_used "$mnt")
			t0=$(now)
			if timeout "$DDTO" dd if="$mnt/f" of=/dev/null bs="$bs" status=none; then
				r=$(mbps "$bytes" "$(elapsed "$t0")")
			else
				r=NA
			fi
			rm -f "$mnt/f"
			umount_system "$mnt"
			keep "$sys $bs" w "$w"; keep "$sys $bs" r "$r"
			keep "$sys $bs" m "$m"; keep "$sys $bs" t "$t"
			tsv_row "$OUT/dd_sweep_runs.tsv" "$sys" "$bs" "$run" "$w" "$r" "$m" "$t"
		done
	done
	for sys in "${SYSL[@]}"; do
		k="$sys $bs"
		w=$(kept "$k" w) r=$(kept "$k" r) m=$(kept "$k" m) t=$(kept "$k" t)
		printf '   %-14s %8s %10s %10s %10s %12s\n' "$sys" "$bs" "$bytes" "$w" "$r" "$m"
		tsv_row "$OUT/dd_sweep.tsv" "$sys" "$bs" "$bytes" "$w" "$r" "$m" "$t"
	done
done
