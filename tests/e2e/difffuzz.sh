#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# difffuzz: zramfs against tmpfs, operation by operation.  zr_difffuzz runs
# the same random operations (open/create with O_EXCL, O_TRUNC, O_APPEND,
# O_DIRECT; write, pwrite, read of 1 B..300 KiB, 4 KiB-aligned on O_DIRECT
# descriptors; writes and ftruncate as user 1000, which clear set-id bits;
# truncate, ftruncate, fallocate and hole punches; fsync; renameat2 with
# RENAME_NOREPLACE and RENAME_EXCHANGE; link, unlink of open files, mkdir,
# rmdir, symlink, readlink, chmod with S_ISUID, S_ISGID, S_ISVTX; chown,
# lchown, fchown to other users and groups; utimensat, user.* xattrs, stat,
# readdir; mmap(MAP_SHARED) with stores, loads, msync and munmap, inside
# the size; copy_file_range between files and within one, also past the
# end of the source; FIFOs made with mknod, renamed, unlinked, stat;
# open(2) with O_TMPFILE (also O_EXCL) in a random directory, written,
# read, truncated and fstat, then closed nameless, linked with linkat(2)
# of /proc/self/fd/N or AT_EMPTY_PATH, or kept open for later operations
# and a later linkat of the descriptor) in a
# directory of the mount and in a directory on tmpfs, and fails on the
# first call whose result, errno, data or attributes differ.
#
# The run is cut into rounds.  Each round mounts zramfs with the next set
# of options (so data written under one set is read back under another),
# compares the two trees (names, types, modes, sizes, contents, link
# targets, xattrs, link counts, explicit mtimes; and every mtime with what
# the mount showed before the last unmount), runs a chunk of operations,
# unmounts, and compares the backing directory, as written back, in the
# same way.  The sets: the defaults;
# size=8m,dirty_expire=1s with larger files, pauses and a 24 MiB ballast
# file written in random order (blocks are demoted and written back while
# files are open, renamed, unlinked); block_size=4k,comp=zstd;
# size=2m,dirty_expire=1s with 16k blocks and policy=lru (demotes without
# a ballast); 128k blocks with cache=writethrough; cache=none (no tier:
# every WRITE goes to the backing file as it comes).
#
# Environment: ZR_DIFFFUZZ_SEED (random by default, printed),
# ZR_DIFFFUZZ_OPS (operations a round, 2500), ZR_DIFFFUZZ_ROUNDS (10),
# ZR_DIFFFUZZ_VERBOSE=1 (zr_difffuzz -v: every operation in the output),
# ZR_DIFFFUZZ_STRICT=1 (zr_difffuzz -t: also check what zramfs is known
# to do otherwise, see below).
# A failure prints the command that repeats the whole sequence and the
# zr_difffuzz command of the failing round; zr_difffuzz -v prints each
# operation.  Not compared (tmpfs and an ext4-backed FUSE filesystem
# legitimately differ): st_dev, st_ino, st_blocks, atime, ctime, the size of
# directories, directory offsets, xattr list order.  A known divergence,
# checked only with ZR_DIFFFUZZ_STRICT=1: a truncate(2) to the size the
# file has moves the mtime on tmpfs (Linux 6.18) and not on zramfs, where
# the kernel owns a cached file's mtime and moves it only when the size
# changes (the backing file keeps the time the mount shows, 7cf5864); and
# after such a truncate(2) the kernel never sends the mtime that an earlier
# write still in its cache set, so the backing file keeps the daemon's (up
# to a jiffy off) and the file's mtime moves across the unmount.
. "$(dirname "$0")/lib.sh"
SEED=${ZR_DIFFFUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
OPS=${ZR_DIFFFUZZ_OPS:-2500}
ROUNDS=${ZR_DIFFFUZZ_ROUNDS:-10}
STRICT=${ZR_DIFFFUZZ_STRICT:-0}
VERBOSE=${ZR_DIFFFUZZ_VERBOSE:-0}
# (the default run takes about 20 s; a watchdog for long runs too)
ZR_TIMEOUT=$((120 + ROUNDS * OPS / 100))
zr_init
FUZZ=$(zr_helper zr_difffuzz)

REPRO="ZR_DIFFFUZZ_SEED=$SEED ZR_DIFFFUZZ_OPS=$OPS ZR_DIFFFUZZ_ROUNDS=$ROUNDS ZR_DIFFFUZZ_STRICT=$STRICT make check TESTS=tests/e2e/difffuzz.sh"
say "seed $SEED: $ROUNDS rounds of $OPS operations (repeat with: $REPRO)"

# The reference tree on tmpfs: in our temporary directory if that is on
# tmpfs, else a tmpfs mounted there (the EXIT trap unmounts it), else in
# /dev/shm.
REF=$ZR_TMP/ref
mkdir -p "$REF"
if [ "$(stat -f -c %T "$ZR_TMP")" != tmpfs ]; then
	if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=1g,mode=0755 tmpfs "$REF" 2>/dev/null; then
		say "reference tree on a tmpfs mounted on $REF"
	elif [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
		REF=$(mktemp -d /dev/shm/zr-difffuzz.XXXXXX); then
		ZR_ATEXIT+=("rm -rf '$REF'")
		say "reference tree in $REF"
	else
		zr_skip "no tmpfs for the reference tree"
	fi
fi
[ "$(stat -f -c %T "$REF")" = tmpfs ] || fail "$REF is not on tmpfs"

BK=$ZR_TMP/backing MNT=$ZR_TMP/mnt STATE=$ZR_TMP/mtimes SNAP=$ZR_TMP/snapshot
mkdir -p "$BK/w" "$MNT" "$REF/w"

# option sets of the rounds, in turn, and the zr_difffuzz options of each
SETS=(
	""
	"size=8m,dirty_expire=1s"
	"block_size=4k,comp=zstd"
	"size=2m,dirty_expire=1s,block_size=16k,policy=lru"
	"block_size=128k,cache=writethrough"
	"cache=none"
)
ARGS=(
	""
	"-l 6m -B 24m -p 300"
	""
	"-l 6m -p 300"
	""
	""
)

# ZR_E2E_OPTS with xattr=off: the mount has no xattrs, tmpfs has; neither
# the rounds nor the compares touch them.
XOFF=()
case ",${ZR_E2E_OPTS:-}," in *,xattr=off,*)
	XOFF=(-X setxattr,getxattr,listxattr,removexattr,fxattr)
	say "xattr=off in ZR_E2E_OPTS: xattrs neither fuzzed nor compared" ;;
esac

# fuzz_cmp WHAT A: compares tree A with the reference, and its mtimes with
# those the last round saw before its unmount; fails with WHAT.
fuzz_cmp() {
	local out snap=()
	[ -f "$SNAP" ] && snap=(-S "$SNAP")
	if ! out=$("$FUZZ" compare ${XOFF[@]+"${XOFF[@]}"} -M "$STATE" "${snap[@]}" "$2" "$REF/w" 2>&1); then
		echo "$out" | head -n 30 >&2
		if [ -f "$ZR_TMP/run.out" ]; then
			echo "  the end of the last round's output (ZR_DIFFFUZZ_VERBOSE=1: every operation; $ZR_TMP/run.out with ZR_E2E_KEEP=1):" >&2
			tail -n 40 "$ZR_TMP/run.out" | sed 's/^/    /' >&2
		fi
		echo "  repeat the whole sequence: $REPRO" >&2
		fail "the trees differ $1"
	fi
	say "ok: ${out#zr_difffuzz: }"
}

for r in $(seq 0 $((ROUNDS - 1))); do
	i=$((r % ${#SETS[@]}))
	opts=${SETS[$i]}
	# (a word list: the options of the set)
	read -r -a args <<<"${ARGS[$i]}"
	[ "$STRICT" = 1 ] && args+=(-t)
	[ "$VERBOSE" = 1 ] && args+=(-v)
	args+=(${XOFF[@]+"${XOFF[@]}"})
	seed=$((SEED + r))
	say "round $r: -o '${opts:-defaults}', seed $seed"
	zr_mount "$opts" "$BK" "$MNT"
	fuzz_cmp "after the remount with -o '${opts:-defaults}' (round $r)" "$ZR_MNT/w"
	cmd=("$FUZZ" run -s "$seed" -n "$OPS" "${args[@]}" -M "$STATE" -S "$SNAP" "$ZR_MNT/w" "$REF/w")
	if ! "${cmd[@]}" >"$ZR_TMP/run.out" 2>&1; then
		tail -n 60 "$ZR_TMP/run.out" >&2
		echo "  the round: ${cmd[*]} (mount -o '${opts:-defaults}', after $r earlier rounds)" >&2
		echo "  repeat the whole sequence: $REPRO" >&2
		fail "zr_difffuzz found a divergence in round $r"
	fi
	tail -n 1 "$ZR_TMP/run.out" | sed 's/^/     /'
	if zr_stats_on; then
		say "stats: demotions $(zr_stat demotions), writebacks $(zr_stat writebacks), misses $(zr_stat misses), writeback_errors $(zr_stat writeback_errors)"
	fi
	zr_umount
	fuzz_cmp "in the backing directory after the unmount (round $r)" "$BK/w"
done

zr_mount "" "$BK" "$MNT"
fuzz_cmp "after the last remount" "$ZR_MNT/w"
zr_umount
say "ok: $ROUNDS rounds of $OPS operations, seed $SEED: no divergence"
