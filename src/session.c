// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * session.c - our own read/writev on /dev/fuse, to speak a little of the
 * protocol that libfuse 3.14 does not: FUSE_HANDLE_KILLPRIV_V2.
 *
 * Without it, the kernel asks the daemon for "security.capability" before
 * every write(2) that lands in its writeback cache (to decide whether to
 * clear privileges): a GETXATTR round trip per 64-byte write, which caps
 * small writes at a few MB/s. With KILLPRIV_V2 the superblock is SB_NOSEC
 * and that duty moves to the daemon, which this file takes on:
 *  - a WRITE flagged FUSE_WRITE_KILL_SUIDGID, a SETATTR with
 *    FATTR_KILL_SUIDGID and an OPEN with FUSE_OPEN_KILL_SUIDGID clear the
 *    set-user-ID bit, and the set-group-ID bit when group-executable;
 *  - the first write to a file that carries security.capability removes it
 *    (data.c, zr_inode.has_caps).
 * The flag is added to the INIT reply only when the kernel offered it.
 *
 * Once the INIT reply is written, the mount's read-ahead window is set
 * (set_read_ahead()), as the kernel would otherwise clamp it to 128 KiB.
 *
 * Every request read is noted for the CPU latency request (cpulat.c).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs.h"
#include "zr_util.h"

static uint64_t init_unique;	/* unique of the INIT request; 0 once answered */
static uint32_t init_flags_in;	/* what the kernel offered */

/*
 * Whether process @pid (with primary group @pgid) is in group @gid: its
 * supplementary groups are read from /proc, as libfuse does.
 */
static bool pid_in_group(uint32_t pid, uint32_t pgid, gid_t gid)
{
	char path[64], line[4096];
	bool found = false;
	FILE *f;

	if (pgid == gid)
		return true;
	snprintf(path, sizeof(path), "/proc/%u/task/%u/status", pid, pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *p, *end;

		if (strncmp(line, "Groups:", 7) != 0)
			continue;
		for (p = line + 7;; p = end) {
			unsigned long g = strtoul(p, &end, 10);

			if (end == p)
				break;
			if (g == gid)
				found = true;
		}
	}
	fclose(f);
	return found;
}

/*
 * Clear set-id bits of node @nodeid the way the kernel would for a write by
 * the caller in @in: set-user-ID always; set-group-ID when the file is
 * group-executable, or when the caller is not in the file's group.
 */
static void kill_suidgid(struct zr_fs *fs, const struct fuse_in_header *in)
{
	uint64_t nodeid = in->nodeid;

	struct zr_inode *ino;
	struct stat st;
	mode_t mode;
	int fd;

	if (nodeid == FUSE_ROOT_ID || zr_is_ctl(nodeid))
		return;
	ino = zr_inode_from_ino(fs, nodeid);
	if (!S_ISREG(ino->type))
		return;
	fd = zr_fd_get(fs, ino);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0) {
		mode = st.st_mode & 07777;
		mode &= ~(mode_t)S_ISUID;
		if ((mode & S_ISGID) &&
		    ((mode & S_IXGRP) || !pid_in_group(in->pid, in->gid, st.st_gid)))
			mode &= ~(mode_t)S_ISGID;
		if (mode != (st.st_mode & 07777))
			(void)fchmod(fd, mode);
	}
	zr_fd_put(fs, ino);
}

/*
 * libfuse 3.14's worker threads run this with cancellation enabled (it
 * cancels them when the loop ends), so everything after the read(), which
 * takes locks and makes syscalls that are cancellation points, runs with
 * cancellation disabled: a thread cancelled while holding a lock would hang
 * the unmount.
 */
static ssize_t zr_io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct zr_fs *fs = userdata;
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;
	int cstate;

	if (n < (ssize_t)sizeof(*in))
		return n;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cstate);
	zr_cpulat_busy(fs);
	switch (in->opcode) {
	case FUSE_INIT:
		if ((size_t)n >= sizeof(*in) + offsetof(struct fuse_init_in, flags2)) {
			const struct fuse_init_in *ii = (const void *)(in + 1);

			init_flags_in = ii->flags;
			__atomic_store_n(&init_unique, in->unique, __ATOMIC_RELEASE);
		}
		break;
	case FUSE_WRITE:
		if ((size_t)n >= sizeof(*in) + sizeof(struct fuse_write_in)) {
			const struct fuse_write_in *wi = (const void *)(in + 1);

			if (wi->write_flags & FUSE_WRITE_KILL_SUIDGID)
				kill_suidgid(fs, in);
		}
		break;
	case FUSE_SETATTR:
		if ((size_t)n >= sizeof(*in) + sizeof(struct fuse_setattr_in)) {
			const struct fuse_setattr_in *si = (const void *)(in + 1);

			if ((si->valid & FATTR_KILL_SUIDGID) && !(si->valid & FATTR_MODE))
				kill_suidgid(fs, in);
		}
		break;
	case FUSE_OPEN:
		if ((size_t)n >= sizeof(*in) + sizeof(struct fuse_open_in)) {
			const struct fuse_open_in *oi = (const void *)(in + 1);

			if (oi->open_flags & FUSE_OPEN_KILL_SUIDGID)
				kill_suidgid(fs, in);
		}
		break;
	default:
		break;
	}
	pthread_setcancelstate(cstate, NULL);
	return n;
}

/*
 * Set the kernel's read-ahead window of our mount to the read_ahead option.
 * FUSE caps it at 128 KiB (the bdi default) whatever the daemon asks in
 * INIT, and it applies that cap when it handles our INIT reply, so this is
 * done just after. Sequential cold reads of large files then arrive as
 * 1 MiB requests that two daemon threads decompress in parallel. Writing
 * sysfs needs root; without it the kernel's default stays (not an error).
 */
static void set_read_ahead(struct zr_fs *fs)
{
	char path[96], val[32];
	int fd, n;

	if (!fs->opt->read_ahead || !fs->bdi[0])
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", fs->bdi);
	n = snprintf(val, sizeof(val), "%llu\n",
		     (unsigned long long)(fs->opt->read_ahead / 1024));
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, val, (size_t)n) != n)
		zr_log(ZR_LOG_DEBUG, "read_ahead: cannot write %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

static ssize_t zr_io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	uint64_t unique = __atomic_load_n(&init_unique, __ATOMIC_ACQUIRE);
	bool init_reply = false;
	ssize_t n;

	if (unique && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header)) {
		struct fuse_out_header *out = iov[0].iov_base;

		if (out->unique == unique && out->error == 0 &&
		    iov[1].iov_len >= offsetof(struct fuse_init_out, max_background)) {
			struct fuse_init_out *io = iov[1].iov_base;

			if (init_flags_in & FUSE_HANDLE_KILLPRIV_V2)
				io->flags |= FUSE_HANDLE_KILLPRIV_V2;
			__atomic_store_n(&init_unique, 0, __ATOMIC_RELEASE);
			init_reply = true;
		}
	}
	n = writev(fd, iov, count);
	/* the kernel has applied the INIT reply when writev returns */
	if (init_reply && n >= 0)
		set_read_ahead(userdata);
	return n;
}

/**
 * zr_session_hook() - route the session's /dev/fuse traffic through the
 * functions above. Call after fuse_session_mount().
 * @return 0 or -errno.
 */
int zr_session_hook(struct zr_fs *fs)
{
	static const struct fuse_custom_io io = {
		.read = zr_io_read,
		.writev = zr_io_writev,
	};

	return fuse_session_custom_io(fs->se, &io, fuse_session_fd(fs->se));
}
