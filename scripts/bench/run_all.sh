#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# run_all.sh: runs every benchmark and writes BENCHMARKS.md with tables and
# gnuplot PNG plots.
#
# usage: run_all.sh [--quick] [--out DIR] [--docs DOCDIR] [--only LIST]
#   --quick     every script in its quick mode (the suite in < 3 min)
#   --out DIR   TSV results and logs (default ./bench-out)
#   --docs DIR  write DIR/BENCHMARKS.md and DIR/bench/*.png (default: into
#               --out; the committed docs/BENCHMARKS.md is made with
#               --docs docs from a full run)
#   --only LIST comma-separated scripts to run (default all)
# A script that fails is reported and the others still run; the exit status
# is non-zero if any failed.  ZRAMFS must name the daemon (make bench-quick
# sets it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
quick=() out=./bench-out docs= only="dd_sweep,stream,small_files,ram_per_byte,build,size_sweep"
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=(--quick) ;;
	--out) out=$2; shift ;;
	--docs) docs=$2; shift ;;
	--only) only=$2; shift ;;
	*) echo "usage: $0 [--quick] [--out DIR] [--docs DIR] [--only LIST]" >&2; exit 2 ;;
	esac
	shift
done
mkdir -p "$out"
out=$(realpath "$out")
rm -f "$out/machine.txt"	# written afresh by the first script
[ -n "$docs" ] || docs=$out
t0=$(date +%s) failed=()
for s in ${only//,/ }; do
	echo "=== $s $(date -u +%H:%M:%S)"
	if ! bash "$here/$s.sh" ${quick[@]+"${quick[@]}"} --out "$out" 2>&1 | tee "$out/$s.log"; then
		failed+=("$s")
	fi
done
secs=$(($(date +%s) - t0))
mode=full; [ ${#quick[@]} -gt 0 ] && mode="quick (--quick: small sizes, 1 run per point)"
note="Run: $mode, $(date -u '+%Y-%m-%d'), suite took ${secs} s, on a virtual machine whose host is shared: figures move between runs (each script's log gives the load average at its start).${failed[*]:+ Failed or incomplete: ${failed[*]}.}"
"$here/report.sh" "$out" "$docs/BENCHMARKS.md" "$docs/bench" "$note"
echo "=== run_all: ${secs}s${failed[*]:+, failed: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
