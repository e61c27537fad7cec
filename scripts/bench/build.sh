#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# build.sh: build under memory pressure (zcache's kernel compile): a C code
# base built with make -jN, N = 1, 2 and 8 (one job, the cores, 4x the cores;
# BUILD_JOBS changes the list), inside a cgroup v1 memory cgroup, with the
# build tree on each system.
#
# The code base is the Linux kernel when Debian's linux-source package is
# installed (with flex, bison and bc): tinyconfig, `make prepare` once, then
# each build is `make -jN BUILD_TARGETS` (default "lib/": about 150 objects,
# 7.5 s at -j2 on tmpfs; "lib/ mm/" takes twice that) in a fresh copy of
# the prepared tree.  To
# keep copies short the tree is trimmed once, in BENCH_CACHE, to what those
# targets read: drivers, sound, net, fs, other architectures and
# Documentation keep only their Kconfig files and Makefiles (and fs, block,
# io_uring, security, crypto and ipc their headers); 150 MB in 16k files.
# Without linux-source, and with --quick, the code base is generated
# (gen_cproject.sh: BUILD_FILES .c files, default 300, 60 with --quick, -O1 -g).
# Two memory settings: "pressure", a cgroup limit of BUILD_LIMIT_MB + BUILD_JOB_MB
# per job (kernel: 80 + 48; generated: 40 + 24; at 64 + 48 the
# -j1 build thrashed, 38 s against 14 s unlimited on tmpfs, at 80 + 48 28 s), smaller than the build's
# page cache, and "fits", no limit (N = 2 only).  The zramfs daemon runs
# outside the cgroup with size= set to a quarter of the limit; its peak RSS
# is added to the peak RAM.
# Disk bytes: sectors written to the device of BENCH_DISK during the build
# (/proc/diskstats, the whole machine: other users add noise).
# Systems: tmpfs, plain and zramfs (--systems adds zram: within 0-5% of
# plain at every point of the 05:05 UTC run of 2026-11-30, left out to keep
# the suite under 30 minutes).  tmpfs builds only when it fits (the target
# compares it there); BUILD_TMPFS_PRESSURE=1 adds its pressure builds.  Its
# tree is charged to the cgroup that copied it, not the build's, and it
# has no swap to go to, so under a limit it measured the compiler's own
# memory: 0.87/1.14/1.03x plain's time at -j1/-j2/-j8 in the run of c6d10d4,
# and 5 of the suite's 38 minutes there.
# A disk slower to read than this guest's (whose host caches it, so that
# the plain directory's reads under the limit cost little more than reads
# from RAM): BUILD_READ_IOPS and BUILD_READ_BPS throttle the reads of the
# build and of the zramfs daemon from the bench disk (a cgroup v1 blkio
# cgroup; writeback is not throttled).  Not set by default; see
# docs/BENCHMARKS.md, "Build under pressure on a disk that is slow to read".
# The systems take turns run by run (lib.sh, "Rounds").  Output: build.tsv
# (medians), build_runs.tsv (each run).
. "$(dirname "$0")/lib.sh"

bench_init "tmpfs,plain,zramfs" 2400 120 "$@"
[ -d /sys/fs/cgroup/memory ] || die "the cgroup v1 memory controller is not at /sys/fs/cgroup/memory"

if [ "$QUICK" = 1 ]; then
	NFILES=${BUILD_FILES:-60}; JOBS="2"
else
	NFILES=${BUILD_FILES:-300}; JOBS="1 2 8"
fi
JOBS=${BUILD_JOBS:-$JOBS}

# kernel_project: the prepared, trimmed kernel tree in BENCH_CACHE (made on
# first use), or nothing when linux-source or the tools are missing.
kernel_project() {
	local tarball dir d a
	tarball=$(ls /usr/src/linux-source-*.tar.xz 2>/dev/null | tail -1)
	[ -n "$tarball" ] || return 0
	for a in flex bison bc; do command -v $a >/dev/null || { say "no $a: a generated project instead of the kernel"; return 0; }; done
	[ -e /usr/include/gelf.h ] || { say "no libelf-dev (objtool needs it): a generated project instead of the kernel"; return 0; }
	dir=$BENCH_CACHE/kbuild-$(basename "$tarball" .tar.xz)
	if [ ! -e "$dir/.complete" ]; then
		say "preparing a tinyconfig kernel tree from $tarball in $dir (once)"
		rm -rf "$dir" && mkdir -p "$dir"
		tar -x -J -C "$dir" -f "$tarball" --strip-components=1
		(
			cd "$dir"
			d="drivers sound net fs samples Documentation security crypto block virt certs io_uring ipc usr tools/testing tools/perf"
			for a in arch/*; do [ "$a" = arch/x86 ] || d="$d $a"; done
			find $d -type f ! -name 'Kconfig*' ! -name 'Makefile*' ! -name 'Kbuild*' \
				! \( -name '*.h' \( -path 'fs/*' -o -path 'block/*' -o -path 'io_uring/*' \
				-o -path 'security/*' -o -path 'crypto/*' -o -path 'ipc/*' \) \) -delete
			make -s tinyconfig >/dev/null
			make -s -j"$(nproc)" prepare >/dev/null
		) || { rm -rf "$dir"; die "cannot prepare the kernel tree in $dir"; }
		touch "$dir/.complete"
	fi
	echo "$dir"
}

KTREE=
[ "$QUICK" = 1 ] || KTREE=$(kernel_project)
if [ -n "$KTREE" ]; then
	PROJ=$KTREE
	TARGETS=${BUILD_TARGETS:-lib/}
	BASE_MB=${BUILD_LIMIT_MB:-80} JOB_MB=${BUILD_JOB_MB:-48}
	PROJ_DESC="the Linux kernel $(make -s -C "$PROJ" kernelversion 2>/dev/null) (Debian's linux-source), tinyconfig, \`make -jN $TARGETS\` in a tree of $(du -sb --exclude=.complete "$PROJ" | cut -f1) bytes in $(find "$PROJ" -type f | wc -l) files"
else
	src_tmpfs 512M
	"$BENCH_DIR/gen_cproject.sh" "$SRC/proj" "$NFILES"
	PROJ=$SRC/proj
	TARGETS=
	BASE_MB=${BUILD_LIMIT_MB:-40} JOB_MB=${BUILD_JOB_MB:-24}
	PROJ_DESC="a generated C project (gen_cproject.sh: $NFILES .c files, -O1 -g, $(du -sb "$SRC/proj" | cut -f1) bytes of source), \`make -jN\`"
fi
THROTTLE=
if [ -n "${BUILD_READ_IOPS:-}${BUILD_READ_BPS:-}" ]; then
	mm=$(blkio_check "${BUILD_READ_IOPS:-}" "${BUILD_READ_BPS:-}") || exit 1
	THROTTLE="reads from the bench disk ($mm) throttled to ${BUILD_READ_IOPS:-any} per second and ${BUILD_READ_BPS:-any} bytes per second"
	PROJ_DESC="$PROJ_DESC; $THROTTLE"
fi
echo "   project: $PROJ_DESC"
echo "$PROJ_DESC" >"$OUT/build.project"

# build_once SYS MODE N: one build; sets B_T (secs), B_D (disk bytes), B_P
# (peak RAM bytes).
build_once() {
	local sys=$1 mode=$2 j=$3 mnt=$BENCH_TMP/mnt-$1 lim=-1 extra= cg bcg='' pid d0 t0 t hwm=0 peak
	if [ "$mode" = pressure ]; then
		lim=$(((BASE_MB + JOB_MB * j) << 20))
		case $sys in zramfs*) extra=size=$((lim / 4)) ;; esac
	fi
	mount_system "$sys" "$mnt" "$extra"
	tar -c -C "$PROJ" --exclude=./.complete -f - . | tar -x -C "$mnt"
	# the tree starts at rest on every system: `sync` (in drop_caches)
	# writes the others' copies out but reaches no FUSE daemon
	# (cache=none has no tier to write back)
	case $sys in zramfs-none) ;; zramfs*) echo "writeback all" >"$mnt/.zramfs/control" ;; esac
	cgroup_make "zrbench-$$-$sys-$j" "$lim"
	cg=$CG
	drop_caches
	pid=$(daemon_pid "$mnt")
	if [ -n "$THROTTLE" ]; then
		blkio_make "zrbench-$$-$sys-$j" "${BUILD_READ_IOPS:-}" "${BUILD_READ_BPS:-}"
		bcg=$CG
		[ -z "$pid" ] || echo "$pid" >"$bcg/cgroup.procs"
	fi
	d0=$(disk_written)
	t0=$(now)
	if ! (cd "$mnt" && echo $BASHPID >"$cg/tasks" && { [ -z "$bcg" ] || echo $BASHPID >"$bcg/tasks"; } &&
		exec make -s -j"$j" $TARGETS >/dev/null 2>"$BENCH_TMP/make.err"); then
		say "$sys $mode -j$j: build failed (OOM in the cgroup?)"
		tail -3 "$BENCH_TMP/make.err" >&2
		t=NA
	else
		t=$(elapsed "$t0")
	fi
	local dw=$(($(disk_written) - d0))
	[ -n "$pid" ] && hwm=$(awk '/^VmHWM:/ { printf "%.0f\n", $2 * 1024 }' "/proc/$pid/status")
	peak=$(($(cat "$cg/memory.max_usage_in_bytes") + hwm))
	for cg in "$cg" ${bcg:+"$bcg"}; do
		cgroup_remove "$cg"
		BENCH_CGROUPS=("${BENCH_CGROUPS[@]/$cg/}")
	done
	rm -rf "${mnt:?}"/*
	umount_system "$mnt"
	B_T=$t B_D=$dw B_P=$peak
}

tsv_header "$OUT/build.tsv" system mode jobs limit_bytes secs disk_bytes peak_bytes
tsv_header "$OUT/build_runs.tsv" system mode jobs round secs disk_bytes peak_bytes
mapfile -t SYSL < <(systems_list)
printf '   %-10s %-8s %4s %8s %12s %12s\n' system mode jobs secs disk_bytes peak_bytes
for mode in pressure fits; do
	for j in $JOBS; do
		[ "$mode" = fits ] && [ "$j" != 2 ] && continue
		# the systems that build at this point
		SYSP=()
		for sys in "${SYSL[@]}"; do
			[ "$sys" = tmpfs ] && [ "$mode" = pressure ] &&
				[ "${BUILD_TMPFS_PRESSURE:-0}" != 1 ] && continue
			SYSP+=("$sys")
		done
		for run in $(seq "$RUNS"); do
			for sys in $(round_order "$run" ${SYSP[@]+"${SYSP[@]}"}); do
				build_once "$sys" "$mode" "$j"
				k="$sys $mode $j"
				keep "$k" t "$B_T"; keep "$k" d "$B_D"; keep "$k" p "$B_P"
				tsv_row "$OUT/build_runs.tsv" "$sys" "$mode" "$j" "$run" "$B_T" "$B_D" "$B_P"
			done
		done
		lim=unlimited
		[ "$mode" = pressure ] && lim=$(((BASE_MB + JOB_MB * j) << 20))
		for sys in ${SYSP[@]+"${SYSP[@]}"}; do
			k="$sys $mode $j"
			t=$(kept "$k" t) dw=$(kept "$k" d) pk=$(kept "$k" p)
			printf '   %-10s %-8s %4s %8s %12s %12s\n' "$sys" "$mode" "$j" "$t" "$dw" "$pk"
			tsv_row "$OUT/build.tsv" "$sys" "$mode" "$j" "$lim" "$t" "$dw" "$pk"
		done
	done
done
