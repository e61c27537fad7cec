#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# control_stats: the hidden .zramfs directory.  stats parses ("name value",
# every documented name present) and its counters move as they must: zeros
# raise blocks_zero, text compresses better than 1.5:1, writes leave dirty
# blocks that `writeback all` cleans, written blocks are compressed once
# writes pause (blocks_pending), reads after drop_clean miss and then
# hit; `size=` and `dirty_expire=` change the config live; an unknown
# command fails with EINVAL; .zramfs is not listed by readdir.  zramfsctl
# lists the mount, prints valid JSON, and gives up (status 1, a message)
# on the mount after --timeout while its daemon is stopped.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "reads the daemon's statistics"

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
find /usr/include -type f -name '*.h' 2>/dev/null | LC_ALL=C sort | xargs -r cat 2>/dev/null |
	head -c $((8 << 20)) >"$ZR_TMP/text" || true
[ "$(stat -c %s "$ZR_TMP/text")" -ge $((2 << 20)) ] || zr_skip "too few C headers for text data"
TEXT=$(stat -c %s "$ZR_TMP/text")
zr_mount "size=64M,dirty_expire=1h,block_size=64k,seq_cutoff=0" "$B" "$M"
M=$ZR_MNT
S=$M/.zramfs/stats

say "the control directory"
ls -a "$M" | grep -qx .zramfs && fail ".zramfs is listed by readdir of the root"
[ -d "$M/.zramfs" ] || fail ".zramfs cannot be reached by name"
for f in stats config control; do
	[ -e "$M/.zramfs/$f" ] || fail ".zramfs/$f missing"
done
grep -vqE '^[a-z_0-9]+ [0-9]+$' "$S" && fail "stats has a line that is not 'name number': $(grep -vE '^[a-z_0-9]+ [0-9]+$' "$S" | head -n 1)"
for n in orig_data_size compr_data_size mem_used_total mem_used_max meta_bytes budget \
	blocks_zero blocks_raw blocks_hot blocks_cold blocks_dirty hits misses \
	recompressions codec_errors demotions writebacks bytes_written_back writeback_errors enospc \
	files bytes_read_backing bytes_written_backing bytes_written_direct writes_direct rss_bytes; do
	grep -q "^$n " "$S" || fail "stats lacks $n"
done
[ "$(zr_stat budget)" = $((64 << 20)) ] || fail "budget is $(zr_stat budget) for size=64M"
[ "$(zr_stat rss_bytes)" -gt 0 ] || fail "rss_bytes is 0"
[ "$(zr_config block_size)" = 65536 ] || fail "config block_size is $(zr_config block_size)"

say "zeros raise blocks_zero"
z0=$(zr_stat blocks_zero)
dd if=/dev/zero of="$M/zeros" bs=1M count=8 status=none
z1=$(zr_stat blocks_zero)
say "blocks_zero $z0 -> $z1"
[ $((z1 - z0)) -ge 120 ] || fail "8 MiB of zeros in 64 KiB blocks raised blocks_zero by $((z1 - z0)), expected 128"

say "written blocks go in as they are while writes go on"
# (the fill thread compresses them after 50 ms without such a write: each
# small copy here comes sooner than that, unless the machine is very busy)
head -c $((256 << 10)) "$ZR_TMP/text" >"$ZR_TMP/small"
pmax=0
for i in $(seq 20); do
	cp "$ZR_TMP/small" "$M/small$i"
	p=$(zr_stat blocks_pending)
	[ "$p" -gt "$pmax" ] && pmax=$p
done
say "at most $pmax blocks pending compression"
[ "$pmax" -gt 0 ] || fail "no written block was ever pending compression"
zr_wait_settled 10 || fail "$(zr_stat blocks_pending) blocks still pending compression 10 s after the writes"
for i in $(seq 20); do
	cmp "$ZR_TMP/small" "$M/small$i" || fail "small$i differs once compressed"
done
rm -f "$M"/small*

say "text compresses"
o0=$(zr_stat orig_data_size) c0=$(zr_stat compr_data_size)
cp "$ZR_TMP/text" "$M/text"
zr_wait_settled 10 || fail "$(zr_stat blocks_pending) blocks still pending compression 10 s after cp"
o1=$(zr_stat orig_data_size) c1=$(zr_stat compr_data_size)
do_=$((o1 - o0)) dc=$((c1 - c0))
say "orig +$do_, compr +$dc for $TEXT bytes of text"
[ "$do_" -ge $((TEXT * 9 / 10)) ] || fail "orig_data_size grew by $do_ for $TEXT bytes"
[ "$dc" -gt 0 ] || fail "compr_data_size did not grow"
[ $((do_ * 10 / dc)) -gt 15 ] || fail "compression ratio of text $((do_ * 100 / dc))/100 is not above 1.5"
[ "$(zr_stat mem_used_total)" -gt "$dc" ] || fail "mem_used_total below the compressed data"
[ "$(zr_stat files)" -ge 2 ] || fail "files is $(zr_stat files) with two files written"

say "writeback all cleans the dirty blocks"
d=$(zr_stat blocks_dirty) w0=$(zr_stat writebacks) bw0=$(zr_stat bytes_written_backing)
[ "$d" -gt 0 ] || fail "blocks_dirty is 0 right after writing with dirty_expire=1h"
zr_ctl writeback all
[ "$(zr_stat blocks_dirty)" = 0 ] || fail "blocks_dirty is $(zr_stat blocks_dirty) after 'writeback all'"
[ "$(zr_stat writebacks)" -gt "$w0" ] || fail "writebacks did not grow"
bw1=$(zr_stat bytes_written_backing)
[ $((bw1 - bw0)) -ge "$TEXT" ] || fail "bytes_written_backing grew by $((bw1 - bw0)), the text is $TEXT"
cmp "$ZR_TMP/text" "$B/text" || fail "backing text differs after 'writeback all'"

if zr_can_drop_kcache; then
	say "misses after drop_clean, then hits"
	zr_ctl drop_clean
	m0=$(zr_stat misses) br0=$(zr_stat bytes_read_backing)
	zr_drop_kcache
	cmp "$ZR_TMP/text" "$M/text" || fail "text differs after drop_clean"
	m1=$(zr_stat misses) h1=$(zr_stat hits)
	[ "$m1" -gt "$m0" ] || fail "misses did not grow reading after drop_clean"
	[ "$(zr_stat bytes_read_backing)" -gt "$br0" ] || fail "bytes_read_backing did not grow on misses"
	zr_drop_kcache
	cmp "$ZR_TMP/text" "$M/text" || fail "text differs on the second read"
	h2=$(zr_stat hits)
	say "misses $m0 -> $m1, hits $h1 -> $h2"
	[ "$h2" -gt "$h1" ] || fail "hits did not grow re-reading cached blocks"
else
	say "cannot drop the kernel page cache (not root): hits/misses not checked"
fi

say "other commands"
for c in "writeback idle" "writeback raw" compact drop_clean; do zr_ctl "$c"; done
zr_ctl size=100%
[ "$(zr_stat budget)" -gt $((64 << 20)) ] || fail "budget is $(zr_stat budget) after size=100%"
grep -q "control: warning: size= .* is more than half the .*OOM killer" "$ZR_LOG" ||
	fail "size=100% through the control file gave no warning in the log: $(tail -2 "$ZR_LOG")"
zr_ctl size=32M
[ "$(zr_stat budget)" = $((32 << 20)) ] || fail "budget is $(zr_stat budget) after size=32M"
[ "$(zr_config size)" = $((32 << 20)) ] || fail "config size is $(zr_config size) after size=32M"
zr_ctl dirty_expire=5s
[ "$(zr_config dirty_expire)" = 5000 ] || fail "config dirty_expire is $(zr_config dirty_expire) after dirty_expire=5s (ms)"
zr_expect_err "Invalid argument" bash -c "echo bogus >'$M/.zramfs/control'"
zr_expect_err "Invalid argument" bash -c "echo size=lots >'$M/.zramfs/control'"
# a command longer than the daemon reads: refused whole, not cut to the
# command it starts with ("drop_clean" and 300 blanks ran drop_clean)
zr_expect_err "Invalid argument" bash -c "printf 'drop_clean%300sX\n' '' >'$M/.zramfs/control'"
grep -q "control: a command of 312 bytes refused" "$ZR_LOG" ||
	fail "a 312-byte command was not refused as such: $(grep control: "$ZR_LOG" | tail -2)"
[ "$(zr_stat budget)" = $((32 << 20)) ] || fail "a refused command changed the budget"

if [ -x "$ZRAMFSCTL" ]; then
	say "zramfsctl"
	"$ZRAMFSCTL" >"$ZR_TMP/ctl" || fail "zramfsctl failed"
	grep -qF "$M" "$ZR_TMP/ctl" || fail "zramfsctl does not list $M"
	"$ZRAMFSCTL" "$M" >"$ZR_TMP/ctl" || fail "zramfsctl $M failed"
	grep -qF "$M" "$ZR_TMP/ctl" || fail "zramfsctl $M does not show the mount"
	[ "$(wc -l <"$ZR_TMP/ctl")" -ge 2 ] || fail "zramfsctl $M prints no table"
	"$ZRAMFSCTL" --json "$M" >"$ZR_TMP/json" || fail "zramfsctl --json failed"
	# (the control file's spelling is taken too: it was read as a mount
	# point, and the command exited 1 having dropped nothing)
	for c in drop-clean drop_clean; do
		"$ZRAMFSCTL" "$c" "$M" || fail "zramfsctl $c $M failed"
	done
	grep -q orig_data_size "$ZR_TMP/json" || fail "JSON lacks orig_data_size"
	if command -v python3 >/dev/null; then
		python3 -m json.tool "$ZR_TMP/json" >/dev/null || fail "zramfsctl --json is not valid JSON"
		"$ZRAMFSCTL" --json | python3 -m json.tool >/dev/null || fail "zramfsctl --json (all) is not valid JSON"
	fi
	if zr_real; then
		say "zramfsctl gives up on a daemon that does not answer"
		kill -STOP "$ZR_PID"
		t0=$(date +%s%N) rc=0
		timeout 60 "$ZRAMFSCTL" --timeout 1 "$M" >"$ZR_TMP/ctl" 2>"$ZR_TMP/ctl.err" || rc=$?
		t1=$(date +%s%N)
		kill -CONT "$ZR_PID"
		[ "$rc" = 1 ] || fail "zramfsctl on a stopped daemon: exit $rc, want 1"
		grep -qF "$M: no answer in 1 s" "$ZR_TMP/ctl.err" ||
			fail "zramfsctl on a stopped daemon said: $(cat "$ZR_TMP/ctl.err")"
		[ $(( (t1 - t0) / 1000000 )) -lt 10000 ] ||
			fail "zramfsctl --timeout 1 took $(( (t1 - t0) / 1000000 )) ms"
		"$ZRAMFSCTL" "$M" >"$ZR_TMP/ctl" || fail "zramfsctl fails once the daemon goes on"
	fi
else
	say "zramfsctl not built: not checked"
fi
zr_umount
