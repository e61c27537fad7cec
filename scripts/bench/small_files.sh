#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# small_files.sh: untar of 10k and 100k files of a source tree, cold `tar c`
# of it (through a pipe to /dev/null), `rm -rf`, on each system.
#
# The 10k-file tree is the first 10,000 files of /usr/include and
# /usr/share/doc (real headers and docs of this machine); the 100k-file
# tree is ten copies of it in sibling directories (there are not 100k
# source files on a Debian machine without sources).  The tarballs sit on a
# tmpfs.  --quick: 2k files only.  SF_COUNTS overrides the file counts
# of a full run (e.g. SF_COUNTS=10000 when the 100k trees do not fit in the
# time there is).  The 100k trees are stored on the systems in SF_BIG
# only (default "zram,zramfs", the pair the target compares; the 10k rows
# of the others scale linearly: in the 04:23 UTC run of 2026-11-30 each of
# their 100k figures was 9-10x the 10k one), to keep the suite under 30
# minutes.  zramfs-noxattr (-o xattr=off) shows what the two GETXATTR
# round trips of each file cost.  The systems take turns run by run (lib.sh,
# "Rounds").  Output: small_files.tsv (medians), small_files_runs.tsv (each
# run).
. "$(dirname "$0")/lib.sh"

bench_init "tmpfs,plain,zram,zramfs,zramfs-none,zramfs-noxattr" 900 120 "$@"

if [ "$QUICK" = 1 ]; then COUNTS="2000"; else COUNTS=${SF_COUNTS:-10000 100000}; fi

src_tmpfs 4G
mkdir -p "$SRC/t1"
find /usr/include /usr/share/doc -type f | sort | awk -v n="$(echo "$COUNTS" | awk '{ print $1 < 10000 ? $1 : 10000 }')" 'NR <= n' |
	tar -c -T - -f - 2>/dev/null | tar -x -C "$SRC/t1"
for c in $COUNTS; do
	if [ "$c" -le 10000 ]; then
		tar -c -C "$SRC/t1" -f "$SRC/tree$c.tar" .
	else
		mkdir -p "$SRC/t$c"
		for k in $(seq 0 $((c / 10000 - 1))); do
			mkdir -p "$SRC/t$c/copy$k"
			cp -a "$SRC/t1/." "$SRC/t$c/copy$k/"
		done
		tar -c -C "$SRC/t$c" -f "$SRC/tree$c.tar" .
		rm -rf "${SRC:?}/t$c"
	fi
	echo "   tree$c: $(tar -tf "$SRC/tree$c.tar" | grep -vc '/$') files, $(stat -c %s "$SRC/tree$c.tar") bytes of tar"
done

tsv_header "$OUT/small_files.tsv" system files untar_secs tar_cold_secs rm_secs
tsv_header "$OUT/small_files_runs.tsv" system files round untar_secs tar_cold_secs rm_secs
mapfile -t SYSL < <(systems_list)
printf '   %-14s %7s %8s %8s %8s\n' system files untar tar_c rm
for c in $COUNTS; do
	# the systems that store this tree
	SYSC=()
	for sys in "${SYSL[@]}"; do
		if [ "$c" -gt 10000 ] && [[ ",${SF_BIG:-zram,zramfs}," != *",$sys,"* ]]; then
			continue
		fi
		SYSC+=("$sys")
	done
	for run in $(seq "$RUNS"); do
		for sys in $(round_order "$run" ${SYSC[@]+"${SYSC[@]}"}); do
			mnt=$BENCH_TMP/mnt-$sys
			mount_system "$sys" "$mnt"
			drop_caches
			t0=$(now)
			tar -x -C "$mnt" -f "$SRC/tree$c.tar"
			sync -f "$mnt/." 2>/dev/null || true
			u=$(elapsed "$t0")
			drop_caches
			t0=$(now)
			# (GNU tar does not read the files when writing to /dev/null itself)
			tar -c -C "$mnt" -f - . | cat >/dev/null
			tc=$(elapsed "$t0")
			t0=$(now)
			find "$mnt" -mindepth 1 -maxdepth 1 ! -name .zramfs -exec rm -rf {} +
			r=$(elapsed "$t0")
			umount_system "$mnt"
			keep "$sys $c" u "$u"; keep "$sys $c" tc "$tc"; keep "$sys $c" r "$r"
			tsv_row "$OUT/small_files_runs.tsv" "$sys" "$c" "$run" "$u" "$tc" "$r"
		done
	done
	for sys in ${SYSC[@]+"${SYSC[@]}"}; do
		u=$(kept "$sys $c" u) tc=$(kept "$sys $c" tc) r=$(kept "$sys $c" r)
		printf '   %-14s %7s %8s %8s %8s\n' "$sys" "$c" "$u" "$tc" "$r"
		tsv_row "$OUT/small_files.tsv" "$sys" "$c" "$u" "$tc" "$r"
	done
done
