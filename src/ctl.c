// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ctl.c - the hidden control directory ".zramfs" at the mount root, in the
 * manner of zram's sysfs: `stats` and `config` are read with cat ("name
 * value" lines, a snapshot taken at open), `control` takes one command per
 * write (echo). The directory is reachable by name and not listed, so that
 * `rm -rf` of the mount, find and du never meet it.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs.h"
#include "zr_codec.h"
#include "zr_policy.h"
#include "zr_util.h"
#include "zr_zpool.h"

struct ctl_file {
	const char *name;
	fuse_ino_t ino;
	mode_t mode;
};

static const struct ctl_file ctl_files[] = {
	{ "stats", ZR_CTL_INO_STATS, S_IFREG | 0444 },
	{ "config", ZR_CTL_INO_CONFIG, S_IFREG | 0444 },
	{ "control", ZR_CTL_INO_CONTROL, S_IFREG | 0200 },
};

void zr_ctl_stat(struct zr_fs *fs, fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_nlink = 1;
	if (ino == ZR_CTL_INO_DIR) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return;
	}
	for (size_t i = 0; i < ZR_ARRAY_SIZE(ctl_files); i++)
		if (ctl_files[i].ino == ino)
			st->st_mode = ctl_files[i].mode;
	st->st_size = 0;	/* content is made at open; read with direct_io */
}

int zr_ctl_lookup(struct zr_fs *fs, fuse_ino_t parent, const char *name,
		  struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	if (parent == FUSE_ROOT_ID) {
		e->ino = ZR_CTL_INO_DIR;
	} else if (parent == ZR_CTL_INO_DIR) {
		for (size_t i = 0; i < ZR_ARRAY_SIZE(ctl_files); i++)
			if (strcmp(ctl_files[i].name, name) == 0)
				e->ino = ctl_files[i].ino;
		if (strcmp(name, ".") == 0)
			e->ino = ZR_CTL_INO_DIR;
	}
	if (!e->ino)
		return -ENOENT;
	zr_ctl_stat(fs, e->ino, &e->attr);
	e->attr_timeout = 1.0;
	e->entry_timeout = 1.0;
	return 0;
}

/* The daemon's resident set in bytes, or 0 when /proc cannot tell. */
static long rss_bytes(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
		resident = 0;
	fclose(f);
	return resident * sysconf(_SC_PAGESIZE);
}

/* Close memstream @f, opened on *@buf (which fclose() sets). @return
 * *@buf, or NULL (freed) when a write to it failed (out of memory): a file
 * cut short would be read as whole. */
static char *memstream_close(FILE *f, char **buf)
{
	bool bad = ferror(f);

	if (fclose(f) != 0 || bad) {
		free(*buf);
		return NULL;
	}
	return *buf;
}

/* Render the stats file. @return a malloc'd string (caller frees) or NULL. */
static char *render_stats(struct zr_fs *fs)
{
	struct zr_stats s;
	struct zr_uring_stats us;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	memset(&s, 0, sizeof(s));
	if (fs->store)
		zr_store_get_stats(fs->store, &s);
#define P(name, v) fprintf(f, "%s %" PRIu64 "\n", name, (uint64_t)(v))
	P("orig_data_size", s.orig_data_size);
	P("compr_data_size", s.compr_data_size);
	P("mem_used_total", s.mem_used_total);
	P("mem_used_max", s.mem_used_max);
	P("meta_bytes", s.meta_bytes);
	P("budget", s.budget);
	P("blocks_zero", s.blocks_zero);
	P("blocks_raw", s.blocks_raw);
	P("blocks_pending", s.blocks_pending);
	P("blocks_hot", s.blocks_hot);
	P("blocks_cold", s.blocks_cold);
	P("blocks_dirty", s.blocks_dirty);
	P("hits", s.hits);
	P("misses", s.misses);
	P("recompressions", s.recompressions);
	P("codec_errors", s.codec_errors);
	P("demotions", s.demotions);
	P("writebacks", s.writebacks);
	P("bytes_written_back", s.bytes_written_back);
	P("writeback_errors", s.writeback_errors);
	P("enospc", s.enospc);
	P("files", s.files);
	P("bytes_read_backing", zr_stat_read(&fs->bytes_read_backing));
	P("bytes_written_backing", zr_stat_read(&fs->bytes_written_backing));
	P("bytes_written_direct", zr_stat_read(&fs->bytes_written_direct));
	P("writes_direct", zr_stat_read(&fs->writes_direct));
	P("pid", getpid());
	P("rss_bytes", rss_bytes());
	P("fds_open", fs->nfds);
	P("fd_opens", zr_stat_read(&fs->fd_opens));
	P("orphans", zr_stat_read(&fs->norphans));
	P("psi_shrinks", zr_stat_read(&fs->psi_shrinks));
	P("lowmem_shrinks", zr_stat_read(&fs->lowmem_shrinks));
	P("recompress_busy", zr_stat_read(&fs->recompress_busy));
	P("stream_copies", zr_stat_read(&fs->stream_copies));
	P("stream_copies_dropped", zr_stat_read(&fs->fill_dropped));
	P("stream_copies_idle", zr_stat_read(&fs->fill_thread_copies));
	P("written_around", zr_stat_read(&fs->written_around));
	P("misses_not_kept", zr_stat_read(&fs->misses_not_kept));
	P("handle_opens", zr_stat_read(&fs->handle_opens));
	P("removed_dropped", zr_stat_read(&fs->removed_dropped));
	P("creates_stale", zr_stat_read(&fs->creates_stale));
	P("creates_as_caller", zr_stat_read(&fs->creates_as_caller));
	P("cpu_latency_held", zr_cpulat_held(fs) ? 1 : 0);
	P("cpu_latency_raised", zr_cpulat_raised(fs));
	P("busy_poll_leads", zr_session_leads());
	P("busy_poll_takeovers", zr_session_takeovers());
	P("busy_poll_ms", zr_session_poll_ms());
	P("busy_poll_stops", zr_session_poll_stops());
	P("busy_poll_sleeps", zr_session_poll_sleeps());
	zr_uring_stats(&us);
	P("uring_active", zr_uring_active());
	P("uring_requests", us.requests);
	P("uring_threads", us.threads);
	P("uring_unpins", us.unpins);
	P("uring_repins", us.repins);
	P("uring_unpinned", us.unpinned);
	P("uring_sched_idle", us.sched_idle ? 1 : 0);
	P("uring_sched_switches", us.sched_switches);
	P("buffer_trims", zr_session_trims() + us.trims);
#undef P
	return memstream_close(f, &buf);
}

static const char *cache_name(enum zr_cache_mode m)
{
	return m == ZR_CACHE_NONE ? "none" :
	       m == ZR_CACHE_WRITETHROUGH ? "writethrough" : "writeback";
}

/* Render the config file: the options in force. @return a malloc'd
 * string (caller frees) or NULL when out of memory. */
static char *render_config(struct zr_fs *fs)
{
	const struct zr_options *o = fs->opt;
	const struct zr_store_config *c = &o->store;
	struct zr_stats s;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	memset(&s, 0, sizeof(s));
	s.budget = c->budget;
	if (fs->store)
		zr_store_get_stats(fs->store, &s);
	fprintf(f, "backing %s\n", o->backing_real);
	fprintf(f, "size %" PRIu64 "\n", s.budget);
	fprintf(f, "comp %s\n", zr_codec_name(c->comp));
	fprintf(f, "comp_level %d\n", c->comp_level);
	fprintf(f, "cold_comp %s\n", zr_codec_name(c->cold_comp));
	fprintf(f, "cold_level %d\n", c->cold_level);
	fprintf(f, "block_size %u\n", c->block_size);
	fprintf(f, "min_saving %u\n", c->min_saving);
	fprintf(f, "policy %s\n", c->policy == ZR_POLICY_LRU ? "lru" : "adaptive");
	fprintf(f, "dirty_expire %" PRIu64 "\n",
		(uint64_t)__atomic_load_n(&fs->dirty_expire_ms, __ATOMIC_RELAXED));
	fprintf(f, "seq_cutoff %" PRIu64 "\n", o->seq_cutoff);
	fprintf(f, "cache %s\n", cache_name(o->cache));
	fprintf(f, "high_wm %u\n", c->high_wm);
	fprintf(f, "low_wm %u\n", c->low_wm);
	fprintf(f, "max_fds %u\n", o->max_fds);
	fprintf(f, "read_ahead %llu\n",	/* (0 once it could not be set) */
		(unsigned long long)__atomic_load_n(&o->read_ahead, __ATOMIC_RELAXED));
	fprintf(f, "max_read %u\n", (unsigned)o->max_read);
	if (o->cpu_latency < 0)
		fprintf(f, "cpu_latency off\n");
	else
		fprintf(f, "cpu_latency %d\n", o->cpu_latency);
	fprintf(f, "busy_poll %u\n", o->busy_poll);
	fprintf(f, "default_permissions %d\n", o->default_permissions);
	fprintf(f, "xattr %s\n", o->no_xattr ? "off" : "on");
	fprintf(f, "uring %s\n", o->uring ? "on" : "off");
	fprintf(f, "stream_direct %s\n", o->no_stream_direct ? "off" : "on");
	fprintf(f, "acl %s\n", fs->acl_on ? "on" : "off");
	fprintf(f, "version %s\n", PACKAGE_VERSION);
	return memstream_close(f, &buf);
}

void zr_ctl_open(fuse_req_t req, struct zr_fs *fs, fuse_ino_t ino,
		 struct fuse_file_info *fi)
{
	char *content = NULL;

	if (ino == ZR_CTL_INO_DIR) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (ino == ZR_CTL_INO_CONTROL) {
		if ((fi->flags & O_ACCMODE) == O_RDONLY) {
			fuse_reply_err(req, EACCES);
			return;
		}
	} else {
		if ((fi->flags & O_ACCMODE) != O_RDONLY) {
			fuse_reply_err(req, EACCES);
			return;
		}
		content = ino == ZR_CTL_INO_STATS ? render_stats(fs) : render_config(fs);
		if (!content) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
	}
	fi->fh = (uint64_t)(uintptr_t)content;
	fi->direct_io = 1;	/* size is 0 in getattr; read what is there */
	fi->nonseekable = 0;
	/* (refused: the opener went away, and no RELEASE will free it) */
	if (fuse_reply_open(req, fi) != 0)
		free(content);
}

void zr_ctl_read(fuse_req_t req, struct zr_fs *fs, fuse_ino_t ino, size_t size,
		 off_t off, struct fuse_file_info *fi)
{
	const char *content = (const char *)(uintptr_t)fi->fh;
	size_t len = content ? strlen(content) : 0;

	if (!content || (size_t)off >= len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	/* reply from a copy: release may free the snapshot as soon as the
	 * reader has its bytes, while our writev has not yet returned */
	{
		size_t n = ZR_MIN(size, len - (size_t)off);
		char *copy = malloc(n);

		if (!copy) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		memcpy(copy, content + off, n);
		fuse_reply_buf(req, copy, n);
		free(copy);
	}
}

void zr_ctl_release(struct zr_fs *fs, struct fuse_file_info *fi)
{
	free((char *)(uintptr_t)fi->fh);
	fi->fh = 0;
}

/* Whether @cmd only acts on the tier's blocks (a writeback, drop_clean,
 * compact). */
static bool tier_only_command(const char *cmd)
{
	static const char *const cmds[] = { "writeback", "writeback all", "writeback idle",
					    "writeback raw", "drop_clean", "compact" };

	for (size_t i = 0; i < ZR_ARRAY_SIZE(cmds); i++)
		if (strcmp(cmd, cmds[i]) == 0)
			return true;
	return false;
}

/* Run one control command. @return 0 or -errno. */
static int ctl_command(struct zr_fs *fs, char *cmd)
{
	uint64_t v;

	if (!fs->store) {
		/* cache=none has no tier: nothing to write back, drop or
		 * compact (`zramfsctl umount` asks for a writeback first,
		 * and failed), and no budget to change */
		if (tier_only_command(cmd))
			return 0;
		if (strncmp(cmd, "dirty_expire=", 13) != 0)
			return -EOPNOTSUPP;
	}
	if (strcmp(cmd, "writeback all") == 0 || strcmp(cmd, "writeback") == 0)
		return zr_store_writeback_all(fs->store, ZR_WB_ALL);
	if (strcmp(cmd, "writeback idle") == 0)
		return zr_store_writeback_all(fs->store, ZR_WB_IDLE);
	if (strcmp(cmd, "writeback raw") == 0)
		return zr_store_writeback_all(fs->store, ZR_WB_RAW);
	if (strcmp(cmd, "drop_clean") == 0) {
		zr_store_drop_clean(fs->store);
		return 0;
	}
	if (strcmp(cmd, "compact") == 0) {
		zr_store_compact(fs->store);
		return 0;
	}
	if (strncmp(cmd, "size=", 5) == 0) {
		char warn[256];
		int rc;

		static pthread_mutex_t size_lock = PTHREAD_MUTEX_INITIALIZER;

		if (zr_parse_size(cmd + 5, zr_ram_bytes(), &v) || v < 1024 * 1024)
			return -EINVAL;
		/* two writers: both copies of the budget end as one's */
		pthread_mutex_lock(&size_lock);
		rc = zr_store_set_budget(fs->store, v);
		if (rc == 0)
			__atomic_store_n(&fs->opt->store.budget, v, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&size_lock);
		if (rc == -ENOSPC)
			zr_log(ZR_LOG_WARNING, "control: size=%s is too small now: the pool's tables, which never shrink, and room for a few blocks need %" PRIu64 " bytes",
			       cmd + 5, zr_store_budget_min(fs->store));
		/* as at mount: taken, with a warning */
		if (rc == 0 && zr_options_size_warning(fs->opt, zr_phys_ram_bytes(),
						       zr_mem_limit(), warn, sizeof(warn)))
			zr_log(ZR_LOG_WARNING, "control: warning: %s", warn);
		return rc;
	}
	/* for the tests: the pool's allocations fail after N more succeed
	 * (negative: never), only in a daemon started with ZRAMFS_FAULTS=1 */
	if (strncmp(cmd, "fail_alloc=", 11) == 0) {
		const char *on = getenv("ZRAMFS_FAULTS");
		char *e;
		long n;

		if (!on || strcmp(on, "1") != 0)
			return -EINVAL;
		errno = 0;
		n = strtol(cmd + 11, &e, 10);
		if (errno || e == cmd + 11 || *e)
			return -EINVAL;
		zr_zpool_fail_after(zr_store_test_pool(fs->store), n);
		return 0;
	}
	if (strncmp(cmd, "dirty_expire=", 13) == 0) {
		if (zr_parse_duration_ms(cmd + 13, &v))
			return -EINVAL;
		__atomic_store_n(&fs->dirty_expire_ms, v, __ATOMIC_RELAXED);
		__atomic_store_n(&fs->expire_now, true, __ATOMIC_RELAXED);
		pthread_mutex_lock(&fs->wb_lock);
		pthread_cond_broadcast(&fs->wb_cond);
		pthread_mutex_unlock(&fs->wb_lock);
		return 0;
	}
	return -EINVAL;
}

void zr_ctl_write(fuse_req_t req, struct zr_fs *fs, fuse_ino_t ino, const char *buf,
		  size_t size, struct fuse_file_info *fi)
{
	char cmd[256];
	size_t n = ZR_MIN(size, sizeof(cmd) - 1), i;
	int rc;

	if (ino != ZR_CTL_INO_CONTROL) {
		fuse_reply_err(req, EACCES);
		return;
	}
	if (size >= sizeof(cmd) || memchr(buf, '\0', size)) {
		/* cut short, it might be another command */
		zr_log(ZR_LOG_WARNING, "control: a command of %zu bytes%s refused",
		       size, size >= sizeof(cmd) ? "" : " with a NUL byte");
		fuse_reply_err(req, EINVAL);
		return;
	}
	memcpy(cmd, buf, n);
	cmd[n] = '\0';
	while (n && (cmd[n - 1] == '\n' || cmd[n - 1] == ' ' || cmd[n - 1] == '\r'))
		cmd[--n] = '\0';
	rc = ctl_command(fs, cmd);
	/* (logged with its control characters, an inner newline say, as
	 * '?': one command, one line of the log) */
	for (i = 0; cmd[i]; i++)
		if ((unsigned char)cmd[i] < 0x20 || cmd[i] == 0x7f)
			cmd[i] = '?';
	zr_log(rc ? ZR_LOG_WARNING : ZR_LOG_INFO, "control: '%s': %s", cmd,
	       rc ? strerror(-rc) : "done");
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, size);
}

void zr_ctl_readdir(fuse_req_t req, struct zr_fs *fs, size_t size, off_t off,
		    int plus)
{
	char *buf = calloc(1, size);
	size_t used = 0;
	off_t i;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (i = off; i < (off_t)ZR_ARRAY_SIZE(ctl_files) + 2; i++) {
		struct fuse_entry_param e;
		const char *name;
		size_t n;

		memset(&e, 0, sizeof(e));
		if (i == 0) {
			name = ".";
			zr_ctl_stat(fs, ZR_CTL_INO_DIR, &e.attr);
		} else if (i == 1) {
			name = "..";
			e.attr.st_ino = FUSE_ROOT_ID;
			e.attr.st_mode = S_IFDIR;
		} else {
			name = ctl_files[i - 2].name;
			zr_ctl_stat(fs, ctl_files[i - 2].ino, &e.attr);
			if (plus) {
				e.ino = ctl_files[i - 2].ino;
				e.attr_timeout = e.entry_timeout = 1.0;
			}
		}
		if (plus)
			n = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, i + 1);
		else
			n = fuse_add_direntry(req, buf + used, size - used, name, &e.attr, i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}
