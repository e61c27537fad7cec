#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# check_rounds.sh: the benchmarks' rounds without a benchmark (part of `make
# check`; no root, no mount): lib.sh's round_order turns the systems one
# place each round and keep/kept take the median of a point's runs, and
# report.sh's targets table takes each ratio round by round from
# NAME_runs.tsv (median, with the rounds' range), or the ratio of the
# medians in NAME.tsv when there is no runs file.
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
set +e
fails=0
check() { # check WHAT GOT WANT
	if [ "$2" != "$3" ]; then
		echo "FAIL: $1: got '$2', want '$3'" >&2
		fails=$((fails + 1))
	fi
}

check "round 1" "$(round_order 1 a b c | paste -sd' ')" "a b c"
check "round 2" "$(round_order 2 a b c | paste -sd' ')" "b c a"
check "round 3" "$(round_order 3 a b c | paste -sd' ')" "c a b"
check "round 4" "$(round_order 4 a b c | paste -sd' ')" "a b c"
check "no system" "$(round_order 2)" ""

keep "zramfs 4096" w 300; keep "zramfs 4096" w NA; keep "zramfs 4096" w 100
keep "zramfs 4096" w 200; keep "zram 4096" w 7
check "median of a point" "$(kept "zramfs 4096" w)" "200"
check "median of another" "$(kept "zram 4096" w)" "7"
check "nothing kept" "$(kept "plain 4096" w)" "NA"
# an even count (--runs 2): the mean of the middle two, written out in full
# (bytes as they are in the runs file, not 5.75078e+06)
keep "plain 2" d 5808128; keep "plain 2" d 5693440
check "median of two, bytes" "$(kept "plain 2" d)" "5750784"
keep "plain 2" t 15.972; keep "plain 2" t 16.753
check "median of two, seconds" "$(kept "plain 2" t)" "16.3625"

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/out"
# two systems, three rounds: the ratios of the rounds are 1.5, 2.0 and
# 1.0 (median 1.5), while the ratio of the medians is 400/300 = 1.333
printf 'system\tbs\tbytes\twrite_MBps\tread_MBps\tmem_bytes\ttier_bytes\n' >"$tmp/out/dd_sweep.tsv"
printf 'zram\t4096\t1\t300\t1\t1\t1\nzramfs\t4096\t1\t400\t1\t1\t1\n' >>"$tmp/out/dd_sweep.tsv"
printf 'system\tbs\tround\twrite_MBps\tread_MBps\tmem_bytes\ttier_bytes\n' >"$tmp/out/dd_sweep_runs.tsv"
printf 'zram\t4096\t1\t200\t1\t1\t1\nzramfs\t4096\t1\t300\t1\t1\t1\n' >>"$tmp/out/dd_sweep_runs.tsv"
printf 'zramfs\t4096\t2\t400\t1\t1\t1\nzram\t4096\t2\t200\t1\t1\t1\n' >>"$tmp/out/dd_sweep_runs.tsv"
printf 'zram\t4096\t3\t600\t1\t1\t1\nzramfs\t4096\t3\t600\t1\t1\t1\n' >>"$tmp/out/dd_sweep_runs.tsv"
echo "date: now" >"$tmp/out/machine.txt"
# target WHAT WANT: the 4 KiB write's line of report.sh's targets table
target() {
	if "$here/report.sh" "$tmp/out" "$tmp/md" "$tmp/plots" >/dev/null 2>&1; then
		check "$1" "$(grep '^| 4 KiB writes' "$tmp/md")" "$2"
	else
		echo "FAIL: $1: report.sh failed" >&2
		fails=$((fails + 1))
	fi
}
target "target from the rounds" \
	"| 4 KiB writes ×zram >= 1.5 | 1.500 (1.000–2.000) | yes | \`scripts/bench/dd_sweep.sh\` |"
rm "$tmp/out/dd_sweep_runs.tsv"
target "target from the medians" \
	"| 4 KiB writes ×zram >= 1.5 | 1.333 | **no** | \`scripts/bench/dd_sweep.sh\` |"
# no round (nor median) of zram: no figure, not 0
grep -v '^zram	' "$tmp/out/dd_sweep.tsv" >"$tmp/t" && mv "$tmp/t" "$tmp/out/dd_sweep.tsv"
printf 'system\tbs\tround\twrite_MBps\tread_MBps\tmem_bytes\ttier_bytes\nzramfs\t4096\t1\t300\t1\t1\t1\n' \
	>"$tmp/out/dd_sweep_runs.tsv"
target "target without zram" \
	"| 4 KiB writes ×zram >= 1.5 | – | – | \`scripts/bench/dd_sweep.sh\` |"
[ "$fails" = 0 ] && echo "check_rounds: ok"
[ "$fails" = 0 ]
