#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# build.sh: build under memory pressure (zcache's kernel compile): a C code
# base built with make -jN, N = 1, 2, 4, 8, inside a cgroup v1 memory cgroup,
# with the build tree on each system.
#
# The code base is generated (gen_cproject.sh: BUILD_FILES .c files, default
# 300, 60 with --quick, -O1 -g); there is no real source package offline.
# Two memory settings: "pressure", a cgroup limit of BUILD_LIMIT_MB (default
# 40) + 24 MiB per job, smaller than the build's page cache, and "fits", no
# limit (N = 2 only).  The zramfs daemon runs outside the cgroup with
# size= set to a quarter of the limit; its peak RSS is added to the peak RAM.
# Disk bytes: sectors written to the root device during the build
# (/proc/diskstats, the whole machine: other users add noise).
# Output: build.tsv.
. "$(dirname "$0")/lib.sh"

bench_init "tmpfs,plain,zram,zramfs" 900 60 "$@"
[ -d /sys/fs/cgroup/memory ] || die "the cgroup v1 memory controller is not at /sys/fs/cgroup/memory"

if [ "$QUICK" = 1 ]; then
	NFILES=${BUILD_FILES:-60}; JOBS="2"
else
	NFILES=${BUILD_FILES:-300}; JOBS="1 2 4 8"
fi
BASE_MB=${BUILD_LIMIT_MB:-40}

src_tmpfs 512M
"$BENCH_DIR/gen_cproject.sh" "$SRC/proj" "$NFILES"
echo "   project: $NFILES generated .c files, $(du -sb "$SRC/proj" | cut -f1) bytes of source"

# build_once SYS MODE N: one build; sets B_T (secs), B_D (disk bytes), B_P
# (peak RAM bytes).
build_once() {
	local sys=$1 mode=$2 j=$3 mnt=$BENCH_TMP/mnt-$1 lim=-1 extra= cg pid d0 t0 t hwm=0 peak
	if [ "$mode" = pressure ]; then
		lim=$(((BASE_MB + 24 * j) << 20))
		case $sys in zramfs*) extra=size=$((lim / 4)) ;; esac
	fi
	mount_system "$sys" "$mnt" "$extra"
	cp -a "$SRC/proj/." "$mnt/"
	cgroup_make "zrbench-$$-$sys-$j" "$lim"
	cg=$CG
	drop_caches
	pid=$(daemon_pid "$mnt")
	d0=$(disk_written)
	t0=$(now)
	if ! (cd "$mnt" && echo $BASHPID >"$cg/tasks" && exec make -s -j"$j" >/dev/null 2>"$BENCH_TMP/make.err"); then
		say "$sys $mode -j$j: build failed (OOM in the cgroup?)"
		tail -3 "$BENCH_TMP/make.err" >&2
		t=NA
	else
		t=$(elapsed "$t0")
	fi
	local dw=$(($(disk_written) - d0))
	[ -n "$pid" ] && hwm=$(awk '/^VmHWM:/ { printf "%.0f\n", $2 * 1024 }' "/proc/$pid/status")
	peak=$(($(cat "$cg/memory.max_usage_in_bytes") + hwm))
	cgroup_remove "$cg"
	BENCH_CGROUPS=("${BENCH_CGROUPS[@]/$cg/}")
	rm -rf "${mnt:?}"/*
	umount_system "$mnt"
	B_T=$t B_D=$dw B_P=$peak
}

tsv_header "$OUT/build.tsv" system mode jobs limit_bytes secs disk_bytes peak_bytes
printf '   %-10s %-8s %4s %8s %12s %12s\n' system mode jobs secs disk_bytes peak_bytes
for sys in $(systems_list); do
	for mode in pressure fits; do
		for j in $JOBS; do
			[ "$mode" = fits ] && [ "$j" != 2 ] && continue
			T=() D=() P=()
			for run in $(seq "$RUNS"); do
				build_once "$sys" "$mode" "$j"
				T+=("$B_T") D+=("$B_D") P+=("$B_P")
			done
			lim=unlimited
			[ "$mode" = pressure ] && lim=$(((BASE_MB + 24 * j) << 20))
			t=$(median_of "${T[@]}") dw=$(median_of "${D[@]}") pk=$(median_of "${P[@]}")
			printf '   %-10s %-8s %4s %8s %12s %12s\n' "$sys" "$mode" "$j" "$t" "$dw" "$pk"
			tsv_row "$OUT/build.tsv" "$sys" "$mode" "$j" "$lim" "$t" "$dw" "$pk"
		done
	done
done
