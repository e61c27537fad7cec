#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# bad_options: every bad mount option or value, a missing backing directory,
# a backing path that is a regular file, a mount point already in use or
# inside the backing directory (the daemon would reach its own mount) are
# refused (so are -o remount, which mount(8) hands to the helper, and a
# backing directory another zramfs is mounted from): non-zero exit, a
# message on stderr that names the bad thing, nothing mounted, and (for
# a daemon built with the sanitizers) no sanitizer report.
# Positive controls first: the same options with good values mount and
# show in .zramfs/config, so a daemon that refuses everything does not
# pass.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "checks the daemon's option parsing"

B=$ZR_TMP/backing M=$ZR_TMP/mnt F=$ZR_TMP/regular
mkdir -p "$B" "$M"
echo "not a directory" >"$F"

say "--help and --version"
"$ZRAMFS" --help >"$ZR_TMP/help" 2>&1 || fail "--help exits non-zero"
for o in size= comp= comp_level= cold_comp= cold_level= block_size= min_saving= \
	policy= dirty_expire= seq_cutoff= cache= read_ahead= max_read= cpu_latency= busy_poll= xattr= uring= stream_direct= acl= allow_other; do
	grep -q -- "$o" "$ZR_TMP/help" || fail "--help does not mention $o"
done
"$ZRAMFS" --version >"$ZR_TMP/version" 2>&1 || fail "--version exits non-zero"
grep -q '[0-9]\.[0-9]' "$ZR_TMP/version" || fail "--version prints no version"

say "positive controls: good values mount"
zr_mount "size=8M,comp=zstd,comp_level=5,cold_comp=lz4hc,block_size=4k,policy=lru,cache=writethrough,dirty_expire=500ms,min_saving=20%,seq_cutoff=1m" "$B" "$M"
for kv in "size 8388608" "comp zstd" "comp_level 5" "cold_comp lz4hc" "block_size 4096" \
	"policy lru" "cache writethrough" "dirty_expire 500" "seq_cutoff 1048576"; do
	grep -qx "$kv" "$ZR_MNT/.zramfs/config" || fail "config lacks '$kv'"
done
zr_umount
zr_mount "size=1%,comp=none,block_size=128k,cache=none,policy=adaptive,dirty_expire=2s" "$B" "$M"
grep -qx "block_size 131072" "$ZR_MNT/.zramfs/config" || fail "config lacks 'block_size 131072'"
# no tier: nothing to write back (zramfsctl umount asks first, and failed
# with EOPNOTSUPP), no budget to change
echo "writeback all" >"$ZR_MNT/.zramfs/control" ||
	fail "'writeback all' fails with cache=none, where there is nothing to write back"
! sh -c "echo size=8m >'$ZR_MNT/.zramfs/control'" 2>/dev/null ||
	fail "'size=8m' was taken with cache=none, which has no budget"
zr_umount
zr_mount "comp=lz4hc,size=1g" "$B" "$M"
grep -qx "size 1073741824" "$ZR_MNT/.zramfs/config" || fail "config lacks 'size 1073741824'"
zr_umount
say "the config shows the backing directory resolved, not as typed"
ln -s backing "$ZR_TMP/blink"
cd "$ZR_TMP"
zr_mount "" "blink//" "$M"
cd - >/dev/null
grep -qx "backing $B" "$ZR_MNT/.zramfs/config" ||
	fail "'zramfs blink// $M' in $ZR_TMP: config lacks 'backing $B': $(grep '^backing' "$ZR_MNT/.zramfs/config")"
zr_umount

# (only root may write a bdi's read_ahead_kb; another user's daemon logs
# that and leaves the kernel's)
ras="default:1024 256k:256 4m:4096 0:"
[ "$(id -u)" = 0 ] || ras=
[ -n "$ras" ] || say "not root: the read_ahead checks are left out"
[ -z "$ras" ] || say "read_ahead reaches the kernel's bdi of the mount (default 1m, 0 = kernel's)"
for ra in $ras; do
	opt=${ra%%:*} want=${ra#*:}
	if [ "$opt" = default ]; then zr_mount "" "$B" "$M"; else zr_mount "read_ahead=$opt" "$B" "$M"; fi
	ls "$ZR_MNT" >/dev/null	# INIT is answered by now
	bdi=/sys/class/bdi/$(mountpoint -d "$ZR_MNT")/read_ahead_kb
	[ -r "$bdi" ] || fail "no $bdi"
	[ -n "$want" ] || want=128	# VM_READAHEAD_PAGES, what FUSE clamps to
	# the daemon writes it right after its INIT reply, which may let
	# the ls above be served first (it was, under valgrind)
	for _ in $(seq 50); do
		[ "$(cat "$bdi")" = "$want" ] && break
		sleep 0.1
	done
	[ "$(cat "$bdi")" = "$want" ] || fail "read_ahead=$opt: $bdi is $(cat "$bdi") 5 s after the mount, want $want"
	zr_umount
done

say "max_read reaches the kernel (default 512k) and files read whole through it"
{ head -c 1000000 /dev/urandom; seq 1 300000; } >"$ZR_TMP/data"	# raw and compressed blocks
for mr in default:524288 4k:4096 128k:131072 1m:1048576; do
	opt=${mr%%:*} want=${mr#*:}
	if [ "$opt" = default ]; then zr_mount "" "$B" "$M"; else zr_mount "max_read=$opt" "$B" "$M"; fi
	awk -v m="$ZR_MNT" '$5 == m' /proc/self/mountinfo | grep -q "max_read=$want\b" ||
		fail "max_read=$opt: the mount's options lack max_read=$want"
	grep -qx "max_read $want" "$ZR_MNT/.zramfs/config" || fail "max_read=$opt: config lacks 'max_read $want'"
	cp "$ZR_TMP/data" "$ZR_MNT/data"
	sync -f "$ZR_MNT/."
	zr_drop_kcache
	cmp "$ZR_TMP/data" "$ZR_MNT/data" || fail "max_read=$opt: the file read back differs"
	rm "$ZR_MNT/data"
	zr_umount
done

# nmounts: how many mounts are on $M or $B now.
nmounts() {
	awk -v m="$M" -v b="$B" '$5 == m || $5 == b' /proc/self/mountinfo | wc -l
}

# refused WANT ARGS...: zramfs ARGS (daemonizing, as users run it) must
# exit non-zero, leave nothing mounted, and name the problem on stderr:
# every word of WANT (separated by '&', e.g. the option and the value) must
# be in the message.
refused() {
	local want=$1 rc=0 m w before
	shift
	before=$(nmounts)
	timeout 20 "$ZRAMFS" "$@" >"$ZR_TMP/out" 2>"$ZR_TMP/err" || rc=$?
	if [ "$(nmounts)" != "$before" ]; then
		for m in "$M" "$B"; do
			fusermount3 -u "$m" 2>/dev/null || true
		done
		fail "'zramfs $*' mounted something"
	fi
	[ "$rc" != 124 ] || fail "'zramfs $*' hung"
	[ "$rc" != 0 ] || fail "'zramfs $*' exited 0"
	# (make check-sanitize runs this test with a sanitized daemon: what
	# a refusal leaves behind shows here, a leak as exit 23)
	! grep -q 'Sanitizer' "$ZR_TMP/err" ||
		fail "'zramfs $*': a sanitizer report: $(grep -m3 -A4 'Sanitizer' "$ZR_TMP/err")"
	IFS='&' read -ra w <<<"$want"
	for m in "${w[@]}"; do
		grep -qiF -- "$m" "$ZR_TMP/err" ||
			fail "'zramfs $*': stderr does not name '$m': $(cat "$ZR_TMP/err")"
	done
	say "ok (exit $rc): $(head -n 1 "$ZR_TMP/err")"
}
say "bad options"
refused "size&abc" -o size=abc "$B" "$M"
refused "size&-1" -o size=-1 "$B" "$M"
refused "size&200%" -o size=200% "$B" "$M"
refused "comp&foo" -o comp=foo "$B" "$M"
refused "cold_comp&bogus" -o cold_comp=bogus "$B" "$M"
refused "block_size&3000" -o block_size=3000 "$B" "$M"
refused "block_size&1M" -o block_size=1M "$B" "$M"
refused "block_size&2k" -o block_size=2k "$B" "$M"
refused "policy&xyz" -o policy=xyz "$B" "$M"
refused "cache&maybe" -o cache=maybe "$B" "$M"
refused "dirty_expire&soon" -o dirty_expire=soon "$B" "$M"
refused "min_saving&200%" -o min_saving=200% "$B" "$M"
refused "seq_cutoff&lots" -o seq_cutoff=lots "$B" "$M"
refused "max_read&6000" -o max_read=6000 "$B" "$M"
refused "cpu_latency&-5" -o cpu_latency=-5 "$B" "$M"
refused "busy_poll&5000" -o busy_poll=5000 "$B" "$M"
refused "xattr&maybe&on or off" -o xattr=maybe "$B" "$M"
refused "acl&yes&on or off" -o acl=yes "$B" "$M"
refused "acl=on&xattr=off" -o acl=on,xattr=off "$B" "$M"
refused "acl=on&no_default_permissions" -o acl=on,no_default_permissions "$B" "$M"
refused "uring&1&on or off" -o uring=1 "$B" "$M"
refused "stream_direct&yes&on or off" -o stream_direct=yes "$B" "$M"
refused "dirty_expire&0x10" -o dirty_expire=0x10 "$B" "$M"
refused "seq_cutoff&1e3" -o seq_cutoff=1e3 "$B" "$M"
refused "no_default_permissions&with -o allow_other" -o no_default_permissions,allow_other "$B" "$M"
refused "no_default_permissions&with -o allow_root" -o no_default_permissions,allow_root "$B" "$M"
refused "no_default_permissions&with -o default_permissions" -o no_default_permissions,default_permissions "$B" "$M"
refused comp_level -o comp=zstd,comp_level=high "$B" "$M"
refused frobnicate -o frobnicate=1 "$B" "$M"
refused frobnicate -o frobnicate "$B" "$M"
say "bad directories"
refused "$ZR_TMP/missing" -o size=8M "$ZR_TMP/missing" "$M"
refused "$F" "$F" "$M"
refused "$ZR_TMP/nomnt" "$B" "$ZR_TMP/nomnt"
mkdir -p "$B/sub"
refused "inside the backing directory" "$B" "$B/sub"
# the message quotes the backing directory as typed
cd "$ZR_TMP"
refused "inside the backing directory 'blink/'" blink/ "$B/sub"
cd - >/dev/null
rmdir "$B/sub"

say "mount point already in use"
zr_mount "size=8M" "$B" "$M"
refused "$M" "$B" "$M"
zr_is_mounted "$M" || fail "the first mount is gone after the refused second one"
[ "$(awk -v p="$M" '$5 == p' /proc/self/mountinfo | wc -l)" = 1 ] ||
	fail "$M is mounted more than once"
echo still >"$ZR_MNT/alive" || fail "the first mount stopped working"
# the same backing directory on another mount point: refused (after 10 s:
# the mount may be a dead one whose daemon is finishing), naming the
# mount (the message spoke of a previous mount only)
mkdir -p "$ZR_TMP/m2"
refused "in use by the zramfs mounted on '$M'" "$B" "$ZR_TMP/m2"
# a directory below it, or above it: two daemons would cache and write
# back the files they share (both mounted before; helper-66)
mkdir -p "$B/sub"
refused "overlaps '$B'&'$M'" "$B/sub" "$ZR_TMP/m2"
OUT=$(mktemp -d /tmp/zr-e2e-bad_options-out.XXXXXX)
ZR_ATEXIT+=("rmdir $OUT")
refused "overlaps '$B'&'$M'" "$ZR_TMP" "$OUT"
rmdir "$B/sub"
# mount -o remount,size=1G runs the helper with remount among the options:
# it must point to zramfsctl set, not say the mount point is in use
refused "remount&zramfsctl set" -o remount,size=1G "$B" "$M"
zr_is_mounted "$M" || fail "the mount is gone after a refused remount"
zr_umount
[ "$(cat "$B/alive")" = still ] || fail "data of the first mount lost"
