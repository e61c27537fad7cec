// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * options.c - command line and mount options of zramfs.
 *
 * fuse_opt writes each of our options as a string into struct zr_options;
 * zr_options_parse() then checks and converts every one, so that a wrong
 * value is refused with a message naming the option and the allowed values
 * before anything is mounted. Options we do not know are handed to libfuse,
 * which refuses the unknown ones itself.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "zr_codec.h"
#include "zr_util.h"

enum {
	KEY_HELP,
	KEY_VERSION,
	KEY_FOREGROUND,
	KEY_DEBUG,
	KEY_SINGLE,
	KEY_ALLOW_OTHER,
	KEY_DEFAULT_PERMS,
	KEY_NO_DEFAULT_PERMS,
	KEY_ALLOW_ROOT,
	KEY_RO,
	KEY_RW,
	KEY_IGNORE,
	KEY_REMOUNT,
};

#define ZR_OPT(t, f) { t, offsetof(struct zr_options, f), 0 }

static const struct fuse_opt zr_opt_spec[] = {
	ZR_OPT("size=%s", size_str),
	ZR_OPT("comp=%s", comp_str),
	ZR_OPT("comp_level=%s", comp_level_str),
	ZR_OPT("cold_comp=%s", cold_comp_str),
	ZR_OPT("cold_level=%s", cold_level_str),
	ZR_OPT("block_size=%s", block_size_str),
	ZR_OPT("min_saving=%s", min_saving_str),
	ZR_OPT("policy=%s", policy_str),
	ZR_OPT("dirty_expire=%s", dirty_expire_str),
	ZR_OPT("seq_cutoff=%s", seq_cutoff_str),
	ZR_OPT("cache=%s", cache_str),
	ZR_OPT("high_wm=%s", high_wm_str),
	ZR_OPT("low_wm=%s", low_wm_str),
	ZR_OPT("max_fds=%s", max_fds_str),
	ZR_OPT("read_ahead=%s", read_ahead_str),
	ZR_OPT("max_read=%s", max_read_str),
	ZR_OPT("cpu_latency=%s", cpu_latency_str),
	ZR_OPT("busy_poll=%s", busy_poll_str),
	ZR_OPT("xattr=%s", xattr_str),
	ZR_OPT("uring=%s", uring_str),
	ZR_OPT("stream_direct=%s", stream_direct_str),
	ZR_OPT("acl=%s", acl_str),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("-f", KEY_FOREGROUND),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("debug", KEY_DEBUG),
	FUSE_OPT_KEY("-s", KEY_SINGLE),
	FUSE_OPT_KEY("allow_other", KEY_ALLOW_OTHER),
	FUSE_OPT_KEY("default_permissions", KEY_DEFAULT_PERMS),
	FUSE_OPT_KEY("no_default_permissions", KEY_NO_DEFAULT_PERMS),
	FUSE_OPT_KEY("allow_root", KEY_ALLOW_ROOT),
	FUSE_OPT_KEY("ro", KEY_RO),
	/* fstab words that mount(8)/mount.fuse3 may leave in -o */
	FUSE_OPT_KEY("defaults", KEY_IGNORE),
	FUSE_OPT_KEY("auto", KEY_IGNORE),
	FUSE_OPT_KEY("noauto", KEY_IGNORE),
	FUSE_OPT_KEY("nofail", KEY_IGNORE),
	FUSE_OPT_KEY("_netdev", KEY_IGNORE),
	FUSE_OPT_KEY("user", KEY_IGNORE),
	FUSE_OPT_KEY("users", KEY_IGNORE),
	FUSE_OPT_KEY("rw", KEY_RW),
	FUSE_OPT_KEY("remount", KEY_REMOUNT),
	FUSE_OPT_END
};

struct parse_ctx {
	struct zr_options *o;
	int nonopts;
	char *err;
	size_t errlen;
};

/* fuse_opt hands the option struct to zr_opt_proc; the rest of the parse
 * state lives here for the duration of one zr_options_parse() call. */
static __thread struct parse_ctx *cur_pc;

static int zr_opt_proc(void *data, const char *arg, int key,
		       struct fuse_args *outargs)
{
	struct parse_ctx *pc = cur_pc;
	struct zr_options *o = data;
	char **dst;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (pc->nonopts >= 2) {
			snprintf(pc->err, pc->errlen,
				 "too many arguments: '%s' (usage: zramfs [-o opt,...] [BACKING] MOUNTPOINT)",
				 arg);
			return -1;
		}
		dst = pc->nonopts == 0 ? &o->backing : &o->mountpoint;
		*dst = strdup(arg);
		if (!*dst) {
			snprintf(pc->err, pc->errlen, "out of memory");
			return -1;
		}
		pc->nonopts++;
		return 0;
	case KEY_HELP:
		o->show_help = 1;
		return 0;
	case KEY_VERSION:
		o->show_version = 1;
		return 0;
	case KEY_FOREGROUND:
		o->foreground = 1;
		return 0;
	case KEY_DEBUG:
		o->debug = 1;
		o->foreground = 1;
		return 1;	/* libfuse prints the requests */
	case KEY_SINGLE:
		o->singlethread = 1;
		return 0;
	case KEY_ALLOW_OTHER:
		o->allow_other = 1;
		return 1;
	case KEY_DEFAULT_PERMS:
		o->default_permissions = 1;
		return 0;	/* main.c decides */
	case KEY_NO_DEFAULT_PERMS:
		o->no_default_permissions = 1;
		return 0;
	case KEY_ALLOW_ROOT:
		o->allow_root = 1;	/* another user than the owner: root */
		return 1;
	case KEY_RO:
		o->read_only = 1;
		return 1;
	case KEY_RW:
		/* the last of ro and rw wins, as for mount(8) (libfuse,
		 * handed both in order, sets the kernel's flag so) */
		o->read_only = 0;
		return 1;
	case KEY_IGNORE:
		return 0;
	case KEY_REMOUNT:
		/* (mount -o remount runs the helper, which would start a
		 * second daemon on the mount point) */
		snprintf(pc->err, pc->errlen,
			 "remount is not supported: change size= or dirty_expire= of a live mount with 'zramfsctl set MOUNTPOINT size=SIZE dirty_expire=DURATION'");
		return -1;
	case FUSE_OPT_KEY_OPT:
		if (strncmp(arg, "x-", 2) == 0)
			return 0;	/* fstab/systemd comments */
		return 1;		/* libfuse judges it */
	default:
		return 1;
	}
}

static int bad(struct parse_ctx *pc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int bad(struct parse_ctx *pc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(pc->err, pc->errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* One of the words an option takes, and what it stands for. */
struct word {
	const char *name;	/* NULL ends a list */
	int value;
};

/* *@out = the value of word @s in @words. @return 0, or -EINVAL if none. */
static int pick_word(const char *s, const struct word *words, int *out)
{
	for (; words->name; words++)
		if (strcmp(s, words->name) == 0) {
			*out = words->value;
			return 0;
		}
	return -EINVAL;
}

/*
 * The on|off option @name given as @s: *@on = its value, left as it was
 * (the default) when @s is NULL. @return 0, or -EINVAL with the message in
 * @pc.
 */
static int parse_on_off(struct parse_ctx *pc, const char *name, const char *s, bool *on)
{
	static const struct word w[] = { { "on", 1 }, { "off", 0 }, { NULL, 0 } };
	int word;

	if (!s)
		return 0;
	if (pick_word(s, w, &word))
		return bad(pc, "invalid value '%s' for %s: expected on or off", s, name);
	*on = word;
	return 0;
}

/* A whole number in [@lo, @hi], digits only, with an optional "%".
 * @return 0 with *@out set, or -EINVAL (the caller words the message). */
static int parse_uint_pct(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *e;
	unsigned long v;

	if (!isdigit((unsigned char)*s))	/* (strtoul takes blanks and signs) */
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &e, 10);
	if (errno || e == s || (*e != '\0' && strcmp(e, "%") != 0) || v < lo || v > hi)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/*
 * Value @s of option @name: "off" (*@out = @off_val) or microseconds from 0
 * to @max (no %). @return 0, or -EINVAL with a message naming @name.
 */
static int parse_us_or_off(struct parse_ctx *pc, const char *name, const char *s,
			   unsigned max, long off_val, long *out)
{
	unsigned us;

	if (strcmp(s, "off") == 0) {
		*out = off_val;
		return 0;
	}
	if (strchr(s, '%') || parse_uint_pct(s, 0, max, &us))
		return bad(pc, "invalid value '%s' for %s: expected microseconds, 0..%u, or off",
			   s, name, max);
	*out = us;
	return 0;
}

/* Value @s of option @optname, a codec name. @return 0 with *@out set, or
 * -EINVAL with a message listing the codecs. */
static int parse_codec(struct parse_ctx *pc, const char *optname, const char *s,
		       enum zr_codec_id *out)
{
	int id = zr_codec_by_name(s);

	if (id < 0)
		return bad(pc, "invalid value '%s' for %s: expected lz4, lz4hc, zstd or none",
			   s, optname);
	*out = (enum zr_codec_id)id;
	return 0;
}

/*
 * Value @s of option @optname, a level of @codec. @return 0, or -EINVAL
 * with a message quoting @s and giving the codec's range.
 */
static int parse_level(struct parse_ctx *pc, const char *optname, const char *s,
		       enum zr_codec_id codec, int *out)
{
	char *e;
	long v;
	int min = 0, max = 0;

	errno = 0;
	v = strtol(s, &e, 10);
	if (errno || e == s || *e != '\0' || v < INT_MIN || v > INT_MAX ||
	    zr_codec_level_valid(codec, (int)v, &min, &max) < 0) {
		zr_codec_level_valid(codec, INT_MIN, &min, &max);
		return bad(pc, "invalid value '%s' for %s: %s accepts %d..%d",
			   s, optname, zr_codec_name(codec), min, max);
	}
	*out = (int)v;
	return 0;
}

/* Convert and check every option string; fill o->store and friends.
 * @return 0, or -EINVAL with pc->err naming the first bad option. */
static int zr_options_check(struct parse_ctx *pc)
{
	struct zr_options *o = pc->o;
	struct zr_store_config *c = &o->store;
	uint64_t v;
	long us;
	int rc, word;
	bool on;

	if (o->size_str) {
		rc = zr_parse_size(o->size_str, zr_ram_bytes(), &v);
		if (rc || v < 1024 * 1024)
			return bad(pc, "invalid value '%s' for size: expected bytes with an optional k/m/g/t suffix or a percentage (up to 100%%) of RAM or of the memory cgroup's limit, at least 1m%s",
				   o->size_str, "");
		c->budget = v;
	}
	if (o->block_size_str) {
		rc = zr_parse_size(o->block_size_str, 0, &v);
		if (rc || v < ZR_BLOCK_MIN || v > ZR_BLOCK_MAX || (v & (v - 1)))
			return bad(pc, "invalid value '%s' for block_size: expected a power of two from 4k to 128k%s",
				   o->block_size_str, "");
		c->block_size = (uint32_t)v;
	}
	if (o->comp_str && (rc = parse_codec(pc, "comp", o->comp_str, &c->comp)))
		return rc;
	c->comp_level = zr_codec_default_level(c->comp);
	if (o->comp_level_str &&
	    (rc = parse_level(pc, "comp_level", o->comp_level_str, c->comp, &c->comp_level)))
		return rc;
	if (o->cold_comp_str &&
	    (rc = parse_codec(pc, "cold_comp", o->cold_comp_str, &c->cold_comp)))
		return rc;
	if (o->cold_comp_str || !o->cold_level_str)
		c->cold_level = zr_codec_default_level(c->cold_comp);
	if (o->cold_level_str &&
	    (rc = parse_level(pc, "cold_level", o->cold_level_str, c->cold_comp, &c->cold_level)))
		return rc;
	c->min_saving = c->block_size / 8;
	if (o->min_saving_str) {
		size_t l = strlen(o->min_saving_str);

		if (l && o->min_saving_str[l - 1] == '%') {
			unsigned pct;

			if (parse_uint_pct(o->min_saving_str, 0, 99, &pct))
				return bad(pc, "invalid value '%s' for min_saving: expected bytes below the block size, or 0..99%%%s",
					   o->min_saving_str, "");
			c->min_saving = (uint32_t)((uint64_t)c->block_size * pct / 100);
		} else {
			rc = zr_parse_size(o->min_saving_str, 0, &v);
			if (rc || v >= c->block_size)
				return bad(pc, "invalid value '%s' for min_saving: expected bytes below the block size, or 0..99%%%s",
					   o->min_saving_str, "");
			c->min_saving = (uint32_t)v;
		}
	}
	if (o->policy_str) {
		static const struct word w[] = {
			{ "adaptive", ZR_POLICY_ADAPTIVE }, { "lru", ZR_POLICY_LRU }, { NULL, 0 },
		};

		if (pick_word(o->policy_str, w, &word))
			return bad(pc, "invalid value '%s' for policy: expected adaptive or lru%s",
				   o->policy_str, "");
		c->policy = (enum zr_policy_kind)word;
	}
	if (o->dirty_expire_str &&
	    zr_parse_duration_ms(o->dirty_expire_str, &o->dirty_expire_ms))
		return bad(pc, "invalid value '%s' for dirty_expire: expected a duration like 30s, 500ms, 2m (a bare number is seconds)%s",
			   o->dirty_expire_str, "");
	if (o->seq_cutoff_str && zr_parse_size(o->seq_cutoff_str, 0, &o->seq_cutoff))
		return bad(pc, "invalid value '%s' for seq_cutoff: expected bytes with an optional k/m/g/t suffix (0 disables)%s",
			   o->seq_cutoff_str, "");
	if (o->cache_str) {
		static const struct word w[] = {
			{ "writeback", ZR_CACHE_WRITEBACK }, { "writethrough", ZR_CACHE_WRITETHROUGH },
			{ "none", ZR_CACHE_NONE }, { NULL, 0 },
		};

		if (pick_word(o->cache_str, w, &word))
			return bad(pc, "invalid value '%s' for cache: expected writeback, writethrough or none%s",
				   o->cache_str, "");
		o->cache = (enum zr_cache_mode)word;
	}
	on = true;
	if (parse_on_off(pc, "xattr", o->xattr_str, &on))
		return -EINVAL;
	o->no_xattr = !on;
	on = false;
	if (parse_on_off(pc, "uring", o->uring_str, &on))
		return -EINVAL;
	o->uring = on;
	on = true;
	if (parse_on_off(pc, "stream_direct", o->stream_direct_str, &on))
		return -EINVAL;
	o->no_stream_direct = !on;
	/* on by default, as on ext4 and tmpfs, where it can be: ACLs are
	 * extended attributes, and the kernel checks them */
	on = !o->no_xattr && !o->no_default_permissions;
	if (parse_on_off(pc, "acl", o->acl_str, &on))
		return -EINVAL;
	o->acl = on;
	if (o->acl && o->no_xattr) {
		snprintf(pc->err, pc->errlen, "acl=on needs extended attributes: it cannot be combined with -o xattr=off");
		return -EINVAL;
	}
	if (o->acl && o->no_default_permissions) {
		snprintf(pc->err, pc->errlen, "acl=on has the kernel check permissions: it cannot be combined with -o no_default_permissions");
		return -EINVAL;
	}
	if (o->high_wm_str && parse_uint_pct(o->high_wm_str, 10, 100, &c->high_wm))
		return bad(pc, "invalid value '%s' for high_wm: expected a percentage of size, 10..100%s",
			   o->high_wm_str, "");
	if (o->low_wm_str && parse_uint_pct(o->low_wm_str, 5, 100, &c->low_wm))
		return bad(pc, "invalid value '%s' for low_wm: expected a percentage of size, 5..100%s",
			   o->low_wm_str, "");
	if (c->low_wm > c->high_wm)	/* one of them may be the default */
		return bad(pc, "low_wm (%u%%%s) must not be above high_wm (%u%%%s)",
			   c->low_wm, o->low_wm_str ? "" : ", the default",
			   c->high_wm, o->high_wm_str ? "" : ", the default");
	if (o->no_default_permissions &&
	    (o->default_permissions || o->allow_other || o->allow_root)) {
		snprintf(pc->err, pc->errlen,
			 "no_default_permissions cannot be combined with -o %s",
			 o->default_permissions ? "default_permissions" :
			 o->allow_other ? "allow_other" : "allow_root");
		return -EINVAL;
	}
	if (o->max_fds_str) {
		unsigned n;

		if (parse_uint_pct(o->max_fds_str, 16, 1000000, &n) || strchr(o->max_fds_str, '%'))
			return bad(pc, "invalid value '%s' for max_fds: expected a count, 16..1000000%s",
				   o->max_fds_str, "");
		o->max_fds = n;
	}
	if (o->read_ahead_str) {
		rc = zr_parse_size(o->read_ahead_str, 0, &v);
		/* the kernel keeps it in pages: refused, not rounded down,
		 * as max_read is */
		if (rc || v > 64ull << 20 || (v && v < 4096) || v % 4096)
			return bad(pc, "invalid value '%s' for read_ahead: expected bytes from 4k to 64m, a multiple of 4k, with an optional k/m suffix, or 0 for the kernel's default%s",
				   o->read_ahead_str, "");
		o->read_ahead = v;
	}
	if (o->max_read_str) {
		rc = zr_parse_size(o->max_read_str, 0, &v);
		if (rc || v < 4096 || v > 1024 * 1024 || v % 4096)
			return bad(pc, "invalid value '%s' for max_read: expected bytes from 4k to 1m, a multiple of 4k, with an optional k/m suffix%s",
				   o->max_read_str, "");
		o->max_read = (uint32_t)v;
	}
	if (o->cpu_latency_str) {
		if (parse_us_or_off(pc, "cpu_latency", o->cpu_latency_str, 100000, -1, &us))
			return -EINVAL;
		o->cpu_latency = (int)us;
	}
	if (o->busy_poll_str) {
		if (parse_us_or_off(pc, "busy_poll", o->busy_poll_str, 1000, 0, &us))
			return -EINVAL;
		o->busy_poll = (unsigned)us;
	}
	if (!o->backing && !o->show_help && !o->show_version) {
		snprintf(pc->err, pc->errlen,
			 "missing MOUNTPOINT (usage: zramfs [-o opt,...] [BACKING] MOUNTPOINT)");
		return -EINVAL;
	}
	if (o->backing && !o->mountpoint) {
		o->mountpoint = strdup(o->backing);
		if (!o->mountpoint) {
			snprintf(pc->err, pc->errlen, "out of memory");
			return -ENOMEM;
		}
		o->over_self = 1;
	}
	return 0;
}

int zr_options_parse(int argc, char **argv, struct zr_options *o,
		     struct fuse_args *fargs, char *err, size_t errlen)
{
	struct parse_ctx pc = { .o = o, .err = err, .errlen = errlen };
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	int rc;

	memset(o, 0, sizeof(*o));
	err[0] = '\0';
	zr_store_config_default(&o->store);
	o->store.budget = zr_ram_bytes() / 4;
	o->dirty_expire_ms = 30000;
	o->seq_cutoff = 4ull << 20;
	o->cache = ZR_CACHE_WRITEBACK;
	o->max_fds = 4096;
	o->read_ahead = 1024 * 1024;
	o->max_read = 512 * 1024;
	o->cpu_latency = 0;
	o->busy_poll = 20;

	cur_pc = &pc;
	rc = fuse_opt_parse(&args, o, zr_opt_spec, zr_opt_proc);
	cur_pc = NULL;
	if (rc == -1) {
		if (!err[0])
			snprintf(err, errlen, "invalid arguments");
		fuse_opt_free_args(&args);
		return -EINVAL;
	}
	if (zr_options_check(&pc) < 0) {
		fuse_opt_free_args(&args);
		return -EINVAL;
	}
	*fargs = args;
	return 0;
}

bool zr_options_size_warning(const struct zr_options *o, uint64_t ram,
			     uint64_t limit, char *buf, size_t len)
{
	uint64_t budget = o->store.budget;
	bool cg = limit != UINT64_MAX && (!ram || limit < ram);
	uint64_t mem = cg ? limit : ram;
	char b[32], m[32];

	if (!mem || budget <= mem / 2)
		return false;
	zr_human_size(budget, b, sizeof(b));
	zr_human_size(mem, m, sizeof(m));
	snprintf(buf, len, "size= %s is more than %s (%s): with the page cache and the daemon's own memory on top, the OOM killer may end the daemon and lose the data it holds",
		 b, cg ? "half the memory limit of this cgroup" :
		 budget > mem ? "the physical RAM" : "half the physical RAM", m);
	return true;
}

int zr_options_resolve_backing(struct zr_options *o)
{
	char *real;

	if (!o->backing)
		return -EINVAL;
	real = realpath(o->backing, NULL);
	if (!real)
		return -errno;
	free(o->backing_real);
	o->backing_real = real;
	return 0;
}

void zr_options_free(struct zr_options *o)
{
	char **strs[] = {
		&o->backing, &o->backing_real, &o->mountpoint, &o->size_str, &o->comp_str,
		&o->comp_level_str, &o->cold_comp_str, &o->cold_level_str,
		&o->block_size_str, &o->min_saving_str, &o->policy_str,
		&o->dirty_expire_str, &o->seq_cutoff_str, &o->cache_str,
		&o->high_wm_str, &o->low_wm_str, &o->max_fds_str, &o->read_ahead_str, &o->max_read_str, &o->cpu_latency_str,
		&o->busy_poll_str, &o->xattr_str, &o->uring_str, &o->stream_direct_str,
		&o->acl_str,
	};

	for (size_t i = 0; i < ZR_ARRAY_SIZE(strs); i++) {
		free(*strs[i]);
		*strs[i] = NULL;
	}
}

void zr_options_help(const char *prog)
{
	printf("usage: %s [options] BACKING MOUNTPOINT\n"
	       "       %s [options] DIR          (mount over DIR itself)\n"
	       "\n"
	       "File contents are kept compressed in RAM and written back to BACKING lazily;\n"
	       "names and metadata live in BACKING. See zramfs(8).\n"
	       "\n"
	       "general options:\n"
	       "    -o opt,[opt...]        mount options\n"
	       "    -f                     stay in the foreground\n"
	       "    -d                     debug: print every request (implies -f)\n"
	       "    -s                     single-threaded\n"
	       "    -h, --help             this text\n"
	       "    -V, --version          print the version\n"
	       "\n"
	       "zramfs options (default, unit):\n"
	       "    -o size=SIZE           RAM budget of the compressed tier: bytes with k/m/g/t\n"
	       "                           suffix, or N%% of RAM or of the memory cgroup's limit\n"
	       "                           when lower (default 25%%)\n"
	       "    -o comp=CODEC          codec of hot blocks: lz4|lz4hc|zstd|none (lz4)\n"
	       "    -o comp_level=N        level of comp (lz4 0 = acceleration 1, lz4hc 9, zstd 3)\n"
	       "    -o cold_comp=CODEC     codec cold blocks are recompressed with (zstd)\n"
	       "    -o cold_level=N        level of cold_comp (zstd 3)\n"
	       "    -o block_size=SIZE     block size, power of two 4k..128k (64k)\n"
	       "    -o min_saving=N        bytes (or N%% of a block) a block must save to be kept\n"
	       "                           compressed, else it is stored raw (block/8)\n"
	       "    -o policy=P            what leaves RAM first: adaptive|lru (adaptive)\n"
	       "    -o dirty_expire=TIME   age after which dirty data is written back: ms/s/m/h\n"
	       "                           (30s)\n"
	       "    -o seq_cutoff=SIZE     sequential streams longer than this bypass the tier,\n"
	       "                           0 disables (4m)\n"
	       "    -o stream_direct=on|off  on: a stream the tier keeps no copy of goes to the\n"
	       "                           backing file with O_DIRECT where its filesystem takes\n"
	       "                           it, not cached twice (on)\n"
	       "    -o cache=MODE          writeback|writethrough|none (writeback); none = plain\n"
	       "                           passthrough, no compressed tier\n"
	       "    -o high_wm=PCT         usage of size where background reclaim starts (90)\n"
	       "    -o low_wm=PCT          usage of size where reclaim stops (80)\n"
	       "    -o max_fds=N           backing files kept open at most (4096)\n"
	       "    -o read_ahead=SIZE     kernel read-ahead window of the mount, 4k..64m, a\n"
	       "                           multiple of 4k; 0 keeps the kernel's default of 128k;\n"
	       "                           needs root (1m)\n"
	       "    -o max_read=SIZE       largest read request the kernel sends, 4k..1m, a\n"
	       "                           multiple of 4k: a read-ahead window comes in several,\n"
	       "                           served at once (512k)\n"
	       "    -o cpu_latency=US|off  during bursts of requests (and 0.5 s after), keep idle\n"
	       "                           CPUs in states that wake within US microseconds (PM\n"
	       "                           QoS, /dev/cpu_dma_latency; 0 = poll); needs root (0)\n"
	       "    -o busy_poll=US|off    during bursts of requests, one thread waits for the next\n"
	       "                           by polling /dev/fuse for up to US microseconds (20)\n"
	       "    -o xattr=on|off        off: no extended attributes (getfattr, setfattr and\n"
	       "                           ACLs fail with EOPNOTSUPP), and the kernel stops asking\n"
	       "                           for security.capability before a file's first write\n"
	       "                           and at each chown: two round trips less per file\n"
	       "                           untarred (on)\n"
	       "    -o acl=on|off          on: the kernel enforces POSIX ACLs (setfacl), and new\n"
	       "                           files take their directory's default ACL. off: ACLs\n"
	       "                           are kept, only the mode bits are checked (on where the\n"
	       "                           backing filesystem has ACLs, and not with xattr=off or\n"
	       "                           no_default_permissions)\n"
	       "    -o uring=on|off        on: requests come through io_uring, one queue per CPU,\n"
	       "                           served on the CPU that made them (Linux 6.14 or later,\n"
	       "                           with the fuse module's enable_uring set to Y) (off)\n"
	       "    -o allow_other         let other users in (implies default_permissions)\n"
	       "    -o default_permissions let the kernel check permissions (always on unless\n"
	       "                           no_default_permissions)\n"
	       "    -o no_default_permissions  root daemon, no allow_other/allow_root: the backing\n"
	       "                           filesystem checks, as for root (a GETATTR less per file\n"
	       "                           created; root processes without capabilities pass too)\n"
	       "    -o ro                  mount read-only\n"
	       "\n"
	       "Control and statistics: MOUNTPOINT/%s/{stats,config,control}, zramfsctl(8).\n",
	       prog, prog, ZR_CTL_DIRNAME);
	printf("\nFUSE options:\n");
	fflush(stdout);
	fuse_lowlevel_help();
}
