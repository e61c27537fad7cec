#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# million_files.sh: a tree of N x 1000 small files (default N = 1000, a
# million) created on zramfs, counted with find, unmounted and counted in
# the backing directory; prints the time, the daemon's open fds (bounded by
# max_fds, far under the open-file limit) and its RSS. Needs root; ~5 min.
# usage: ZRAMFS=path/to/zramfs million_files.sh [NDIRS]
set -euo pipefail
ZRAMFS=${ZRAMFS:-zramfs}
NDIRS=${1:-1000}
B=$(mktemp -d /var/tmp/zr-million-b.XXXXXX)
M=$(mktemp -d /var/tmp/zr-million-m.XXXXXX)
PID=
cleanup() {
	set +e
	mountpoint -q "$M" && umount "$M"
	[ -n "$PID" ] && while kill -0 "$PID" 2>/dev/null; do sleep 1; done
	rm -rf "$B" "$M"
}
trap cleanup EXIT
"$ZRAMFS" -o size=1G "$B" "$M"
PID=$(pgrep -f "zramfs -o size=1G $B $M" | head -1)
t0=$(date +%s)
python3 - "$M" "$NDIRS" <<'PY'
import os, sys
m, n = sys.argv[1], int(sys.argv[2])
for d in range(n):
    dd = os.path.join(m, "d%04d" % d)
    os.mkdir(dd)
    for f in range(1000):
        fd = os.open(os.path.join(dd, "f%03d" % f), os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b"x%d\n" % f)
        os.close(fd)
PY
t1=$(date +%s)
n=$(find "$M" -type f | wc -l)
t2=$(date +%s)
echo "created $((NDIRS * 1000)) files in $((t1 - t0)) s; find counted $n in $((t2 - t1)) s"
echo "daemon: $(ls /proc/"$PID"/fd | wc -l) fds, RSS $(awk '{print $2 * 4}' /proc/"$PID"/statm) KiB"
grep -E "^(files|mem_used_total|fds_open|fd_opens) " "$M/.zramfs/stats"
umount "$M"
while kill -0 "$PID" 2>/dev/null; do sleep 1; done
PID=
echo "backing directory: $(find "$B" -type f | wc -l) files"
[ "$n" = $((NDIRS * 1000)) ]
