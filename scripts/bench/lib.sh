# SPDX-License-Identifier: GPL-2.0-or-later
# lib.sh: shared helpers of the zramfs benchmarks (sourced by bash).
#
# A benchmark sources this file, calls bench_init "$@" (parses --quick,
# --out DIR, --runs N, --systems LIST, --timeout SECS), mounts the systems
# it compares with mount_system NAME DIR and removes them with
# umount_system DIR.  Everything a script creates (mounts, zramfs daemons,
# the zram0 device, memory and blkio cgroups, its temporary directory) is recorded
# here and removed by bench_cleanup, the EXIT trap, in every exit path; a
# watchdog terminates the script after --timeout seconds.
#
# Systems: tmpfs, plain (a directory on the disk: under BENCH_DISK, by
# default /var/tmp on the root filesystem), zram (kernel zram0, lz4, ext4), zramfs (defaults),
# zramfs-none (cache=none: FUSE alone), zramfs-zstd (comp=zstd),
# zramfs-16k (block_size=16k), zramfs-noseq (seq_cutoff=0: long sequential
# streams stay in the tier instead of bypassing it), zramfs-noxattr (xattr=off:
# the kernel stops asking for security.capability), zramfs-uring (uring=on:
# requests through io_uring; the fuse module's enable_uring parameter is set
# to Y for the run and put back after).  `zram` is skipped with a note when
# /sys/block/zram0 is missing or already in use.
#
# Environment: ZRAMFS (the daemon; default: the build tree's src/zramfs
# next to this source tree, else zramfs in PATH), BENCH_CACHE (where the
# generated input data is kept between runs, default /var/tmp/zrbench-cache),
# ZRAMFS_OPTS (extra -o options for every zramfs system), BENCH_ADD_SYSTEMS
# (systems added to each script's defaults when --systems is not given, e.g.
# zramfs-uring for a run_all.sh whose tables and targets show it), BENCH_DISK (the
# directory on the disk that holds the plain system, zramfs backing
# directories and the scripts' scratch files; default /var/tmp.  On a root
# filesystem aged by millions of creates and deletes, point it at a fresh
# ext4, or the plain figures measure ext4's inode allocator).

set -euo pipefail

BENCH_NAME=$(basename "$0" .sh)
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${BENCH_CACHE:=/var/tmp/zrbench-cache}"
QUICK=0
RUNS=3
OUT=
SYSTEMS=
TIMEOUT=
BENCH_TMP=
BENCH_WATCHDOG=
BENCH_MOUNTS=()          # mount points we mounted (tmpfs, zram ext4, zramfs)
declare -A BENCH_SYS=()  # mount dir -> system name
declare -A BENCH_PID=()  # zramfs mount dir -> daemon PID
declare -A BENCH_SHM0=() # tmpfs mount dir -> Shmem (bytes) at mount time
BENCH_ZRAM=0             # 1 while we own zram0
BENCH_CGROUPS=()         # memory and blkio cgroups we created
BENCH_T0=$(date +%s)

say() { echo "  -- $*" >&2; }
die() {
	echo "$BENCH_NAME: error: $*" >&2
	exit 1
}

# now: seconds since the epoch with nanoseconds.
now() { date +%s.%N; }

# elapsed T0: seconds since T0 (from now), 3 decimals.
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }

# median: median of the numbers on stdin (one per line; of an even count,
# the mean of the middle two, to 12 significant digits); "NA" if none.
median() {
	sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "NA"; exit }
		if (NR % 2) print v[(NR + 1) / 2]
		else printf "%.12g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# median_of VALUES...: median of the arguments, "NA" ones ignored.
median_of() { printf '%s\n' "$@" | awk '$1 != "NA" && $1 != ""' | median; }

# Rounds.  The scripts that compare systems (dd_sweep, stream, small_files,
# build) interleave their runs: each round runs every system once at a
# point before the next round starts, in an order turned by one system each
# round, so that the machine's drift in the course of a script (the host's
# disk, its neighbours) falls on all systems alike instead of on whichever
# ran last, and the ratios taken within one run compare like with like.
# Each run's figures also go to NAME_runs.tsv, so that the spread behind a
# median can be read.
declare -A BENCH_KEPT=() # "POINT<TAB>FIELD" -> the values of its runs

# keep POINT FIELD VALUE: records one run's VALUE of FIELD at POINT (any
# string, e.g. "zramfs 4096").
keep() { BENCH_KEPT["$1"$'\t'"$2"]+="$3 "; }

# kept POINT FIELD: the median of the values kept ("NA" if none).
kept() {
	# (split on purpose: the values are numbers or NA)
	# shellcheck disable=SC2086
	median_of ${BENCH_KEPT["$1"$'\t'"$2"]:-}
}

# round_order ROUND SYSTEMS...: SYSTEMS turned left by ROUND - 1 places.
round_order() {
	local r=$1
	shift
	[ $# -gt 0 ] || return 0
	local n=$# i k=$(((r - 1) % $#))
	local a=("$@")
	for ((i = 0; i < n; i++)); do echo "${a[$(((i + k) % n))]}"; done
}

# mbps BYTES SECS: MB/s (10^6 bytes) with one decimal.
mbps() { awk -v b="$1" -v s="$2" 'BEGIN { if (s <= 0) print "NA"; else printf "%.1f", b / s / 1e6 }'; }

# usage_common: the options every benchmark takes.
usage_common() {
	cat <<EOF
usage: $0 [--quick] [--out DIR] [--runs N] [--systems LIST] [--timeout SECS]
  --quick          small sizes, 1 run (CI: the scripts must not rot)
  --out DIR        where the TSV results go (default ./bench-out)
  --runs N         runs per point, the median is reported (default 3)
  --systems LIST   comma-separated subset of: $ALL_SYSTEMS
  --timeout SECS   the whole script is stopped after SECS
EOF
}

# bench_init DEFAULT_SYSTEMS FULL_TIMEOUT QUICK_TIMEOUT "$@": parses the
# options, checks the environment, makes $BENCH_TMP, installs the traps and
# the watchdog, prints the machine description.
bench_init() {
	local def_systems=$1 full_to=$2 quick_to=$3
	shift 3
	ALL_SYSTEMS="tmpfs,plain,zram,zramfs,zramfs-none,zramfs-zstd,zramfs-16k,zramfs-noseq,zramfs-noxattr,zramfs-uring"
	while [ $# -gt 0 ]; do
		case $1 in
		--quick) QUICK=1 ;;
		--out) OUT=$2; shift ;;
		--out=*) OUT=${1#--out=} ;;
		--runs) RUNS=$2; shift ;;
		--systems) SYSTEMS=$2; shift ;;
		--timeout) TIMEOUT=$2; shift ;;
		-h | --help) usage_common; exit 0 ;;
		*) usage_common >&2; die "unknown option '$1'" ;;
		esac
		shift
	done
	[ "$(id -u)" = 0 ] || die "needs root (mounts, drop_caches, zram, cgroups)"
	[ "$QUICK" = 1 ] && RUNS=1
	if [ -z "$SYSTEMS" ]; then
		SYSTEMS=$def_systems
		local add adds=${BENCH_ADD_SYSTEMS:-}
		for add in ${adds//,/ }; do
			case ",$ALL_SYSTEMS," in *",$add,"*) ;; *) die "BENCH_ADD_SYSTEMS: unknown system '$add'" ;; esac
			case ",$SYSTEMS," in *",$add,"*) ;; *) SYSTEMS+=",$add" ;; esac
		done
	fi
	: "${OUT:=./bench-out}"
	if [ -z "$TIMEOUT" ]; then
		if [ "$QUICK" = 1 ]; then TIMEOUT=$quick_to; else TIMEOUT=$full_to; fi
	fi
	if [ -z "${ZRAMFS:-}" ]; then
		if command -v zramfs >/dev/null 2>&1; then ZRAMFS=$(command -v zramfs)
		else die "set ZRAMFS to the zramfs daemon"; fi
	fi
	[ -x "$ZRAMFS" ] || die "ZRAMFS=$ZRAMFS is not executable"
	mkdir -p "$OUT" "$BENCH_CACHE"
	OUT=$(realpath "$OUT")
	BENCH_TMP=$(mktemp -d "${BENCH_DISK:-/var/tmp}"/zrbench-"$BENCH_NAME".XXXXXX)
	trap bench_cleanup EXIT
	trap 'echo "$BENCH_NAME: interrupted" >&2; exit 130' INT HUP
	trap 'echo "$BENCH_NAME: terminated (timeout ${TIMEOUT}s?)" >&2; exit 124' TERM
	local main=$$
	(
		trap 'kill "$s" 2>/dev/null; exit 0' TERM
		sleep "$TIMEOUT" &
		s=$!
		wait "$s"
		echo "$BENCH_NAME: TIMEOUT after ${TIMEOUT}s" >&2
		kill -TERM "$main" 2>/dev/null
		# A process stuck in a FUSE request: kill our daemons.
		sleep 5
		for p in $(cat "$BENCH_TMP"/.pid.* 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
	) </dev/null >/dev/null 2>&1 &
	BENCH_WATCHDOG=$!
	echo "== $BENCH_NAME: $( [ "$QUICK" = 1 ] && echo quick || echo full ) run, $RUNS run(s)/point, systems $SYSTEMS, timeout ${TIMEOUT}s, out $OUT"
	machine_desc | sed 's/^/   /'
	# the first script of a run describes the machine for the report
	[ -s "$OUT/machine.txt" ] || machine_desc >"$OUT/machine.txt"
}

# machine_desc: one "key: value" line each.
machine_desc() {
	echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "uname: $(uname -a)"
	echo "cpu: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
	echo "nproc: $(nproc)"
	echo "ram: $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "root: $(findmnt -n -o SOURCE,FSTYPE /)"
	echo "disk dir: ${BENCH_DISK:-/var/tmp} on $(findmnt -n -o SOURCE,FSTYPE --target "${BENCH_DISK:-/var/tmp}")"
	[ -n "$(dev_written "${BENCH_DISK:-/var/tmp}")" ] ||
		echo "warning: no block device in /proc/diskstats for ${BENCH_DISK:-/var/tmp}: the bytes written to disk are not measured (0)"
	echo "zramfs: $ZRAMFS ($("$ZRAMFS" --version 2>&1 | grep -i zramfs | head -1))"
	echo "other fuse mounts: $(awk '$3 ~ /^fuse/' /proc/mounts | wc -l)"
	# what a FUSE round trip costs here depends on these: without a
	# cpuidle driver an idle vCPU halts at once (cpu_latency cannot make
	# it poll), and mitigations lengthen every syscall and switch
	echo "cpuidle: driver $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo unknown)"
	echo "mitigations: $(mitigations_desc)"
	echo "syscall: $(syscall_ns) ns per 1-byte read+write pair (dd /dev/zero to /dev/null)"
	echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# mitigations_desc: the CPU vulnerability mitigations in force, "name(how)".
mitigations_desc() {
	local f v out=
	for f in /sys/devices/system/cpu/vulnerabilities/*; do
		[ -r "$f" ] || continue
		v=$(cat "$f")
		case $v in Mitigation:*) v=${v#Mitigation: }; out+="$(basename "$f")(${v%%;*}) " ;; esac
	done
	out=${out% }
	echo "${out:-none listed}"
}

# syscall_ns: nanoseconds per read+write pair of dd bs=1 (the best of three).
syscall_ns() {
	local i t0 t1 best=
	for i in 1 2 3; do
		t0=$(date +%s%N)
		dd if=/dev/zero of=/dev/null bs=1 count=200000 2>/dev/null
		t1=$(date +%s%N)
		t1=$(( (t1 - t0) / 200000 ))
		[ -z "$best" ] || [ "$t1" -lt "$best" ] && best=$t1
	done
	echo "$best"
}

# have_system NAME: true if NAME is in --systems (and usable here).
have_system() {
	case ",$SYSTEMS," in *",$1,"*) ;; *) return 1 ;; esac
	if [ "$1" = zram ] && ! zram_usable; then return 1; fi
	return 0
}

# systems_list: the selected systems, one per line, unusable ones noted.
systems_list() {
	local s
	for s in ${SYSTEMS//,/ }; do
		if [ "$s" = zram ] && ! zram_usable; then
			say "note: zram skipped: /sys/block/zram0 missing or busy"
			continue
		fi
		echo "$s"
	done
}

zram_usable() {
	[ "$BENCH_ZRAM" = 1 ] && return 0
	[ -e /sys/block/zram0 ] || return 1
	[ "$(cat /sys/block/zram0/disksize)" = 0 ] || return 1
	! grep -q '^/dev/zram0 ' /proc/mounts
}

# drop_caches: writes dirty data and drops the clean page cache.
drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

shmem_bytes() { awk '/^Shmem:/ { printf "%.0f\n", $2 * 1024 }' /proc/meminfo; }

# zramfs_opts NAME: the -o options of a zramfs system.
zramfs_opts() {
	local o
	case $1 in
	zramfs) o= ;;
	zramfs-none) o=cache=none ;;
	zramfs-zstd) o=comp=zstd ;;
	zramfs-16k) o=block_size=16k ;;
	zramfs-noseq) o=seq_cutoff=0 ;;
	zramfs-noxattr) o=xattr=off ;;
	zramfs-uring) o=uring=on ;;
	*) die "unknown zramfs system '$1'" ;;
	esac
	[ -n "${ZRAMFS_OPTS:-}" ] && o=${o:+$o,}$ZRAMFS_OPTS
	echo "$o"
}

is_mounted() { awk -v p="$1" '$5 == p { f = 1 } END { exit !f }' /proc/self/mountinfo; }

# uring_enable: lets FUSE mounts use io_uring (zramfs-uring) until the
# cleanup puts the parameter back.
URING_PARAM=/sys/module/fuse/parameters/enable_uring
BENCH_URING_OLD=
uring_enable() {
	[ -w "$URING_PARAM" ] || die "zramfs-uring: $URING_PARAM is missing (a kernel without FUSE over io_uring)"
	[ -n "$BENCH_URING_OLD" ] || BENCH_URING_OLD=$(cat "$URING_PARAM")
	echo Y >"$URING_PARAM"
}

# mount_system NAME DIR [EXTRA_ZRAMFS_OPTS]: makes DIR a fresh, empty
# filesystem of system NAME.  zram is sized $ZRAM_DISKSIZE (default 6G).
mount_system() {
	local sys=$1 dir=$2 extra=${3:-} n
	mkdir -p "$dir"
	case $sys in
	tmpfs)
		BENCH_SHM0[$dir]=$(shmem_bytes)
		mount -t tmpfs -o size=90%,mode=0755 tmpfs "$dir"
		BENCH_MOUNTS+=("$dir")
		;;
	plain)
		# a directory on the disk (BENCH_TMP is under BENCH_DISK)
		;;
	zram)
		zram_usable || die "zram0 is missing or busy"
		BENCH_ZRAM=1
		echo lz4 >/sys/block/zram0/comp_algorithm
		echo "${ZRAM_DISKSIZE:-6G}" >/sys/block/zram0/disksize
		mkfs.ext4 -q -F /dev/zram0
		mount /dev/zram0 "$dir"
		BENCH_MOUNTS+=("$dir")
		;;
	zramfs*)
		local opts back="$dir.backing"
		opts=$(zramfs_opts "$sys")
		[ "$sys" = zramfs-uring ] && uring_enable
		[ -n "$extra" ] && opts=${opts:+$opts,}$extra
		mkdir -p "$back"
		local args=(-f)
		[ -n "$opts" ] && args+=(-o "$opts")
		env --default-signal=INT,QUIT "$ZRAMFS" "${args[@]}" "$back" "$dir" \
			</dev/null >"$dir.log" 2>&1 &
		BENCH_PID[$dir]=$!
		echo "$!" >"$BENCH_TMP/.pid.$!"
		BENCH_MOUNTS+=("$dir")
		for n in $(seq 100); do
			is_mounted "$dir" && break
			kill -0 "${BENCH_PID[$dir]}" 2>/dev/null || { cat "$dir.log" >&2; die "zramfs exited before mounting $dir"; }
			sleep 0.1
		done
		is_mounted "$dir" || die "zramfs did not mount $dir in 10 s"
		;;
	*) die "unknown system '$sys'" ;;
	esac
	BENCH_SYS[$dir]=$sys
}

# umount_system DIR: unmounts (a zramfs daemon writes back and exits), resets
# zram, removes the directory and a zramfs backing directory.
umount_system() {
	local dir=$1 sys=${BENCH_SYS[$1]:-} pid n
	case $sys in
	zramfs*)
		pid=${BENCH_PID[$dir]}
		umount "$dir" 2>/dev/null || fusermount3 -u "$dir" 2>/dev/null || true
		for n in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$pid" 2>/dev/null; then
			say "daemon $pid did not exit in 60 s, killed"
			kill -9 "$pid" 2>/dev/null || true
			umount -l "$dir" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
		rm -f "$BENCH_TMP/.pid.$pid"
		unset "BENCH_PID[$dir]"
		rm -rf --one-file-system "$dir.backing"
		;;
	tmpfs) umount "$dir" ;;
	zram)
		umount "$dir"
		echo 1 >/sys/block/zram0/reset
		BENCH_ZRAM=0
		;;
	plain) ;;
	esac
	unset "BENCH_SYS[$dir]"
	rm -rf --one-file-system "$dir"
}

# daemon_pid DIR: the zramfs daemon serving DIR (empty for other systems).
daemon_pid() { echo "${BENCH_PID[$1]:-}"; }

# zstat DIR NAME: one value of DIR/.zramfs/stats.
zstat() { awk -v n="$2" '$1 == n { print $2; exit }' "$1/.zramfs/stats"; }

# daemon_cpu_ticks PID: utime+stime in clock ticks.
daemon_cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# daemon_rss PID: resident bytes.
daemon_rss() { awk '/^VmRSS:/ { printf "%.0f\n", $2 * 1024 }' "/proc/$1/status"; }

# src_majmin NODE: MAJ:MIN of the block device node NODE.
src_majmin() { printf '%d:%d\n' "0x$(stat -Lc %t "$1")" "0x$(stat -Lc %T "$1")"; }

# dev_majmin DIR: MAJ:MIN of the block device that holds DIR's filesystem:
# the mount's own number when /proc/diskstats has it (partitions, loop and
# dm devices), else its source node's (btrfs); nothing when there is none.
# A partition's is its disk's with -w (whole: blkio throttles whole disks).
dev_majmin() {
	local majmin src whole=0
	[ "$1" = -w ] && whole=1 && shift
	majmin=$(findmnt -n -o MAJ:MIN --target "$1")
	majmin=${majmin// /}
	if ! awk -v mm="$majmin" '$1 ":" $2 == mm { f = 1 } END { exit !f }' /proc/diskstats; then
		majmin=
		src=$(findmnt -n -o SOURCE --target "$1")
		src=${src%%\[*}
		if [ -b "$src" ]; then majmin=$(src_majmin "$src"); fi
	fi
	if [ "$whole" = 1 ] && [ -n "$majmin" ] && [ -e "/sys/dev/block/$majmin/partition" ]; then
		majmin=$(cat "/sys/dev/block/$majmin/../dev")
	fi
	echo "$majmin"
}

# dev_written DIR: bytes written so far to the device of the filesystem
# that holds DIR, found in /proc/diskstats by its device number (LVM and dm
# devices, partitions, loop devices), else by the device number of its
# source's node (btrfs, whose device numbers are anonymous, also on
# /dev/mapper/...), else by its name; nothing when there is none (overlay,
# nfs).
dev_written() {
	local majmin src srcmm=
	majmin=$(findmnt -n -o MAJ:MIN --target "$1")
	src=$(findmnt -n -o SOURCE --target "$1")
	src=${src%%\[*}
	[ -b "$src" ] && srcmm=$(src_majmin "$src")
	awk -v mm="${majmin// /}" -v smm="$srcmm" -v d="$(basename "$src")" '
		$1 ":" $2 == mm { by_num = $10 * 512 }
		$1 ":" $2 == smm { by_src = $10 * 512 }
		$3 == d { by_name = $10 * 512 }
		END {
			if (by_num != "") printf "%.0f\n", by_num
			else if (by_src != "") printf "%.0f\n", by_src
			else if (by_name != "") printf "%.0f\n", by_name
		}' /proc/diskstats
}

# disk_written: dev_written of BENCH_TMP (the plain system and the zramfs
# backing directories); 0 when there is no device (the machine description
# says so).
disk_written() {
	local v
	v=$(dev_written "$BENCH_TMP")
	echo "${v:-0}"
}

# mem_used DIR: RAM (bytes) the system behind DIR holds for its data, page
# cache excluded (call drop_caches first): zram mm_stat mem_used_total; tmpfs
# Shmem growth since the mount; zramfs the daemon's RSS (which contains the
# pool, .zramfs/stats mem_used_total); plain 0.
mem_used() {
	local dir=$1
	case ${BENCH_SYS[$dir]} in
	tmpfs) echo $(($(shmem_bytes) - BENCH_SHM0[$dir])) ;;
	zram) awk '{ print $3 }' /sys/block/zram0/mm_stat ;;
	zramfs-none) daemon_rss "${BENCH_PID[$dir]}" ;;
	zramfs*) daemon_rss "${BENCH_PID[$dir]}" ;;
	plain) echo 0 ;;
	esac
}

# tier_used DIR: .zramfs/stats mem_used_total (zramfs), else mem_used.
tier_used() {
	case ${BENCH_SYS[$1]} in
	zramfs-none) echo 0 ;;
	zramfs*) zstat "$1" mem_used_total ;;
	*) mem_used "$1" ;;
	esac
}

# cgroup_make NAME LIMIT: makes a v1 memory cgroup and sets CG to its path
# (not in a subshell: it records the cgroup for the cleanup).
cgroup_make() {
	CG=/sys/fs/cgroup/memory/$1
	mkdir "$CG"
	BENCH_CGROUPS+=("$CG")
	echo "$2" >"$CG/memory.limit_in_bytes"
}

# blkio_check READ_IOPS READ_BPS: dies unless blkio_make can throttle
# them (numbers, the blkio controller, a disk under BENCH_TMP); prints the
# disk's MAJ:MIN.
blkio_check() {
	local v mm
	for v in "$1" "$2"; do
		[[ -z "$v" || "$v" =~ ^[1-9][0-9]*$ ]] || die "read throttle '$v': want a positive number"
	done
	[ -d /sys/fs/cgroup/blkio ] || die "the cgroup v1 blkio controller is not at /sys/fs/cgroup/blkio"
	mm=$(dev_majmin -w "$BENCH_TMP")
	[ -n "$mm" ] || die "no block device under $BENCH_TMP to throttle"
	echo "$mm"
}

# blkio_make NAME READ_IOPS READ_BPS: makes a v1 blkio cgroup whose reads
# from the disk of BENCH_TMP (the bench disk; all of it, when that is a
# partition) are throttled to READ_IOPS requests and READ_BPS bytes a
# second (either may be empty: not that limit), and sets CG to its path.
# Dies as blkio_check does.  (Cgroup v1 throttles only the I/O a task
# submits itself: its reads, not the flusher's writeback.)
blkio_make() {
	local mm
	mm=$(blkio_check "$2" "$3") || exit 1
	CG=/sys/fs/cgroup/blkio/$1
	mkdir "$CG"
	BENCH_CGROUPS+=("$CG")
	[ -z "$2" ] || echo "$mm $2" >"$CG/blkio.throttle.read_iops_device"
	[ -z "$3" ] || echo "$mm $3" >"$CG/blkio.throttle.read_bps_device"
}

# cgroup_remove CG: moves its processes, with all their threads, to its
# parent (the hierarchy's root, for the cgroups made here) and removes it.
cgroup_remove() {
	local cg=$1 p
	[ -d "$cg" ] || return 0
	for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do
		echo "$p" >"${cg%/*}/cgroup.procs" 2>/dev/null || true
	done
	rmdir "$cg" 2>/dev/null || { sleep 1; rmdir "$cg" 2>/dev/null; } || say "cannot remove cgroup $cg"
}

# src_tmpfs SIZE: mounts a tmpfs at $BENCH_TMP/src for input data
# (drop_caches does not evict it, so reading the input costs no disk I/O) and
# sets SRC to its path.  Not in a subshell: it records the mount.
src_tmpfs() {
	local d=$BENCH_TMP/src
	SRC=$d
	if ! is_mounted "$d"; then
		mkdir -p "$d"
		mount -t tmpfs -o "size=$1,mode=0755" tmpfs "$d"
		BENCH_MOUNTS+=("$d")
		BENCH_SYS[$d]=srctmpfs
	fi
}

# mixed_data BYTES FILE: FILE = BYTES of what a Debian machine holds: docs,
# headers, shared libraries, programs, concatenated (cached in BENCH_CACHE).
mixed_data() {
	local bytes=$1 file=$2 cache=$BENCH_CACHE/mixed.$1
	if [ ! -s "$cache" ]; then
		say "generating $bytes bytes of mixed data (/usr/share/doc, /usr/include, /usr/lib/x86_64-linux-gnu/*.so*, /usr/bin)"
		{
			find /usr/share/doc /usr/include -type f -print0 | sort -z | xargs -0 cat 2>/dev/null || true
			find /usr/lib/x86_64-linux-gnu -maxdepth 1 -name '*.so*' -type f -print0 | sort -z | xargs -0 cat 2>/dev/null || true
			find /usr/bin -type f -print0 | sort -z | xargs -0 cat 2>/dev/null || true
		} | head -c "$bytes" >"$cache.tmp" || true
		[ "$(stat -c %s "$cache.tmp")" = "$bytes" ] || die "not enough data on this machine for $bytes bytes"
		mv "$cache.tmp" "$cache"
	fi
	cp "$cache" "$file"
}

# ratio_of FILE CODEC: compression ratio (orig/compressed) of FILE by the
# lz4 (default level) or zstd -3 command-line tools.
ratio_of() {
	local c
	case $2 in
	lz4) c=$(lz4 -1 -c "$1" | wc -c) ;;
	zstd) c=$(zstd -3 -T0 -c "$1" | wc -c) ;;
	esac
	awk -v a="$(stat -c %s "$1")" -v b="$c" 'BEGIN { printf "%.2f", a / b }'
}

# tsv_header FILE COLS...: starts a TSV result file.
tsv_header() {
	local f=$1
	shift
	(IFS=$'\t'; echo "$*") >"$f"
}

# tsv_row FILE VALS...: appends a row.
tsv_row() {
	local f=$1
	shift
	(IFS=$'\t'; echo "$*") >>"$f"
}

# bench_cleanup: the EXIT trap; removes everything this script created.
bench_cleanup() {
	local rc=$? i d
	trap - EXIT INT HUP TERM
	set +e
	if [ -n "$BENCH_WATCHDOG" ]; then
		kill "$BENCH_WATCHDOG" 2>/dev/null
		wait "$BENCH_WATCHDOG" 2>/dev/null
	fi
	for i in "${!BENCH_CGROUPS[@]}"; do
		cgroup_remove "${BENCH_CGROUPS[$i]}"
	done
	for ((i = ${#BENCH_MOUNTS[@]} - 1; i >= 0; i--)); do
		d=${BENCH_MOUNTS[$i]}
		is_mounted "$d" || continue
		case ${BENCH_SYS[$d]:-} in
		zramfs*)
			umount "$d" 2>/dev/null || fusermount3 -uz "$d" 2>/dev/null || umount -l "$d" 2>/dev/null
			;;
		*) umount "$d" 2>/dev/null || umount -l "$d" 2>/dev/null ;;
		esac
	done
	for d in "${!BENCH_PID[@]}"; do
		local pid=${BENCH_PID[$d]} n
		for n in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$pid" 2>/dev/null && { say "cleanup: daemon $pid killed"; kill -9 "$pid"; }
		wait "$pid" 2>/dev/null
	done
	for ((i = ${#BENCH_MOUNTS[@]} - 1; i >= 0; i--)); do
		d=${BENCH_MOUNTS[$i]}
		is_mounted "$d" && { umount -l "$d" 2>/dev/null || say "cleanup: cannot unmount $d"; }
	done
	if [ -n "$BENCH_URING_OLD" ]; then
		echo "$BENCH_URING_OLD" >"$URING_PARAM" 2>/dev/null || say "cleanup: cannot restore $URING_PARAM"
	fi
	if [ "$BENCH_ZRAM" = 1 ]; then
		echo 1 >/sys/block/zram0/reset 2>/dev/null || say "cleanup: cannot reset zram0"
	fi
	if [ -n "$BENCH_TMP" ] && [ -d "$BENCH_TMP" ]; then
		rm -rf --one-file-system "$BENCH_TMP"
	fi
	echo "== $BENCH_NAME: $([ "$rc" = 0 ] && echo done || echo "FAILED (exit $rc)") in $(($(date +%s) - BENCH_T0))s" >&2
	exit "$rc"
}
