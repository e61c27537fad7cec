#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# ram_per_byte.sh: RAM per stored byte of a kernel-sized source tree.
#
# The tree is /usr/include and /usr/share of this machine (about 1 GB, mostly
# text: headers, docs, scripts, data; with --quick /usr/include only),
# copied onto each system; after `sync`, dropping the page cache and 12 s
# idle (2 s with --quick; the daemon's writeback thread recompresses idle
# blocks every ~5 s, so 12 s lets it pass at least twice), RAM used (zram
# mm_stat mem_used_total, tmpfs Shmem growth, zramfs daemon RSS and tier
# mem_used_total) is divided by the apparent size (du -sb).  Output: ram_per_byte.tsv.
. "$(dirname "$0")/lib.sh"

bench_init "tmpfs,zram,zramfs,zramfs-zstd" 600 40 "$@"

if [ "$QUICK" = 1 ]; then DIRS="/usr/include"; IDLE=2; else DIRS="/usr/include /usr/share"; IDLE=12; fi

tsv_header "$OUT/ram_per_byte.tsv" system apparent_bytes files mem_bytes tier_bytes ram_per_byte
printf '   %-12s %12s %8s %12s %12s %6s\n' system apparent files mem tier ratio
for sys in $(systems_list); do
	M=() T=() A=() F=()
	for run in $(seq "$RUNS"); do
		mnt=$BENCH_TMP/mnt-$sys
		mount_system "$sys" "$mnt"
		for d in $DIRS; do
			mkdir -p "$mnt/$(basename "$d")"
			tar -c -C "$d" -f - . 2>/dev/null | tar -x -C "$mnt/$(basename "$d")"
		done
		drop_caches
		sleep "$IDLE"
		drop_caches
		A+=("$(du -sb --exclude=.zramfs "$mnt" | cut -f1)")
		F+=("$(find "$mnt" -path "$mnt/.zramfs" -prune -o -type f -print | wc -l)")
		M+=("$(mem_used "$mnt")")
		T+=("$(tier_used "$mnt")")
		find "$mnt" -mindepth 1 -maxdepth 1 ! -name .zramfs -exec rm -rf {} +
		umount_system "$mnt"
	done
	a=$(median_of "${A[@]}") f=$(median_of "${F[@]}") m=$(median_of "${M[@]}") t=$(median_of "${T[@]}")
	r=$(awk -v m="$m" -v a="$a" 'BEGIN { printf "%.3f", m / a }')
	printf '   %-12s %12s %8s %12s %12s %6s\n' "$sys" "$a" "$f" "$m" "$t" "$r"
	tsv_row "$OUT/ram_per_byte.tsv" "$sys" "$a" "$f" "$m" "$t" "$r"
done
