#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# ctl_fake.sh - zramfsctl against a fake mount table and a fake .zramfs directory.
#
# No FUSE: ZRAMFSCTL_MOUNTINFO points zramfsctl at a mountinfo file written
# here, whose zramfs entry is a plain directory (with a space in its name, to
# exercise the \040 escape) holding stats, config and control files.
set -u

ctl=${ZRAMFSCTL:-./src/zramfsctl}
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect STATUS CMD... - run CMD, keep its output in $tmp/out and $tmp/err.
expect() {
	want=$1; shift
	"$@" >"$tmp/out" 2>"$tmp/err"
	got=$?
	[ "$got" -eq "$want" ] || { fail "exit $got (want $want): $*"; cat "$tmp/err" >&2; }
}

has() { grep -q -e "$2" "$1" || { fail "'$2' not in $1:"; cat "$1" >&2; }; }

mkdir -p "$tmp/zr mnt/.zramfs" "$tmp/plain" || exit 99
mnt=$(cd "$tmp/zr mnt" && pwd -P) || exit 99
plain=$(cd "$tmp/plain" && pwd -P) || exit 99
esc=$(printf '%s' "$mnt" | sed 's/ /\\040/g')

cat >"$mnt/.zramfs/stats" <<EOF
orig_data_size 10737418240
compr_data_size 4294967296
mem_used_total 4400000000
mem_used_max 4500000000
meta_bytes 1048576
budget 8589934592
blocks_zero 10
blocks_raw 2
blocks_hot 100
blocks_cold 50
blocks_dirty 3
hits 1000
misses 20
recompressions 5
demotions 6
writebacks 7
bytes_written_back 65536
writeback_errors 0
enospc 0
files 42
bytes_read_backing 123
bytes_written_backing 456
rss_bytes 5000000
EOF
cat >"$mnt/.zramfs/config" <<EOF
backing /srv/back "quoted"
size 8589934592
comp lz4
comp_level 0
cold_comp zstd
cold_level -5
block_size 65536
min_saving 8192
policy adaptive
dirty_expire 30000
seq_cutoff 4194304
cache writeback
version 0.1.0
EOF
: >"$mnt/.zramfs/control"

cat >"$tmp/mountinfo" <<EOF
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:5 / $plain rw shared:2 - tmpfs tmpfs rw
40 22 0:44 / $esc rw,nosuid,nodev,relatime shared:30 - fuse.zramfs /srv/back rw,user_id=0,group_id=0
EOF
export ZRAMFSCTL_MOUNTINFO="$tmp/mountinfo"

# Listing: header, the mount with its escape decoded, human sizes, ratio.
expect 0 "$ctl"
has "$tmp/out" '^MOUNTPOINT  *BACKING  *ALGORITHM'
has "$tmp/out" "^$mnt "
has "$tmp/out" 'lz4/zstd'
has "$tmp/out" ' 10\.0G '
has "$tmp/out" ' 2\.50 '
has "$tmp/out" ' 192\.0K$'
[ "$(wc -l <"$tmp/out")" -eq 2 ] || fail "listing is not header + 1 line"

expect 0 "$ctl" "$mnt/"
has "$tmp/out" "^$mnt "
expect 0 "$ctl" --bytes "$mnt"
has "$tmp/out" ' 10737418240 '

expect 0 "$ctl" --stats "$mnt"
has "$tmp/out" '^orig_data_size  *10737418240  10\.0G$'
has "$tmp/out" '^hits  *1000$'
[ "$(wc -l <"$tmp/out")" -eq 23 ] || fail "--stats is not one line a stat"

# JSON: parses, numbers are numbers, strings are strings.
if command -v python3 >/dev/null 2>&1; then
	check_json() {
		python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d, list) and len(d) == 1, d
o = d[0]
assert o["mountpoint"] == sys.argv[2], o["mountpoint"]
assert o["orig_data_size"] == 10737418240 and o["rss_bytes"] == 5000000
assert o["comp"] == "lz4" and o["cold_level"] == -5 and o["block_size"] == 65536
assert o["backing"] == "/srv/back \"quoted\"" and o["version"] == "0.1.0"
assert o["ratio"] == 2.5
' "$tmp/out" "$mnt" || fail "JSON of: $*"
	}
	expect 0 "$ctl" --json;                check_json --json
	expect 0 "$ctl" --json "$mnt";         check_json --json MNT
	expect 0 "$ctl" --stats --json "$mnt"; check_json --stats --json MNT
	expect 0 env ZRAMFSCTL_MOUNTINFO=/dev/null "$ctl" --json
	python3 -m json.tool "$tmp/out" >/dev/null || fail "empty JSON list"
fi

# Commands land in the control file, one line each.
cmd() { : >"$mnt/.zramfs/control"; expect 0 "$ctl" "$@"; }
ctl_is() { [ "$(cat "$mnt/.zramfs/control")" = "$1" ] || fail "control has '$(cat "$mnt/.zramfs/control")', want '$1'"; }
cmd writeback "$mnt";                 ctl_is "writeback all"
cmd writeback "$mnt" idle;            ctl_is "writeback idle"
cmd writeback "$mnt" raw;             ctl_is "writeback raw"
cmd drop-clean "$mnt";                ctl_is "drop_clean"
cmd compact "$mnt";                   ctl_is "compact"
cmd set "$mnt" size=2G;               ctl_is "size=2G"
cmd set "$mnt" dirty_expire=10s;      ctl_is "dirty_expire=10s"

# A mount that does not answer (here: its stats a FIFO with no writer, so
# open() blocks as on a stopped daemon) is reported and skipped after
# --timeout; the others are still listed.
mkdir -p "$tmp/hung/.zramfs" && mkfifo "$tmp/hung/.zramfs/stats" || exit 99
hung=$(cd "$tmp/hung" && pwd -P) || exit 99
cp "$tmp/mountinfo" "$tmp/mountinfo.one"
echo "41 22 0:45 / $hung rw,relatime shared:31 - fuse.zramfs /srv/hung rw" >>"$tmp/mountinfo"
t0=$(date +%s%N)
expect 1 "$ctl" --timeout 500ms
t1=$(date +%s%N)
has "$tmp/err" "$hung: no answer in 0.5 s"
has "$tmp/out" "^$mnt "
[ $(( (t1 - t0) / 1000000 )) -lt 5000 ] || fail "--timeout 500ms took $(( (t1 - t0) / 1000000 )) ms"
expect 1 "$ctl" -t 0.2 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d)==1, d' "$tmp/out" ||
	fail "JSON without the hung mount"
expect 1 "$ctl" --timeout 1 --stats "$hung"
has "$tmp/err" "$hung: no answer in 1 s"
timeout 20 "$ctl" -t 0.4ms "$hung" >/dev/null 2>"$tmp/err"
[ $? -eq 1 ] || fail "-t 0.4ms: not exit 1 (0.4 ms is not 'no limit')"
expect 2 "$ctl" --timeout soon
has "$tmp/err" "bad timeout 'soon'"
expect 2 "$ctl" --timeout 600h
has "$tmp/err" "too long"
expect 2 "$ctl" --timeout 1 compact "$mnt"
expect 2 "$ctl" --timeout 1 umount "$mnt"
mv "$tmp/mountinfo.one" "$tmp/mountinfo"

# Children are waited for even when SIGCHLD comes ignored; output errors count.
expect 0 python3 -c 'import os, signal, sys
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
os.execv(sys.argv[1], sys.argv[1:])' "$ctl" --stats "$mnt"
has "$tmp/out" '^hits  *1000$'
"$ctl" >/dev/full 2>"$tmp/err"
[ $? -eq 1 ] || fail "a listing to /dev/full does not exit 1"
has "$tmp/err" "cannot write the output"

# Usage errors: 2.
expect 2 "$ctl" --bogus
expect 2 "$ctl" writeback
expect 2 "$ctl" writeback "$mnt" sideways
expect 2 "$ctl" compact "$mnt" extra
expect 2 "$ctl" set "$mnt"
expect 2 "$ctl" set "$mnt" color=red
expect 2 "$ctl" set "$mnt" size=lots
expect 2 "$ctl" set "$mnt" dirty_expire=soon
expect 2 "$ctl" --json compact "$mnt"
expect 2 "$ctl" --stats

# Errors: 1, with a message that names the problem.
expect 1 "$ctl" "$plain"
has "$tmp/err" "not a zramfs mount: $plain"
expect 1 "$ctl" compact "$plain"
has "$tmp/err" "not a zramfs mount"
expect 1 "$ctl" "$tmp/nowhere"
has "$tmp/err" "No such file or directory"
rm -f "$mnt/.zramfs/control" && mkdir "$mnt/.zramfs/control"
expect 1 "$ctl" compact "$mnt"
has "$tmp/err" "Is a directory"
mv "$mnt/.zramfs/stats" "$mnt/.zramfs/stats.off"
expect 1 "$ctl"
has "$tmp/err" "cannot read .*stats"

expect 0 "$ctl" --version
has "$tmp/out" '^zramfsctl [0-9]'
expect 0 "$ctl" --help
has "$tmp/out" '^Usage: zramfsctl'

[ "$fails" -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "ctl_fake: all passed"
