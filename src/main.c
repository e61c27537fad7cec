// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * main.c - zramfs: check the arguments, open the backing directory, mount,
 * serve, and on unmount or SIGTERM/SIGINT write everything back.
 *
 * Signals are taken by one thread with sigwait(): it unmounts the
 * filesystem (so that the kernel first sends us its own dirty pages) while
 * the workers keep serving; the session loop then ends by itself and the
 * final writeback runs, for as long as it takes (final_writeback()); a
 * signal then only makes it try again at once. When no unmount works, the
 * signal thread ends the session loop itself (end_loop()). Everything that
 * can be wrong with the arguments is found before the mount, so a refused
 * mount leaves nothing behind.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "zr_util.h"

static struct zr_fs the_fs;
static const char *mount_path;	/* canonical mount point */

/*
 * The final writeback waits between its attempts on retry_cond; the signal
 * thread cuts the wait short. retry_lock protects retry_now (a signal came:
 * try again at once) and session_over (the session has ended: a signal no
 * longer unmounts, it only asks for that retry). A signal's writeback of
 * a detached mount runs under it too, so that final_writeback(), which
 * takes it first, and the teardown after it wait for that writeback.
 */
static pthread_mutex_t retry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t retry_cond;	/* on CLOCK_MONOTONIC, set up in main() */
static bool retry_now;
static bool session_over;

/*
 * The thread that runs the session loop (set before the loop starts), and
 * whether the loop has returned (relaxed atomic). end_loop() wakes that
 * thread with ZR_WAKE_SIG: fuse_session_exit() alone only sets a flag that
 * the loop looks at between requests.
 */
static pthread_t loop_tid;
static bool loop_done;
/* held by end_loop() while it asks whether the session is drained, and by
 * the loop's thread when it sets loop_done: the drain asks no more once
 * the loop has returned, after which main() frees the session (helper-57:
 * an unmount from outside during the drain) */
static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;
#define ZR_WAKE_SIG SIGUSR1

/* Longest wait between two attempts of the final writeback (s); and once
 * waits are that long, only one failure in ZR_RETRY_LOG_EVERY is logged. */
#define ZR_RETRY_MAX_S 60
#define ZR_RETRY_LOG_EVERY 10

/* One line of /proc/self/mountinfo, its paths unescaped. */
struct mount_line {
	char mm[32];		/* MAJ:MIN */
	char mp[PATH_MAX];	/* mount point */
	char type[64];		/* filesystem type ("fuse.zramfs"...) */
	char src[PATH_MAX];	/* source (a zramfs's backing directory) */
};

/* Read the next line of mountinfo @f into @m (later lines are mounted on
 * top of earlier ones at the same point). @return false at its end. */
static bool next_mount(FILE *f, struct mount_line *m)
{
	char line[8192];

	while (fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - ");

		if (!sep || sscanf(line, "%*s %*s %31s %*s %4095s", m->mm, m->mp) != 2 ||
		    sscanf(sep + 3, "%63s %4095s", m->type, m->src) != 2)
			continue;
		zr_unescape_octal(m->mp);
		zr_unescape_octal(m->src);
		return true;
	}
	return false;
}

/*
 * Whether @path is a mount point listed in /proc/self/mountinfo. When @dev
 * is given, it receives the "MAJ:MIN" of the topmost mount there; when
 * @fstype is, its filesystem type ("fuse.zramfs"...).
 */
static bool mount_info(const char *path, char *dev, size_t devlen,
		       char *fstype, size_t typelen)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	struct mount_line m;
	bool found = false;

	if (!f)
		return false;
	while (next_mount(f, &m)) {
		if (strcmp(m.mp, path) != 0)
			continue;
		found = true;	/* later lines are mounted on top: keep going */
		if (dev)
			snprintf(dev, devlen, "%s", m.mm);
		if (fstype)
			snprintf(fstype, typelen, "%s", m.type);
	}
	fclose(f);
	return found;
}

static bool is_mounted(const char *path)
{
	return mount_info(path, NULL, 0, NULL, 0);
}

/* Whether the topmost mount on @path is a zramfs. */
static bool is_zramfs_mount(const char *path)
{
	char type[64] = "";

	return mount_info(path, NULL, 0, type, sizeof(type)) &&
	       strcmp(type, "fuse.zramfs") == 0;
}

/* Whether the canonical path @mnt lies inside the directory whose
 * canonical path is @backing. */
static bool inside_backing(const char *backing, const char *mnt)
{
	size_t n = strlen(backing);

	if (n == 1)
		return mnt[1] != '\0';	/* the backing directory is / */
	return strncmp(mnt, backing, n) == 0 && mnt[n] == '/';
}

/*
 * A zramfs mounted from the canonical @backing (its fsname, which mountinfo
 * shows as its source), or with @nested from a directory above or below it
 * (not @backing itself): its source into @src when not NULL, its mount
 * point into @mnt. Two daemons on nested trees would each cache and write
 * back the files they share, over each other's data, and the lock on the
 * backing directory does not see it (helper-66); a daemon still writing
 * back after its unmount is not listed, and is not found. @return whether
 * there is one.
 */
static bool zramfs_mounted_from(const char *backing, bool nested, char *src, size_t srclen,
				char *mnt, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	struct mount_line m;
	bool found = false;

	if (!f)
		return false;
	while (!found && next_mount(f, &m)) {
		if (strcmp(m.type, "fuse.zramfs") != 0)
			continue;
		found = nested ? m.src[0] == '/' && (inside_backing(backing, m.src) ||
						     inside_backing(m.src, backing))
			       : strcmp(m.src, backing) == 0;
		if (found && src)
			snprintf(src, srclen, "%s", m.src);
		if (found)
			snprintf(mnt, len, "%s", m.mp);
	}
	fclose(f);
	return found;
}

/*
 * One daemon per backing directory: an flock(2) on it, held for the
 * daemon's life (the fd is inherited across daemon_fork()). A daemon
 * still writing back after an unmount (final_writeback()) would otherwise
 * write its old blocks over what a new mount of the same directory wrote.
 * A previous daemon is given 10 s to finish. When a zramfs is still
 * mounted from the directory (@backing, canonical, is its source), that
 * mount is named, first and in the refusal (helper-54: the message spoke
 * of a previous mount only); it is waited for all the same, as it may be
 * a dead mount whose daemon is finishing its writeback (end_loop()), and
 * asking the mount whether it lives could hang on a stopped daemon.
 * Filesystems without flock (some network ones) go unlocked.
 * @return 0, -EEXIST (that mount is there: said so), or -EBUSY.
 */
static int lock_backing(int root_fd, const char *backing)
{
	char mnt[PATH_MAX];
	bool named = false;

	for (int i = 0; i < 100; i++) {
		if (flock(root_fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK) {
			/* (helper-66: this went on without a word) */
			fprintf(stderr, "zramfs: cannot lock the backing directory '%s' (%s): nothing keeps a second zramfs daemon off it\n",
				backing, strerror(errno));
			return 0;
		}
		if (i == 0) {
			named = zramfs_mounted_from(backing, false, NULL, 0, mnt, sizeof(mnt));
			if (named)
				fprintf(stderr, "zramfs: backing directory '%s' is in use by the zramfs mounted on '%s': waiting 10 s for it to go\n",
					backing, mnt);
			else
				fprintf(stderr, "zramfs: waiting for the daemon of the backing directory's previous mount to finish\n");
		}
		usleep(100 * 1000);
	}
	if (named)
		fprintf(stderr, "zramfs: backing directory '%s' is in use by the zramfs mounted on '%s' (unmount it first)\n",
			backing, mnt);
	return named ? -EEXIST : -EBUSY;
}

/*
 * Whether the topmost mount on mount_path is still this daemon's (its
 * MAJ:MIN, recorded at mount in the_fs.bdi): not once it is detached (by
 * us, lazily when in use, or by umount -l: nothing is listed there then),
 * nor once moved away (mount --move), nor when another mount covers it. Unknown (no record, /proc/self/mountinfo
 * unreadable) counts as ours.
 */
static bool ours_on_top(void)
{
	char top[32] = "";

	if (!the_fs.bdi[0] || access("/proc/self/mountinfo", R_OK) != 0)
		return true;
	return mount_info(mount_path, top, sizeof(top), NULL, 0) &&
	       strcmp(top, the_fs.bdi) == 0;
}

/* ZR_WAKE_SIG's handler: nothing; the signal only interrupts a wait. */
static void wake_handler(int sig)
{
	(void)sig;
}

/* Poke the loop's thread with ZR_WAKE_SIG every 100 ms, for 60 s at most,
 * until the loop has returned (end_loop()). */
static void poke_loop(void)
{
	for (int i = 0; i < 600 && !__atomic_load_n(&loop_done, __ATOMIC_RELAXED); i++) {
		pthread_kill(loop_tid, ZR_WAKE_SIG);
		usleep(100 * 1000);
	}
}

/*
 * End the session loop when the mount cannot be unmounted (not root, and
 * fusermount3 missing or failing). First the kernel is asked to send its
 * dirty pages while the daemon still serves: a syncfs of the mount. It does
 * not wait for their WRITEs on every kernel (before 6.16 FUSE ended a
 * page's writeback once it had copied it, and later kernels may skip FUSE
 * in the syncfs's wait), and libfuse drops what it reads once the session
 * has exited: so the daemon then waits, ZR_DRAIN_MAX_MS at most, until
 * nothing waits in /dev/fuse and nothing read from it or taken by a ring
 * thread is still served, twice in a row (zr_session_drained();
 * helper-46, helper-47). Then the loop is ended. Its thread sleeps in
 * sem_wait() (libfuse's multi-threaded loop) or read(2) (-s) and would
 * only see fuse_session_exit()'s flag after a next request, which an idle
 * mount, or one whose requests come through io_uring, may never bring
 * (helper-43). So it is interrupted with ZR_WAKE_SIG, again every 100 ms
 * until the loop has returned: a signal that came just before it went to
 * sleep would be lost. Before that, no
 * new request may ask the kernel to drop cached pages, and those that do
 * are waited for (data.c inval_inode()): a thread in such a call once the
 * session was over waited for ever for WRITEs nobody read, and the loop
 * with it (helper-47's item). (With -s, a request being served then may
 * see its sleeps cut short.) Pages users dirty after the drain are lost
 * with the session; the mount point stays, without a daemon, until someone
 * unmounts it. Nothing is done when the session is already over (a failed
 * start).
 */
#define ZR_DRAIN_MAX_MS 10000
static void end_loop(int sig)
{
	int fd = open(mount_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	uint64_t t0 = zr_now_ms();
	int quiet = 0;
	bool over;

	if (fd < 0 || syncfs(fd) != 0)
		zr_log(ZR_LOG_WARNING, "signal %d: cannot sync %s, the pages the kernel holds may be lost: %s",
		       sig, mount_path, strerror(errno));
	if (fd >= 0)
		close(fd);
	while (quiet < 2 && zr_now_ms() - t0 < ZR_DRAIN_MAX_MS) {
		usleep(20 * 1000);
		pthread_mutex_lock(&drain_lock);
		if (__atomic_load_n(&loop_done, __ATOMIC_RELAXED))
			quiet = 2;	/* (nothing left to drain) */
		else
			quiet = zr_session_drained(&the_fs) ? quiet + 1 : 0;
		pthread_mutex_unlock(&drain_lock);
	}
	if (quiet < 2)
		zr_log(ZR_LOG_WARNING, "signal %d: requests still come after %d s: those not yet read will fail",
		       sig, ZR_DRAIN_MAX_MS / 1000);
	/* a thread asking the kernel to drop its cached pages waits for the
	 * WRITEs of their dirty ones: none starts from now on, and those
	 * under way end while the loop still serves (data.c inval_inode).
	 * Without a limit: once the session is over, one still under way
	 * would wait for ever, and the daemon with it (the drain above
	 * gives up after ZR_DRAIN_MAX_MS; helper-51) */
	__atomic_store_n(&the_fs.ending, true, __ATOMIC_SEQ_CST);
	t0 = zr_now_ms();
	for (unsigned n = 1; __atomic_load_n(&the_fs.invalidating, __ATOMIC_SEQ_CST); n++) {
		usleep(10 * 1000);
		if (n % 1000 == 0)
			zr_log(ZR_LOG_WARNING, "signal %d: a request has been asking the kernel to drop its cached pages for %llu s; the session ends once it is done",
			       sig, (unsigned long long)((zr_now_ms() - t0) / 1000));
	}
	pthread_mutex_lock(&retry_lock);
	over = session_over;
	if (!over) {
		zr_log(ZR_LOG_WARNING, "signal %d: cannot unmount %s: ending the session, then writing back; the mount point stays until it is unmounted (umount, fusermount3 -u)",
		       sig, mount_path);
		fuse_session_exit(the_fs.se);
	}
	pthread_mutex_unlock(&retry_lock);
	if (!over)
		poke_loop();
}

/*
 * SIGTERM, SIGINT: unmount, while still serving, so that the kernel sends
 * its dirty pages before the session ends. When the path no longer holds
 * our mount on top (we detached it, lazily when in use, or umount -l did,
 * or it was moved, or another mount covers it), the signal writes back and
 * syncs everything the daemon holds and leaves the path alone: unmounting it again reached
 * what is under it (the backing filesystem itself when zramfs is mounted
 * over its mount point) or on it, and ending the session while the
 * mount's users still hold files lost the pages the kernel had not sent
 * yet (helper-24's, helper-25's and helper-26's reviews). The daemon exits when the
 * last user leaves; SIGKILL then loses only those pages. When the mount
 * cannot be unmounted, end_loop() ends the session; a signal after it only
 * wakes the loop again. SIGHUP, and any signal once the session is over:
 * retry a failed final writeback now.
 */
static void *signal_thread(void *arg)
{
	sigset_t *set = arg;
	bool over, detached = false, ended = false;
	int sig;

	for (;;) {
		if (sigwait(set, &sig) != 0)
			continue;
		pthread_mutex_lock(&retry_lock);
		over = session_over;
		if (over) {
			/* unmounted already: retry a failed final writeback now */
			zr_log(ZR_LOG_INFO, "signal %d: writing back again now", sig);
			retry_now = true;
			pthread_cond_broadcast(&retry_cond);
		} else if (ended) {
			/* (end_loop() ran: the writeback follows the loop;
			 * wake the loop again in case it has not returned) */
			zr_log(ZR_LOG_INFO, "signal %d: the session is ending", sig);
			over = true;
		} else if (sig != SIGHUP && (detached || !ours_on_top())) {
			/* (under retry_lock, which final_writeback() takes
			 * first: the store outlives this writeback) */
			int rc = the_fs.store ? zr_store_writeback_all(the_fs.store, ZR_WB_ALL) : 0;

			if (rc == 0)
				rc = zr_data_syncfs(&the_fs, "signal");
			zr_log(ZR_LOG_INFO, "signal %d: %s does not hold this mount on top any more (detached, moved or covered): written back and synced what the daemon holds%s%s; it exits once the mount's last user leaves it",
			       sig, mount_path, rc ? ", with an error: " : "", rc ? strerror(-rc) : "");
			over = true;	/* (nothing more to do for this one) */
		}
		pthread_mutex_unlock(&retry_lock);
		if (ended)
			poke_loop();	/* (returns at once once the loop has) */
		if (sig == SIGHUP || over)
			continue;
		zr_log(ZR_LOG_INFO, "signal %d: unmounting %s", sig, mount_path);
		/* unmount while still serving, so the kernel flushes its dirty pages to us */
		if (umount2(mount_path, 0) == 0 || umount2(mount_path, MNT_DETACH) == 0) {
			detached = true;
			continue;
		}
		/* unprivileged: let fusermount3 do it */
		pid_t pid = fork();

		if (pid == 0) {
			execlp("fusermount3", "fusermount3", "-u", "-z", mount_path, (char *)NULL);
			_exit(127);
		}
		if (pid > 0) {
			int status;

			waitpid(pid, &status, 0);
			if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
				detached = true;
				continue;
			}
		}
		end_loop(sig);
		ended = true;
	}
	return NULL;
}

/* Wait @secs seconds, or until a signal asks for a retry. */
static void wait_retry(unsigned secs)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += secs;
	pthread_mutex_lock(&retry_lock);
	while (!retry_now && pthread_cond_timedwait(&retry_cond, &retry_lock, &ts) == 0)
		;
	retry_now = false;
	pthread_mutex_unlock(&retry_lock);
}

/* File descriptors kept free of the fd cache and the directory handles:
 * the session, the writeback and control paths, libraries, /proc reads. */
#define ZR_FD_RESERVE 64

/*
 * Make the fd cache (max_fds) and the directory handles (a quarter of it)
 * fit the open-file limit: the soft limit is raised to the hard one, and
 * max_fds lowered under what that leaves (an explicit max_fds with a notice
 * on stderr). Out of descriptors, the daemon could not reopen backing files,
 * and at exit glibc could not load libgcc_s for libfuse's pthread_cancel: it
 * aborted before the final writeback, losing every dirty block (a daemon
 * started from a shell with `ulimit -n 1024`, the usual soft limit).
 * libgcc_s is loaded here, while descriptors are free, for the same reason.
 */
static void fit_fd_limit(struct zr_options *o)
{
	struct rlimit rl;
	uint64_t cap;

	(void)dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NODELETE);
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit up = { rl.rlim_max, rl.rlim_max };

		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl = up;
	}
	if (rl.rlim_cur == RLIM_INFINITY)
		return;
	cap = rl.rlim_cur > ZR_FD_RESERVE ? (rl.rlim_cur - ZR_FD_RESERVE) * 4 / 5 : 0;
	if (cap < 16)
		cap = 16;	/* the least max_fds takes; a limit that low fails anyway */
	if (o->max_fds > cap) {
		if (o->max_fds_str)
			fprintf(stderr, "zramfs: notice: max_fds=%u lowered to %u to fit the open-file limit (%llu)\n",
				o->max_fds, (unsigned)cap, (unsigned long long)rl.rlim_cur);
		o->max_fds = (unsigned)cap;
	}
}

/*
 * Write back everything at the end. The daemon holds the only copy of its
 * dirty blocks, so when the backing filesystem refuses them (full, EIO) it
 * keeps them and tries again, after 1 s, then twice as long each time up to
 * a minute, for as long as it runs: until there is room (the signals
 * SIGHUP, SIGTERM and SIGINT make it try at once), or until it is killed
 * with SIGKILL, which is the only way to give them up. A failed syncfs of
 * the backing filesystem counts as a failed attempt: the kernel may have
 * given up pages it could not write, so every block the tier holds is
 * marked dirty and written again (the next syncfs reports only new errors).
 * @return 0 once everything is written back and synced, -EIO when it was
 * but a syncfs failed after data had left RAM, which may be lost
 * (zr_data_syncfs()); with cache=none, -errno when the syncfs failed.
 */
static int final_writeback(struct zr_fs *fs)
{
	unsigned delay = 1, failures = 0;
	struct zr_stats s;
	int rc;

	pthread_mutex_lock(&retry_lock);
	session_over = true;
	retry_now = false;
	pthread_mutex_unlock(&retry_lock);
	__atomic_store_n(&fs->quiesced, true, __ATOMIC_RELAXED);
	if (!fs->store) {
		rc = zr_data_syncfs(fs, "final writeback");
		return rc ? rc : __atomic_load_n(&fs->sync_lost, __ATOMIC_RELAXED) ? -EIO : 0;
	}
	for (;;) {
		rc = zr_store_writeback_all(fs->store, ZR_WB_ALL);
		/* the kernel may give up pages it could not write: what the
		 * tier holds goes out again (zr_data_syncfs() marks it
		 * dirty), until a syncfs succeeds */
		if (rc == 0)
			rc = zr_data_syncfs(fs, "final writeback");
		if (rc == 0)
			break;
		failures++;
		if (delay < ZR_RETRY_MAX_S || failures % ZR_RETRY_LOG_EVERY == 0) {
			zr_store_get_stats(fs->store, &s);
			zr_log(ZR_LOG_ERR, "final writeback failed (%s): %llu dirty blocks are kept in RAM and tried again in %u s (SIGHUP: at once; only SIGKILL gives them up)",
			       strerror(-rc), (unsigned long long)s.blocks_dirty, delay);
		}
		wait_retry(delay);
		delay = delay * 2 > ZR_RETRY_MAX_S ? ZR_RETRY_MAX_S : delay * 2;
	}
	if (failures)
		zr_log(ZR_LOG_INFO, "final writeback done after %u failed attempts", failures);
	if (__atomic_load_n(&fs->sync_lost, __ATOMIC_RELAXED)) {
		zr_log(ZR_LOG_ERR, "a syncfs of the backing filesystem failed while data written back had left RAM (see above): that data may not be on disk; exiting with status 1");
		return -EIO;
	}
	return 0;
}

/*
 * The daemon holds the only copy of the dirty data, which the OOM killer
 * would take with it; tmpfs pages are not freed by killing anyone. Make it
 * a later choice than the programs (it still is one: the tier is bounded
 * by its budget, and the daemon shrinks it when memory runs low): its
 * oom_score_adj goes to ZR_OOM_SCORE_ADJ, unless it is lower already (a
 * service manager may have set it). Lowering it needs CAP_SYS_RESOURCE;
 * without, it stays as it is.
 */
#define ZR_OOM_SCORE_ADJ (-500)

static void lower_oom_score(void)
{
	int fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
	char buf[16];
	ssize_t n;

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		if (atoi(buf) > ZR_OOM_SCORE_ADJ) {
			n = snprintf(buf, sizeof(buf), "%d", ZR_OOM_SCORE_ADJ);
			if (pwrite(fd, buf, (size_t)n, 0) != n)
				zr_log(ZR_LOG_DEBUG, "cannot lower oom_score_adj: %s",
				       strerror(errno));
		}
	}
	close(fd);
}

/*
 * Going to the background in two steps, so that the command that mounted
 * exits with the outcome of the whole start (helper-66: fuse_daemonize()
 * let it exit 0 before the writeback thread was started, and a failure
 * there unmounted behind a "successful" mount). The threads must be
 * started in the child, after the fork.
 *
 * daemon_fork(): in the background case, fork; the parent waits for the
 * child's word and exits 0 when it says ready, 1 when it dies first (it
 * has unmounted by then: the pipe closes at its exit). The child starts a
 * session of its own. @return 0 (in the child, or in the foreground), or
 * a negative errno (nothing forked).
 *
 * daemon_ready(): the start is over: tell the parent, and leave the
 * terminal (stdin, stdout, stderr to /dev/null) when in the background.
 *
 * ready_fd: the pipe's write end in the child, -1 otherwise (the main
 * thread's only).
 */
static int ready_fd = -1;

static int daemon_fork(bool foreground)
{
	int p[2], e;
	char word = 1;
	pid_t pid;

	if (chdir("/") < 0)
		zr_log(ZR_LOG_DEBUG, "chdir /: %s", strerror(errno));
	if (foreground)
		return 0;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		e = errno;
		close(p[0]);
		close(p[1]);
		return -e;
	}
	if (pid > 0) {
		close(p[1]);
		while (read(p[0], &word, 1) < 0 && errno == EINTR)
			;
		_exit(word == 0 ? 0 : 1);	/* (no atexit: the child owns it all) */
	}
	close(p[0]);
	ready_fd = p[1];
	if (setsid() < 0)
		zr_log(ZR_LOG_WARNING, "setsid: %s", strerror(errno));
	return 0;
}

static void daemon_ready(void)
{
	const char word = 0;
	int null;

	if (ready_fd < 0)
		return;
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
	if (write(ready_fd, &word, 1) != 1)
		zr_log(ZR_LOG_WARNING, "cannot tell the mount command that the start is over: %s",
		       strerror(errno));
	close(ready_fd);
	ready_fd = -1;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct zr_options opt;
	struct fuse_loop_config *loop_cfg = NULL;
	struct zr_store_ops store_ops = {
		.writeback = zr_data_writeback_cb,
		.may_expire = zr_data_may_expire_cb,
		.space = zr_data_space_cb,
	};
	char err[512], real_mnt[PATH_MAX];
	struct statvfs sv;
	struct stat st;
	sigset_t sigs, wake;
	pthread_t sig_tid;
	int root_fd = -1, rc, ret = 1;
	bool uring_clean = true;	/* no ring thread left behind (uring.c) */

	/* a file past RLIMIT_FSIZE is EFBIG, not death by SIGXFSZ with the
	 * dirty data (the size probe of the backing filesystem meets it too) */
	signal(SIGXFSZ, SIG_IGN);
	lower_oom_score();
	zr_cond_init_monotonic(&retry_cond);
	if (zr_options_parse(argc, argv, &opt, &args, err, sizeof(err)) < 0) {
		fprintf(stderr, "zramfs: %s\n", err);
		fprintf(stderr, "Try 'zramfs --help' for the options.\n");
		zr_options_free(&opt);
		return 1;
	}
	if (opt.show_help) {
		zr_options_help(argv[0]);
		ret = 0;
		goto out_args;
	}
	if (opt.show_version) {
		printf("zramfs %s\n", PACKAGE_VERSION);
		printf("FUSE library version %s\n", fuse_pkgversion());
		fuse_lowlevel_version();
		ret = 0;
		goto out_args;
	}
	fit_fd_limit(&opt);
	/* a budget of more than half the RAM, or of the limit of a memory
	 * cgroup (a container, a systemd unit with MemoryMax=), invites the
	 * OOM killer to take the daemon and the dirty data it holds: a
	 * warning only, as the tier may never fill */
	if (zr_options_size_warning(&opt, zr_phys_ram_bytes(), zr_mem_limit(),
				    err, sizeof(err)))
		fprintf(stderr, "zramfs: warning: %s\n", err);

	/* The backing directory: must exist, be a directory we can open. */
	root_fd = open(opt.backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		fprintf(stderr, "zramfs: backing directory '%s': %s\n", opt.backing,
			strerror(errno));
		goto out_args;
	}
	/* the config file and fsname= show it resolved; messages quote
	 * it as typed */
	rc = zr_options_resolve_backing(&opt);
	if (rc) {
		fprintf(stderr, "zramfs: backing directory '%s': cannot resolve its path: %s\n",
			opt.backing, strerror(-rc));
		goto out_fd;
	}
	if (!realpath(opt.mountpoint, real_mnt)) {
		fprintf(stderr, "zramfs: mount point '%s': %s\n", opt.mountpoint,
			strerror(errno));
		goto out_fd;
	}
	if (stat(real_mnt, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "zramfs: mount point '%s' is not a directory\n", opt.mountpoint);
		goto out_fd;
	}
	if (opt.over_self && is_zramfs_mount(real_mnt)) {
		/* (over a mount of another filesystem is fine: that is DIR) */
		fprintf(stderr, "zramfs: '%s' is already a zramfs mount\n", real_mnt);
		goto out_fd;
	}
	if (!opt.over_self && is_mounted(real_mnt)) {
		fprintf(stderr, "zramfs: mount point '%s' is already in use (something is mounted there)\n",
			real_mnt);
		goto out_fd;
	}
	if (!opt.over_self && inside_backing(opt.backing_real, real_mnt)) {
		fprintf(stderr, "zramfs: mount point '%s' is inside the backing directory '%s': the daemon would reach its own mount through it (mount elsewhere, or over the backing directory itself: zramfs DIR)\n",
			real_mnt, opt.backing);
		goto out_fd;
	}
	{
		char osrc[PATH_MAX], omnt[PATH_MAX];

		if (zramfs_mounted_from(opt.backing_real, true, osrc, sizeof(osrc),
					omnt, sizeof(omnt))) {
			fprintf(stderr, "zramfs: backing directory '%s' overlaps '%s', the backing directory of the zramfs mounted on '%s': two daemons would each cache and write back the files they share (unmount it first, or use directories that do not contain each other)\n",
				opt.backing, osrc, omnt);
			goto out_fd;
		}
	}
	rc = lock_backing(root_fd, opt.backing_real);
	if (rc) {
		if (rc == -EBUSY)
			fprintf(stderr, "zramfs: backing directory '%s' is locked: by another zramfs daemon (mounted elsewhere, or still writing back after an unmount: see its log), or by another process holding a flock(2) on it (lslocks shows which)\n",
				opt.backing);
		goto out_fd;
	}
	mount_path = real_mnt;
	if (fstatvfs(root_fd, &sv) == 0 && (sv.f_flag & ST_RDONLY) && !opt.read_only) {
		fprintf(stderr, "zramfs: backing directory '%s' is on a read-only filesystem: mounting read-only\n",
			opt.backing);
		opt.read_only = 1;
		fuse_opt_add_arg(&args, "-oro");
	}
	/*
	 * The kernel checks permissions against the mode bits, as on a local
	 * filesystem, unless no_default_permissions: a daemon run by root
	 * (real and effective uid 0: FUSE lets only the mount owner's uid in)
	 * without allow_other then leaves every check to the backing
	 * filesystem, as it answers root. That saves a GETATTR of the parent
	 * directory before every file created in it (a create makes the
	 * kernel forget the directory's attributes); access(2) is then
	 * answered by zr_op_access(). A root process without capabilities
	 * passes every check too, hence opt-in.
	 */
	if (opt.no_default_permissions && (getuid() != 0 || geteuid() != 0)) {
		fprintf(stderr, "zramfs: no_default_permissions needs a daemon run by root (real and effective uid 0)\n");
		goto out_fd;
	}
	opt.default_permissions = !opt.no_default_permissions;
	if (opt.default_permissions)
		fuse_opt_add_arg(&args, "-odefault_permissions");
	{
		char fsname[2 * PATH_MAX + 16];
		const char *realb = opt.backing_real;
		size_t i, o;

		/* libfuse splits -o at commas: a backing path with a comma
		 * must not end the option, nor add options of its own */
		o = (size_t)snprintf(fsname, sizeof(fsname), "-ofsname=");
		for (i = 0; realb[i] && o + 2 < sizeof(fsname); i++) {
			if (realb[i] == ',' || realb[i] == '\\')
				fsname[o++] = '\\';
			fsname[o++] = realb[i];
		}
		fsname[o] = '\0';
		fuse_opt_add_arg(&args, fsname);
		fuse_opt_add_arg(&args, "-osubtype=zramfs");
	}
	{
		/* the kernel's limit on a READ; zr_op_init() says the same */
		char mr[32];

		snprintf(mr, sizeof(mr), "-omax_read=%u", (unsigned)opt.max_read);
		fuse_opt_add_arg(&args, mr);
	}

	/* the kernel applies the caller's umask to every mode it sends us */
	umask(0);
	rc = zr_fs_init(&the_fs, &opt, root_fd);
	if (rc) {
		fprintf(stderr, "zramfs: %s\n", strerror(-rc));
		goto out_fd;
	}
	the_fs.read_only = opt.read_only;
	if (opt.acl && fgetxattr(root_fd, "system.posix_acl_access", NULL, 0) < 0 &&
	    (errno == ENOTSUP || errno == ENOSYS)) {
		if (opt.acl_str) {
			fprintf(stderr, "zramfs: acl=on: the backing filesystem of '%s' has no POSIX ACLs\n",
				opt.backing);
			goto out_fd;
		}
		zr_log(ZR_LOG_INFO, "the backing filesystem has no POSIX ACLs: acl=off");
		opt.acl = false;
	}
	the_fs.bs = opt.store.block_size;
	if (opt.cache != ZR_CACHE_NONE) {
		rc = zr_store_create(&opt.store, &store_ops, &the_fs, &the_fs.store);
		if (rc) {
			fprintf(stderr, "zramfs: cannot create the block store: %s\n",
				strerror(-rc));
			goto out_fd;
		}
		rc = zr_data_ghost_init(&the_fs, opt.store.budget);
		if (rc) {
			fprintf(stderr, "zramfs: cannot create the block store: %s\n",
				strerror(-rc));
			goto out_store;
		}
	}
	if (opt.debug)
		zr_log_set_level(ZR_LOG_DEBUG);

	the_fs.se = fuse_session_new(&args, &zr_ops, sizeof(zr_ops), &the_fs);
	if (!the_fs.se)
		goto out_store;	/* libfuse said why (unknown option...) */

	/* signals go to one thread; block them everywhere else */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* ZR_WAKE_SIG: blocked but in the loop's thread, and in the threads
	 * libfuse starts from it and the ring threads those start (a SIGUSR1
	 * sent to the daemon from outside may cut one of their waits short,
	 * which they retry; it used to end the daemon).
	 * No SA_RESTART: it is to interrupt sem_wait() and read(2). */
	sigemptyset(&wake);
	sigaddset(&wake, ZR_WAKE_SIG);
	pthread_sigmask(SIG_BLOCK, &wake, NULL);
	sigaction(ZR_WAKE_SIG, &(struct sigaction){ .sa_handler = wake_handler }, NULL);

	if (fuse_session_mount(the_fs.se, real_mnt) != 0) {
		fprintf(stderr, "zramfs: cannot mount on '%s'\n", real_mnt);
		goto out_session;
	}
	/* session.c sets the read-ahead of this bdi once INIT is answered */
	if (!mount_info(real_mnt, the_fs.bdi, sizeof(the_fs.bdi), NULL, 0))
		the_fs.bdi[0] = '\0';
	if (zr_session_hook(&the_fs) != 0)
		zr_log(ZR_LOG_WARNING, "cannot hook the session: small writes will be slow");
	rc = daemon_fork(opt.foreground);
	if (rc) {
		fprintf(stderr, "zramfs: cannot go to the background: %s\n", strerror(-rc));
		goto out_unmount;
	}
	loop_tid = pthread_self();	/* (before a signal may need it) */
	rc = pthread_create(&sig_tid, NULL, signal_thread, &sigs);
	if (rc) {
		zr_log(ZR_LOG_ERR, "cannot start the signal thread: %s", strerror(rc));
		goto out_unmount;
	}
	pthread_setname_np(sig_tid, "zramfs-signal");
	pthread_detach(sig_tid);
	rc = zr_wb_start(&the_fs);
	if (rc) {
		zr_log(ZR_LOG_ERR, "cannot start the writeback thread: %s", strerror(-rc));
		goto out_unmount;
	}
	rc = zr_cpulat_start(&the_fs);
	if (rc) {
		zr_log(ZR_LOG_ERR, "cannot start the CPU latency thread: %s", strerror(-rc));
		goto out_unmount;
	}

	daemon_ready();
	if (!opt.foreground)
		zr_log_use_syslog("zramfs");

	pthread_sigmask(SIG_UNBLOCK, &wake, NULL);
	if (opt.singlethread) {
		rc = fuse_session_loop(the_fs.se);
	} else {
		loop_cfg = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(loop_cfg, 0);
		/*
		 * libfuse's default of -1 idle threads keeps every thread it
		 * started (no create/destroy churn); a limit would make it end
		 * threads after a request, and with busy_poll a thread that
		 * leads must come back to read (session.c), as must one that
		 * counts among those serving large READs (n_bulk).
		 */
		fuse_loop_cfg_set_max_threads(loop_cfg, 32);
		rc = fuse_session_loop_mt(the_fs.se, loop_cfg);
		fuse_loop_cfg_destroy(loop_cfg);
	}
	pthread_sigmask(SIG_BLOCK, &wake, NULL);
	pthread_mutex_lock(&drain_lock);
	__atomic_store_n(&loop_done, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&drain_lock);
	uring_clean = zr_uring_stop();
	zr_cpulat_stop(&the_fs);
	zr_wb_stop(&the_fs);
	if (rc)
		zr_log(ZR_LOG_WARNING, "session loop ended with %d", rc);
	zr_fs_drop_orphans(&the_fs);
	ret = final_writeback(&the_fs) == 0 ? 0 : 1;
out_unmount:
	/* (from here a signal touches neither the session nor the store;
	 * on the way out of a failed start, final_writeback() has not said so) */
	pthread_mutex_lock(&retry_lock);
	session_over = true;
	pthread_mutex_unlock(&retry_lock);
	pthread_mutex_lock(&drain_lock);
	__atomic_store_n(&loop_done, true, __ATOMIC_RELAXED);	/* (a failed start) */
	pthread_mutex_unlock(&drain_lock);
	fuse_session_unmount(the_fs.se);
	if (!uring_clean) {
		/* a ring thread may still use the session and the file
		 * system: everything is written back, end without freeing */
		zr_log(ZR_LOG_WARNING, "exiting with a ring thread still busy");
		_exit(ret);
	}
out_session:
	fuse_session_destroy(the_fs.se);
out_store:
	zr_cpulat_stop(&the_fs);
	zr_wb_stop(&the_fs);
	zr_dirh_free_all(&the_fs);
	zr_fs_destroy(&the_fs);
	zr_data_ghost_free(&the_fs);
	zr_store_destroy(the_fs.store);
out_fd:
	close(root_fd);
out_args:
	fuse_opt_free_args(&args);
	zr_options_free(&opt);
	return ret;
}
