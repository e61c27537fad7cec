#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# ram_per_byte.sh: RAM per stored byte of a kernel-sized source tree.
#
# The tree is the Linux kernel's source when Debian's linux-source package is
# installed (`apt-get install linux-source-6.1`: /usr/src/linux-source-*.tar.xz,
# unpacked once into BENCH_CACHE; about 1.3 GB in 80k files), else
# /usr/include and /usr/share of this machine (about 1 GB, mostly text:
# headers, docs, scripts, data, with some already-compressed files); with
# --quick /usr/include only.  RPB_TREE=DIR picks another tree.  It is
# copied onto each system; after `sync`, dropping the page cache and 12 s
# idle (2 s with --quick; the daemon's writeback thread recompresses idle
# blocks every ~5 s, so 12 s lets it pass at least twice), RAM used (zram
# mm_stat mem_used_total, tmpfs Shmem growth, zramfs daemon RSS and tier
# mem_used_total) is divided by the apparent size (du -sb); the idle wait is
# for the zramfs systems only, as nothing else changes while idle.
# Default systems: tmpfs, zram, zramfs (--systems adds zramfs-zstd: 0.291
# against lz4's 0.288 in the 04:37 UTC run of 2026-11-30, left out to keep
# the suite under 30 minutes).  Output: ram_per_byte.tsv.
. "$(dirname "$0")/lib.sh"

bench_init "tmpfs,zram,zramfs" 600 120 "$@"

# kernel_tree: the unpacked kernel source (unpacked into BENCH_CACHE on first
# use), or nothing when linux-source is not installed.
kernel_tree() {
	local tarball dir
	tarball=$(ls /usr/src/linux-source-*.tar.xz 2>/dev/null | tail -1)
	[ -n "$tarball" ] || return 0
	dir=$BENCH_CACHE/$(basename "$tarball" .tar.xz)
	if [ ! -e "$dir/.complete" ]; then
		say "unpacking $tarball into $dir (once)"
		rm -rf "$dir" && mkdir -p "$dir"
		tar -x -J -C "$dir" -f "$tarball" --strip-components=1
		touch "$dir/.complete"
	fi
	echo "$dir"
}

IDLE=12
if [ -n "${RPB_TREE:-}" ]; then
	DIRS=$RPB_TREE
elif [ "$QUICK" = 1 ]; then
	DIRS="/usr/include" IDLE=2
else
	DIRS=$(kernel_tree)
	[ -n "$DIRS" ] || DIRS="/usr/include /usr/share"
fi
case $DIRS in
*/linux-source-*) TREE_DESC="the Linux kernel's source ($(basename "$DIRS"), Debian's linux-source)" ;;
*) TREE_DESC=$DIRS ;;
esac
echo "   tree: $TREE_DESC"
echo "$TREE_DESC" >"$OUT/ram_per_byte.tree"

tsv_header "$OUT/ram_per_byte.tsv" system apparent_bytes files mem_bytes tier_bytes ram_per_byte
printf '   %-14s %12s %8s %12s %12s %6s\n' system apparent files mem tier ratio
for sys in $(systems_list); do
	M=() T=() A=() F=()
	for run in $(seq "$RUNS"); do
		mnt=$BENCH_TMP/mnt-$sys
		mount_system "$sys" "$mnt"
		for d in $DIRS; do
			mkdir -p "$mnt/$(basename "$d")"
			tar -c -C "$d" --exclude=./.complete -f - . 2>/dev/null | tar -x -C "$mnt/$(basename "$d")"
		done
		drop_caches
		# only zramfs changes while idle (its writeback thread)
		case $sys in zramfs*) sleep "$IDLE"; drop_caches ;; esac
		A+=("$(du -sb --exclude=.zramfs "$mnt" | cut -f1)")
		F+=("$(find "$mnt" -path "$mnt/.zramfs" -prune -o -type f -print | wc -l)")
		M+=("$(mem_used "$mnt")")
		T+=("$(tier_used "$mnt")")
		# (zramfs: removed through the mount, or unmounting writes it back)
		case $sys in zramfs*) find "$mnt" -mindepth 1 -maxdepth 1 ! -name .zramfs -exec rm -rf {} + ;; esac
		umount_system "$mnt"
	done
	a=$(median_of "${A[@]}") f=$(median_of "${F[@]}") m=$(median_of "${M[@]}") t=$(median_of "${T[@]}")
	r=$(awk -v m="$m" -v a="$a" 'BEGIN { printf "%.3f", m / a }')
	printf '   %-14s %12s %8s %12s %12s %6s\n' "$sys" "$a" "$f" "$m" "$t" "$r"
	tsv_row "$OUT/ram_per_byte.tsv" "$sys" "$a" "$f" "$m" "$t" "$r"
done
