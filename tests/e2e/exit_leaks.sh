#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# exit_leaks: what the daemon holds for open handles is freed when it exits
# with handles still open, whose release never comes: a process keeps 300
# directories (100 of them read) and 100 files open through the mount, the
# daemon is told to end (SIGTERM: it unmounts lazily and serves the open
# files until they are closed), then the process exits: the mount goes
# with its last file, and the kernel drops the RELEASEDIRs and RELEASEs
# the daemon has not read by then. A daemon built with
# the sanitizers (make check-sanitize runs this test) reported each
# directory handle never read as a leak at its exit (helper-87, under
# valgrind, after dir_handles.sh); this test fails on any sanitizer report
# in the daemon's log. With a daemon without them it shows only that the
# daemon ends well with handles open.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the daemon's exit is what is looked at"
zr_need_tool python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
for i in $(seq 300); do mkdir "$B/d$i"; done
for i in $(seq 100); do echo "$i" >"$B/f$i"; done
zr_mount "" "$B" "$M"
M=$ZR_MNT
python3 - "$M" "$ZR_TMP/held" <<'PY' &
import os, sys, time
m, held = sys.argv[1], sys.argv[2]
fds = [os.open("%s/d%d" % (m, i), os.O_RDONLY | os.O_DIRECTORY) for i in range(1, 301)]
for d in fds[:100]:
    os.listdir(d)
fds += [os.open("%s/f%d" % (m, i), os.O_RDONLY) for i in range(1, 101)]
open(held, "w").close()
time.sleep(2)	# (the daemon is told to end meanwhile)
PY
holder=$!
for i in $(seq 100); do [ -e "$ZR_TMP/held" ] && break; sleep 0.1; done
[ -e "$ZR_TMP/held" ] || fail "the holder did not open its handles"
kill -TERM "$ZR_PID"
wait "$holder" || fail "the holder of the handles failed"
zr_wait_pid "$ZR_PID" 60 || fail "the daemon did not exit within 60 s of SIGTERM and the last close"
ZR_PID=
if grep -q "Sanitizer" "$ZR_LOG"; then
	sed -n '/Sanitizer/,+12p' "$ZR_LOG" | head -30 >&2
	fail "the daemon's exit reported what the sanitizers found (above)"
fi
[ "$ZR_WAIT_RC" = 0 ] || fail "the daemon exited with status $ZR_WAIT_RC: $(tail -3 "$ZR_LOG")"
say "ok"
