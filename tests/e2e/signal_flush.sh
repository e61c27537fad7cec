#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# signal_flush: SIGTERM and SIGINT make the daemon write everything back,
# unmount and exit 0; the backing directory then holds every byte.  Data is
# kept dirty (dirty_expire=1h) so only the signal path can have written it.
# A mount still in use is detached lazily; a second SIGTERM then must not
# end the daemon while a user still holds a file with pages the kernel has
# not sent (they would be lost); so must a SIGTERM after someone else's
# umount -l.  An umount followed by SIGTERMs while the final writeback
# runs (what systemd does when it stops a mount unit) loses nothing.  A
# mount covered by another: SIGTERM leaves the one on top
# alone.  A mount that cannot be unmounted (umount2 refused by zr_fault.so,
# fusermount3 failing, as for a daemon that is not root without a working
# fusermount3; run as root only, like the cases before it):
# SIGTERM ends the session although no request comes, and writes
# everything back, with -s too, also while a file is held open.  Last, in
# the same setting: an lseek(SEEK_DATA) whose request asks the kernel to
# drop its cached pages of the file (zr_fault.so holds that notification
# 14 s, past the 10 s the daemon waits for requests to drain) while a
# writer dirties the file: the notification waited for WRITEs that nobody
# read once the session was over, unkillable, and the daemon with it
# (helper-47's item); the daemon must exit 0 within 30 s, and its drain
# must have waited for the lseek's request (with uring=on, where a ring
# thread serves it, the drain once ended at once).  (The
# daemon's syncfs of the mount, for the pages the kernel still holds, is
# not proven here: FUSE's strict per-mount dirty limit makes the kernel
# send a fresh mount's pages almost at once.)
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "signals the daemon"

B=$ZR_TMP/backing M=$ZR_TMP/mnt S=$ZR_TMP/src
mkdir -p "$B" "$M" "$S/dir"
head -c $((12 << 20)) /dev/urandom >"$S/rand"
dd if=/dev/zero of="$S/zeros" bs=1M count=8 status=none
find /usr/include -type f -name '*.h' 2>/dev/null | head -n 400 | xargs -r cat 2>/dev/null |
	head -c $((6 << 20)) >"$S/text" || true
for i in $(seq 1 200); do echo "small $i" >"$S/dir/s$i"; done
zr_sums "$S" >"$ZR_TMP/sums"

for sig in TERM INT; do
	say "SIG$sig"
	rm -rf "${B:?}"/*
	zr_mount "size=128M,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
	cp -a "$S/." "$ZR_MNT/"
	d=$(zr_stat blocks_dirty)
	say "blocks_dirty $d before the signal"
	[ "$d" -gt 0 ] || fail "no dirty blocks before SIG$sig: the test would prove nothing"
	pid=$ZR_PID
	kill -s "$sig" "$pid"
	zr_wait_pid "$pid" 60 || fail "daemon did not exit within 60 s of SIG$sig"
	rc=$ZR_WAIT_RC
	ZR_PID=
	[ "$rc" = 0 ] || fail "daemon exited with status $rc after SIG$sig (expected 0)"
	! zr_is_mounted "$M" || fail "$M still mounted after SIG$sig"
	zr_same_sums "$ZR_TMP/sums" "$B" "backing directory after SIG$sig"
done

say "umount, then SIGTERM while the final writeback runs (as systemd stops a mount unit)"
# umount returns before the daemon has written back; systemd then sends
# SIGTERM to what is left in the unit, which must not cut the writeback
# short (zramfs(8), Data safety)
rm -rf "${B:?}"/*
head -c $((96 << 20)) /dev/urandom >"$S/rand2"
zr_sums "$S" >"$ZR_TMP/sums2"
zr_mount "size=256M,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
cp -a "$S/." "$ZR_MNT/"
d=$(zr_stat blocks_dirty)
[ "$d" -gt 0 ] || fail "no dirty blocks before the umount: the test would prove nothing"
pid=$ZR_PID
umount "$M" || fail "umount failed"
hits=0
while kill -s TERM "$pid" 2>/dev/null && [ $hits -lt 50 ]; do
	hits=$((hits + 1))
	sleep 0.02
done
say "$hits SIGTERMs reached the daemon after the umount ($d dirty blocks)"
[ $hits -gt 0 ] || fail "the daemon had exited before the first SIGTERM: the test would prove nothing"
zr_wait_pid "$pid" 60 || fail "daemon did not exit within 60 s of the umount"
rc=$ZR_WAIT_RC
ZR_PID=
[ "$rc" = 0 ] || fail "daemon exited with status $rc after umount and SIGTERM (expected 0)"
zr_same_sums "$ZR_TMP/sums2" "$B" "backing directory after umount and SIGTERM"
rm -f "$S/rand2"

# held_mount: mount, and write 4 MiB through fd 7, which stays open: it
# keeps the mount busy, and its pages dirty in the kernel's cache
held_mount() {
	rm -rf "${B:?}"/*
	zr_mount "size=128M,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
	exec 7>"$ZR_MNT/held"
	cat "$ZR_TMP/held.src" >&7
	pid=$ZR_PID
}

# held_still_served WHAT: after a signal, the daemon still serves the file
held_still_served() {
	sleep 0.5
	# a request, in case the daemon only notices at the next one that it was told to stop
	stat -L "/proc/$$/fd/7" >/dev/null 2>&1 || true
	sleep 0.5
	zr_running "$pid" || fail "the daemon exited at $1, with a file still held"
}

# held_close: close fd 7; the daemon then exits 0 with every byte on disk
held_close() {
	exec 7>&-
	zr_wait_pid "$pid" 60 || fail "daemon did not exit within 60 s of the mount's last user leaving"
	rc=$ZR_WAIT_RC
	ZR_PID=
	[ "$rc" = 0 ] || fail "daemon exited with status $rc"
	cmp "$ZR_TMP/held.src" "$B/held" || fail "the bytes written through the held fd are not all in the backing file"
}

say "a second SIGTERM while the detached mount is still in use"
head -c $((4 << 20)) /dev/urandom >"$ZR_TMP/held.src"
held_mount
kill -s TERM "$pid"
for n in $(seq 50); do
	zr_is_mounted "$M" || break
	sleep 0.1
done
! zr_is_mounted "$M" || fail "SIGTERM did not detach the busy mount"
kill -s TERM "$pid"
held_still_served "the second SIGTERM while the detached mount was in use"
grep -q "does not hold this mount on top" "$ZR_LOG" || fail "the daemon did not log why it goes on"
held_close

if [ "$(id -u)" != 0 ]; then
	say "not root: the umount -l and covered-mount cases are not run"
	exit 0
fi

say "umount -l by someone else while a file is held open, then SIGTERM"
held_mount
umount -l "$M" || fail "umount -l failed"
kill -s TERM "$pid"
held_still_served "SIGTERM after umount -l"
held_close

say "SIGTERM while another mount covers ours: the one on top stays"
rm -rf "${B:?}"/*
zr_mount "" "$B" "$M"
echo data >"$ZR_MNT/f"
mount -t tmpfs -o size=1m zr-cover "$M" || fail "cannot mount a tmpfs over the mount"
pid=$ZR_PID
kill -s TERM "$pid"
sleep 1
[ "$(stat -f -c %T "$M")" = tmpfs ] ||
	fail "SIGTERM unmounted the tmpfs mounted over zramfs"
zr_running "$pid" || fail "the daemon exited while its mount is still there, under the tmpfs"
umount "$M" || fail "cannot unmount the tmpfs"
zr_umount
[ "$(cat "$B/f")" = data ] || fail "f is not in the backing directory"

say "SIGTERM when the mount cannot be unmounted"
FAULT=$(zr_helper zr_fault.so)
mkdir -p "$ZR_TMP/fakebin"
printf '#!/bin/sh\nexit 1\n' >"$ZR_TMP/fakebin/fusermount3"
chmod +x "$ZR_TMP/fakebin/fusermount3"
for dargs in "" "-s"; do
	for phase in idle held; do
		say "${dargs:-multi-threaded}, $phase"
		rm -rf "${B:?}"/*
		ZR_DAEMON_ARGS=$dargs ZR_FAULT_UMOUNT=1 PATH="$ZR_TMP/fakebin:$PATH" \
			zr_mount_fault "size=128M,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
		pid=$ZR_PID
		if [ $phase = idle ]; then
			# everything in the daemon's tier, dirty; then no request
			cp -a "$S/." "$ZR_MNT/"
			sync -f "$ZR_MNT"
			[ "$(zr_stat blocks_dirty)" -gt 0 ] || fail "no dirty blocks before SIGTERM"
		else
			# the file stays open (a close would send the kernel's
			# pages and wait for them)
			exec 7>"$ZR_MNT/held"
			cat "$ZR_TMP/held.src" >&7
		fi
		kill -s TERM "$pid"
		zr_wait_pid "$pid" 20 || fail "the daemon did not exit within 20 s of SIGTERM ($phase), its mount not unmountable"
		rc=$ZR_WAIT_RC
		ZR_PID=
		exec 7>&-
		grep -q "cannot unmount" "$ZR_LOG" || fail "the daemon did not say it could not unmount"
		umount "$M" 2>/dev/null || umount -l "$M" || fail "cannot unmount the daemon's dead mount"
		[ "$rc" = 0 ] || fail "daemon exited with status $rc after SIGTERM ($phase)"
		if [ $phase = idle ]; then
			zr_same_sums "$ZR_TMP/sums" "$B" "backing directory after SIGTERM (idle, not unmountable)"
		else
			cmp "$ZR_TMP/held.src" "$B/held" || fail "the bytes written through the held fd are not all in the backing file"
		fi
	done
done

say "SIGTERM, not unmountable, while a request asks the kernel to drop its pages"
# (before Linux 6.16 the daemon leaves SEEK_DATA to the kernel: no request
# asks it to drop pages)
if uname -r | awk -F. '{ exit !($1 < 6 || ($1 == 6 && $2 < 16)) }'; then
	say "skipped on $(uname -r): lseek sends no invalidation before 6.16"
	exit 0
fi
rm -rf "${B:?}"/*
ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_INVAL_DELAY_MS=14000 ZR_FAULT_UMOUNT=1 \
	PATH="$ZR_TMP/fakebin:$PATH" zr_mount_fault "dirty_expire=1h" "$B" "$M"
pid=$ZR_PID
head -c 65536 /dev/urandom >"$ZR_MNT/f"
touch "$ZR_TMP/armed"
# the lseek's request waits in the daemon; a writer dirties the file
# through a shared mapping (a write(2) would wait for the lseek's inode
# lock) until just before the notification goes (the session has ended by
# then unless the daemon waits for it)
python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDWR); os.write(fd, b"x" * 4096); os.lseek(fd, 0, os.SEEK_DATA)' \
	"$ZR_MNT/f" 2>/dev/null &
seeker=$!
python3 -c '
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
mm = mmap.mmap(fd, 65536)
end, n = time.time() + 13.5, 0
while time.time() < end:
    mm[8192 + (n % 8) * 4096] = n % 256
    n += 1
    time.sleep(0.05)' "$ZR_MNT/f" 2>/dev/null &
writer=$!
ZR_ATEXIT+=("kill -9 $seeker $writer 2>/dev/null")
for i in $(seq 100); do [ -e "$ZR_TMP/armed" ] || break; sleep 0.1; done
[ ! -e "$ZR_TMP/armed" ] || fail "the lseek sent no invalidation within 10 s (it is what this case tests)"
kill -s TERM "$pid"
for i in $(seq 300); do zr_running "$pid" || break; sleep 0.1; done
if zr_running "$pid"; then
	# a thread stuck in the kernel: only an abort of the connection ends it
	mm=$(awk -v p="$ZR_MNT" '$5 == p { print $3 }' /proc/self/mountinfo)
	if ! mountpoint -q /sys/fs/fuse/connections &&
		mount -t fusectl fusectl /sys/fs/fuse/connections; then
		ZR_ATEXIT+=("umount /sys/fs/fuse/connections")
	fi
	echo 1 >"/sys/fs/fuse/connections/${mm#*:}/abort" || true
	zr_wait_pid "$pid" 10 || true
	ZR_PID=
	kill -9 "$seeker" "$writer" 2>/dev/null || true
	fail "the daemon did not exit within 30 s of SIGTERM: a request was stuck asking the kernel to drop its pages"
fi
zr_wait_pid "$pid" 1
rc=$ZR_WAIT_RC
ZR_PID=
kill -9 "$seeker" "$writer" 2>/dev/null || true
wait "$seeker" "$writer" 2>/dev/null || true
umount "$M" 2>/dev/null || umount -l "$M" || fail "cannot unmount the daemon's dead mount"
[ "$rc" = 0 ] || fail "daemon exited with status $rc after SIGTERM"
grep -q "cannot unmount" "$ZR_LOG" || fail "the daemon did not say it could not unmount"
# the lseek's request was being served all along: the drain must have
# waited for it (with uring=on too, where a ring thread serves it)
grep -q "requests still come after" "$ZR_LOG" ||
	fail "the drain did not wait for the request still being served (the lseek, held 14 s)"
