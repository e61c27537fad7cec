// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * main.c - zramfs: check the arguments, open the backing directory, mount,
 * serve, and on unmount or SIGTERM/SIGINT write everything back.
 *
 * Signals are taken by one thread with sigwait(): it unmounts the
 * filesystem (so that the kernel first sends us its own dirty pages) while
 * the workers keep serving; the session loop then ends by itself and the
 * final writeback runs. Everything that can be wrong with the arguments is
 * found before the mount, so a refused mount leaves nothing behind.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs.h"
#include "zr_util.h"

static struct zr_fs the_fs;
static const char *mount_path;	/* canonical mount point */

/*
 * Whether @path is a mount point listed in /proc/self/mountinfo. When @dev
 * is given, it receives the "MAJ:MIN" of the topmost mount there.
 */
static bool mount_dev(const char *path, char *dev, size_t devlen)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[8192];
	bool found = false;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char mp[PATH_MAX], mm[32];

		if (sscanf(line, "%*s %*s %31s %*s %4095s", mm, mp) != 2)
			continue;
		zr_unescape_octal(mp);
		if (strcmp(mp, path) != 0)
			continue;
		found = true;	/* later lines are mounted on top: keep going */
		if (dev)
			snprintf(dev, devlen, "%s", mm);
	}
	fclose(f);
	return found;
}

static bool is_mounted(const char *path)
{
	return mount_dev(path, NULL, 0);
}

static void *signal_thread(void *arg)
{
	sigset_t *set = arg;
	int sig;

	for (;;) {
		if (sigwait(set, &sig) != 0)
			continue;
		if (sig == SIGHUP)
			continue;	/* reserved */
		zr_log(ZR_LOG_INFO, "signal %d: unmounting %s", sig, mount_path);
		/* unmount while still serving, so the kernel flushes its dirty pages to us */
		if (umount2(mount_path, 0) == 0)
			continue;
		if (umount2(mount_path, MNT_DETACH) == 0)
			continue;
		/* unprivileged: let fusermount3 do it */
		pid_t pid = fork();

		if (pid == 0) {
			execlp("fusermount3", "fusermount3", "-u", "-z", mount_path, (char *)NULL);
			_exit(127);
		}
		if (pid > 0) {
			int status;

			waitpid(pid, &status, 0);
			if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
				continue;
		}
		fuse_session_exit(the_fs.se);
	}
	return NULL;
}

/*
 * Write back everything at the end. Retries for a while when the backing
 * filesystem refuses (full), since exiting would lose the data.
 * @return 0, or -errno when data could not be written back.
 */
static int final_writeback(struct zr_fs *fs)
{
	int rc = 0;

	if (!fs->store)
		return syncfs(fs->root_fd) < 0 ? -errno : 0;
	for (int attempt = 0; attempt < 30; attempt++) {
		rc = zr_store_writeback_all(fs->store, ZR_WB_ALL);
		if (rc == 0)
			break;
		zr_log(ZR_LOG_ERR, "final writeback failed (%s); retrying (%d/30)",
		       strerror(-rc), attempt + 1);
		sleep(1);
	}
	if (syncfs(fs->root_fd) < 0 && rc == 0)
		rc = -errno;
	if (rc) {
		struct zr_stats s;

		zr_store_get_stats(fs->store, &s);
		zr_log(ZR_LOG_ERR, "%llu dirty blocks could not be written back: %s",
		       (unsigned long long)s.blocks_dirty, strerror(-rc));
	}
	return rc;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct zr_options opt;
	struct fuse_loop_config *loop_cfg = NULL;
	struct zr_store_ops store_ops = { .writeback = zr_data_writeback_cb };
	char err[512], real_mnt[PATH_MAX];
	struct statvfs sv;
	struct stat st;
	sigset_t sigs;
	pthread_t sig_tid;
	int root_fd = -1, rc, ret = 1;

	if (zr_options_parse(argc, argv, &opt, &args, err, sizeof(err)) < 0) {
		fprintf(stderr, "zramfs: %s\n", err);
		fprintf(stderr, "Try 'zramfs --help' for the options.\n");
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

	/* The backing directory: must exist, be a directory we can open. */
	root_fd = open(opt.backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		fprintf(stderr, "zramfs: backing directory '%s': %s\n", opt.backing,
			strerror(errno));
		goto out_args;
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
	if (!opt.over_self && is_mounted(real_mnt)) {
		fprintf(stderr, "zramfs: mount point '%s' is already in use (something is mounted there)\n",
			real_mnt);
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
		char fsname[PATH_MAX + 16];
		char realb[PATH_MAX];

		if (!realpath(opt.backing, realb))
			snprintf(realb, sizeof(realb), "%s", opt.backing);
		snprintf(fsname, sizeof(fsname), "-ofsname=%s", realb);
		fuse_opt_add_arg(&args, fsname);
		fuse_opt_add_arg(&args, "-osubtype=zramfs");
	}

	/* the kernel applies the caller's umask to every mode it sends us */
	umask(0);
	rc = zr_fs_init(&the_fs, &opt, root_fd);
	if (rc) {
		fprintf(stderr, "zramfs: %s\n", strerror(-rc));
		goto out_fd;
	}
	the_fs.read_only = opt.read_only;
	the_fs.bs = opt.store.block_size;
	if (opt.cache != ZR_CACHE_NONE) {
		rc = zr_store_create(&opt.store, &store_ops, &the_fs, &the_fs.store);
		if (rc) {
			fprintf(stderr, "zramfs: cannot create the block store: %s\n",
				strerror(-rc));
			goto out_fd;
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

	if (fuse_session_mount(the_fs.se, real_mnt) != 0) {
		fprintf(stderr, "zramfs: cannot mount on '%s'\n", real_mnt);
		goto out_session;
	}
	/* session.c sets the read-ahead of this bdi once INIT is answered */
	if (!mount_dev(real_mnt, the_fs.bdi, sizeof(the_fs.bdi)))
		the_fs.bdi[0] = '\0';
	if (zr_session_hook(&the_fs) != 0)
		zr_log(ZR_LOG_WARNING, "cannot hook the session: small writes will be slow");
	if (fuse_daemonize(opt.foreground) != 0)
		goto out_unmount;
	if (!opt.foreground)
		zr_log_use_syslog("zramfs");
	if (pthread_create(&sig_tid, NULL, signal_thread, &sigs) != 0)
		goto out_unmount;
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

	if (opt.singlethread) {
		rc = fuse_session_loop(the_fs.se);
	} else {
		loop_cfg = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(loop_cfg, 0);
		/*
		 * libfuse's default of -1 idle threads keeps every thread it
		 * started (no create/destroy churn); a limit would make it end
		 * threads after a request, and with busy_poll a thread that
		 * leads must come back to read (session.c).
		 */
		fuse_loop_cfg_set_max_threads(loop_cfg, 32);
		rc = fuse_session_loop_mt(the_fs.se, loop_cfg);
		fuse_loop_cfg_destroy(loop_cfg);
	}
	zr_cpulat_stop(&the_fs);
	zr_wb_stop(&the_fs);
	if (rc)
		zr_log(ZR_LOG_WARNING, "session loop ended with %d", rc);
	ret = final_writeback(&the_fs) == 0 ? 0 : 1;
out_unmount:
	fuse_session_unmount(the_fs.se);
out_session:
	fuse_session_destroy(the_fs.se);
out_store:
	zr_cpulat_stop(&the_fs);
	zr_wb_stop(&the_fs);
	zr_fs_destroy(&the_fs);
	zr_store_destroy(the_fs.store);
out_fd:
	close(root_fd);
out_args:
	fuse_opt_free_args(&args);
	zr_options_free(&opt);
	return ret;
}
