// SPDX-License-Identifier: GPL-2.0-or-later
/* check_options.c - unit tests of zramfs option parsing (src/options.c). */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "zr_util.h"

/* Parse "zramfs" followed by the NULL-terminated words; @return the rc. */
static int parse(struct zr_options *o, char *err, size_t errlen, ...)
{
	char *argv[32];
	struct fuse_args fa = FUSE_ARGS_INIT(0, NULL);
	va_list ap;
	int argc = 0, rc;

	argv[argc++] = (char *)"zramfs";
	va_start(ap, errlen);
	while (argc < 31 && (argv[argc] = va_arg(ap, char *)))
		argc++;
	va_end(ap);
	argv[argc] = NULL;
	rc = zr_options_parse(argc, argv, o, &fa, err, errlen);
	if (rc == 0)
		fuse_opt_free_args(&fa);
	return rc;
}

START_TEST(test_defaults)
{
	struct zr_options o;
	char err[512];

	ck_assert_int_eq(parse(&o, err, sizeof(err), "/b", "/m", NULL), 0);
	ck_assert_str_eq(o.backing, "/b");
	ck_assert_str_eq(o.mountpoint, "/m");
	ck_assert_int_eq(o.over_self, 0);
	ck_assert_uint_eq(o.store.budget, zr_ram_bytes() / 4);
	ck_assert_int_eq(o.store.comp, ZR_CODEC_LZ4);
	ck_assert_int_eq(o.store.cold_comp, ZR_CODEC_ZSTD);
	ck_assert_uint_eq(o.store.block_size, 64 * 1024);
	ck_assert_uint_eq(o.store.min_saving, 64 * 1024 / 8);
	ck_assert_int_eq(o.store.policy, ZR_POLICY_ADAPTIVE);
	ck_assert_uint_eq(o.dirty_expire_ms, 30000);
	ck_assert_uint_eq(o.seq_cutoff, 4u << 20);
	ck_assert_int_eq(o.cache, ZR_CACHE_WRITEBACK);
	ck_assert_uint_eq(o.read_ahead, 1024 * 1024);
	ck_assert_uint_eq(o.max_read, 512 * 1024);
	ck_assert_int_eq(o.cpu_latency, 0);
	ck_assert_uint_eq(o.busy_poll, 20);
	ck_assert(o.acl);
	zr_options_free(&o);
}
END_TEST

/* acl is on by default, off where it cannot be, and refused there when
 * asked for */
START_TEST(test_acl)
{
	struct zr_options o;
	char err[512];

	ck_assert_int_eq(parse(&o, err, sizeof(err), "-o", "acl=off", "/b", "/m", NULL), 0);
	ck_assert(!o.acl);
	zr_options_free(&o);
	ck_assert_int_eq(parse(&o, err, sizeof(err), "-o", "xattr=off", "/b", "/m", NULL), 0);
	ck_assert(!o.acl);
	zr_options_free(&o);
	ck_assert_int_eq(parse(&o, err, sizeof(err), "-o", "no_default_permissions", "/b", "/m",
			       NULL), 0);
	ck_assert(!o.acl);
	zr_options_free(&o);
	ck_assert_int_eq(parse(&o, err, sizeof(err), "-o", "acl=on,xattr=off", "/b", "/m", NULL),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "xattr=off"));
	zr_options_free(&o);
	ck_assert_int_eq(parse(&o, err, sizeof(err), "-o", "acl=on,no_default_permissions", "/b",
			       "/m", NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "no_default_permissions"));
	zr_options_free(&o);
}
END_TEST

START_TEST(test_over_self)
{
	struct zr_options o;
	char err[512];

	ck_assert_int_eq(parse(&o, err, sizeof(err), "/dir", NULL), 0);
	ck_assert_str_eq(o.backing, "/dir");
	ck_assert_str_eq(o.mountpoint, "/dir");
	ck_assert_int_eq(o.over_self, 1);
	zr_options_free(&o);
}
END_TEST

/* Parse "-o @opts /b /m" into o and check that @expr equals @want. */
#define ONE(opts, expr, want)							\
	do {									\
		ck_assert_int_eq(parse(&o, err, sizeof(err), "-o", (opts),	\
				       "/b", "/m", NULL), 0);			\
		ck_assert_int_eq((expr), (want));				\
		zr_options_free(&o);						\
	} while (0)

START_TEST(test_values)
{
	struct zr_options o;
	char err[512];

	ck_assert_int_eq(parse(&o, err, sizeof(err), "-o",
			       "size=2g,comp=zstd,comp_level=-3,cold_comp=lz4hc,cold_level=12,"
			       "block_size=16k,min_saving=25%,policy=lru,dirty_expire=500ms,"
			       "seq_cutoff=0,cache=writethrough,high_wm=70,low_wm=50,"
			       "read_ahead=256k,cpu_latency=20,busy_poll=150",
			       "/b", "/m", NULL), 0);
	ck_assert_uint_eq(o.store.budget, 2ull << 30);
	ck_assert_int_eq(o.store.comp, ZR_CODEC_ZSTD);
	ck_assert_int_eq(o.store.comp_level, -3);
	ck_assert_int_eq(o.store.cold_comp, ZR_CODEC_LZ4HC);
	ck_assert_int_eq(o.store.cold_level, 12);
	ck_assert_uint_eq(o.store.block_size, 16384);
	ck_assert_uint_eq(o.store.min_saving, 4096);
	ck_assert_int_eq(o.store.policy, ZR_POLICY_LRU);
	ck_assert_uint_eq(o.dirty_expire_ms, 500);
	ck_assert_uint_eq(o.seq_cutoff, 0);
	ck_assert_int_eq(o.cache, ZR_CACHE_WRITETHROUGH);
	ck_assert_uint_eq(o.store.high_wm, 70);
	ck_assert_uint_eq(o.store.low_wm, 50);
	ck_assert_uint_eq(o.read_ahead, 256 * 1024);
	ck_assert_int_eq(o.cpu_latency, 20);
	ck_assert_uint_eq(o.busy_poll, 150);
	zr_options_free(&o);

	ONE("busy_poll=off", o.busy_poll, 0);
	ONE("busy_poll=0", o.busy_poll, 0);
	ONE("cpu_latency=off", o.cpu_latency, -1);
	ONE("read_ahead=0", o.read_ahead, 0);
	ONE("read_ahead=12k", o.read_ahead, 12288);
	ONE("read_ahead=64m", o.read_ahead, 64ull << 20);
	ONE("max_read=4k", o.max_read, 4096);
	ONE("max_read=1m", o.max_read, 1024 * 1024);
	ONE("allow_root", o.no_default_permissions, 0);
	ONE("allow_root", o.allow_root, 1);
	ONE("no_default_permissions", o.no_default_permissions, 1);
	ONE("size=10%", o.store.budget, zr_ram_bytes() / 10);
}
END_TEST

/* Each bad option is refused with a message naming the option. */
static const struct {
	const char *opt;
	const char *names;
} bad_opts[] = {
	{ "size=abc", "size" },
	{ "size=-1", "size" },
	{ "size=150%", "size" },
	{ "comp=foo", "comp" },
	{ "cold_comp=brotli", "cold_comp" },
	{ "comp=lz4hc,comp_level=99", "'99' for comp_level" },
	{ "comp_level=fast", "'fast' for comp_level" },
	{ "cold_level=23", "'23' for cold_level: zstd accepts" },
	{ "cold_comp=lz4,cold_level=high", "'high' for cold_level: lz4 accepts" },
	{ "block_size=3000", "block_size" },
	{ "block_size=1M", "block_size" },
	{ "block_size=2k", "block_size" },
	{ "policy=xyz", "policy" },
	{ "cache=maybe", "cache" },
	{ "dirty_expire=soon", "dirty_expire" },
	{ "min_saving=200%", "min_saving" },
	{ "min_saving=1M", "min_saving" },
	{ "seq_cutoff=lots", "seq_cutoff" },
	{ "high_wm=50,low_wm=60", "low_wm" },
	{ "high_wm=+90", "high_wm" },
	{ "low_wm= 50", "low_wm" },
	{ "min_saving=12.5%", "min_saving" },
	{ "max_fds=0x100", "max_fds" },
	{ "xattr=maybe", "xattr" },
	{ "acl=yes", "acl" },
	{ "stream_direct=1", "stream_direct" },
	{ "dirty_expire=1e3", "dirty_expire" },
	{ "max_fds=3", "max_fds" },
	{ "read_ahead=1k", "read_ahead" },
	{ "read_ahead=1g", "read_ahead" },
	{ "read_ahead=fast", "read_ahead" },
	{ "read_ahead=5000", "'5000' for read_ahead" },
	{ "read_ahead=6k", "'6k' for read_ahead" },
	{ "max_read=0", "max_read" },
	{ "max_read=6000", "max_read" },
	{ "max_read=2m", "max_read" },
	{ "max_read=big", "max_read" },
	{ "cpu_latency=-1", "cpu_latency" },
	{ "cpu_latency=100001", "cpu_latency" },
	{ "cpu_latency=5%", "cpu_latency" },
	{ "cpu_latency=low", "cpu_latency" },
	{ "busy_poll=-1", "busy_poll" },
	{ "busy_poll=1001", "busy_poll" },
	{ "busy_poll=20%", "busy_poll" },
	{ "busy_poll=fast", "busy_poll" },
	{ "no_default_permissions,allow_other", "with -o allow_other" },
	{ "allow_root,no_default_permissions", "with -o allow_root" },
	{ "no_default_permissions,default_permissions", "with -o default_permissions" },
};

/* -o ro and -o rw: the last one wins, in zramfs's flag and in what goes
 * on to libfuse (which sets the kernel's read-only flag from them, in
 * order); "-o ro,rw" stayed read-only. */
START_TEST(test_ro_rw)
{
	static const struct {
		const char *opts;
		int ro;
	} cases[] = { { "ro", 1 }, { "rw", 0 }, { "ro,rw", 0 }, { "rw,ro", 1 },
		      { "ro,size=1g,rw", 0 } };
	struct zr_options o;
	char err[512];

	for (size_t i = 0; i < ZR_ARRAY_SIZE(cases); i++) {
		char *argv[] = { (char *)"zramfs", (char *)"-o", (char *)cases[i].opts,
				 (char *)"/b", (char *)"/m", NULL };
		struct fuse_args fa = FUSE_ARGS_INIT(0, NULL);
		char all[256] = "";
		const char *ro = NULL, *rw = NULL;

		ck_assert_int_eq(zr_options_parse(5, argv, &o, &fa, err, sizeof(err)), 0);
		ck_assert_msg(o.read_only == cases[i].ro, "-o %s: read_only %d",
			      cases[i].opts, o.read_only);
		/* the last "ro" or "rw" word handed on decides */
		for (int a = 0; a < fa.argc; a++) {
			strncat(all, ",", sizeof(all) - strlen(all) - 1);
			strncat(all, fa.argv[a], sizeof(all) - strlen(all) - 1);
		}
		for (const char *p = all; (p = strstr(p, "ro")) != NULL; p++)
			if ((p[-1] == ',' || p[-1] == 'o') && (p[2] == ',' || !p[2]))
				ro = p;
		for (const char *p = all; (p = strstr(p, "rw")) != NULL; p++)
			if ((p[-1] == ',' || p[-1] == 'o') && (p[2] == ',' || !p[2]))
				rw = p;
		ck_assert_msg(cases[i].ro ? ro && (!rw || rw < ro) : !ro || (rw && ro < rw),
			      "-o %s: libfuse gets '%s'", cases[i].opts, all);
		fuse_opt_free_args(&fa);
		zr_options_free(&o);
	}
}
END_TEST

START_TEST(test_bad)
{
	struct zr_options o;
	char err[512];

	ck_assert_int_eq(parse(&o, err, sizeof(err), "-o", bad_opts[_i].opt,
			       "/b", "/m", NULL), -EINVAL);
	ck_assert_msg(strstr(err, bad_opts[_i].names) != NULL,
		      "message for %s does not name it: %s", bad_opts[_i].opt, err);
	zr_options_free(&o);
}
END_TEST

/* Messages in full, where their wording is the point. */
#define SAYS(opts, want)							\
	do {									\
		ck_assert_int_eq(parse(&o, err, sizeof(err), "-o", (opts),	\
				       "/b", "/m", NULL), -EINVAL);		\
		ck_assert_str_eq(err, (want));					\
		zr_options_free(&o);						\
	} while (0)

START_TEST(test_messages)
{
	struct zr_options o;
	char err[512];

	SAYS("comp=lz4hc,comp_level=99",
	     "invalid value '99' for comp_level: lz4hc accepts 1..12");
	SAYS("cold_comp=none,cold_level=1",
	     "invalid value '1' for cold_level: none accepts 0..0");
	SAYS("read_ahead=5000",
	     "invalid value '5000' for read_ahead: expected bytes from 4k to 64m, a multiple of 4k, with an optional k/m suffix, or 0 for the kernel's default");
	SAYS("high_wm=50",
	     "low_wm (80%, the default) must not be above high_wm (50%)");
	SAYS("low_wm=95",
	     "low_wm (95%) must not be above high_wm (90%, the default)");
	SAYS("high_wm=50,low_wm=60",
	     "low_wm (60%) must not be above high_wm (50%)");
}
END_TEST

/* Whether a budget of @size warns with @ram of RAM and a cgroup @limit. */
static bool size_warns(const char *size, uint64_t ram, uint64_t limit,
		       char *msg, size_t len)
{
	struct zr_options o;
	char opt[64], err[512];
	bool warns;

	snprintf(opt, sizeof(opt), "size=%s", size);
	ck_assert_int_eq(parse(&o, err, sizeof(err), "-o", opt, "/b", "/m", NULL), 0);
	msg[0] = '\0';
	warns = zr_options_size_warning(&o, ram, limit, msg, len);
	zr_options_free(&o);
	return warns;
}

START_TEST(test_size_warning)
{
	const uint64_t G = 1ull << 30, none = UINT64_MAX;
	char msg[512];

	/* half the RAM is fine, more is a warning that says of what */
	ck_assert(!size_warns("4g", 8 * G, none, msg, sizeof(msg)));
	ck_assert(size_warns("5g", 8 * G, none, msg, sizeof(msg)));
	ck_assert_str_eq(msg, "size= 5.0G is more than half the physical RAM (8.0G): with the page cache and the daemon's own memory on top, the OOM killer may end the daemon and lose the data it holds");
	ck_assert(size_warns("9g", 8 * G, none, msg, sizeof(msg)));
	ck_assert_ptr_nonnull(strstr(msg, "size= 9.0G is more than the physical RAM (8.0G):"));
	/* a cgroup limit above the RAM: the RAM is what counts */
	ck_assert(size_warns("5g", 8 * G, 16 * G, msg, sizeof(msg)));
	ck_assert_ptr_nonnull(strstr(msg, "more than half the physical RAM (8.0G)"));
	/* a cgroup limit below it: the limit, worded as before */
	ck_assert(!size_warns("2g", 8 * G, 4 * G, msg, sizeof(msg)));
	ck_assert(size_warns("3g", 8 * G, 4 * G, msg, sizeof(msg)));
	ck_assert_ptr_nonnull(strstr(msg, "size= 3.0G is more than half the memory limit of this cgroup (4.0G):"));
	/* RAM unknown: only a limit can warn */
	ck_assert(!size_warns("100g", 0, none, msg, sizeof(msg)));
	ck_assert(size_warns("3g", 0, 4 * G, msg, sizeof(msg)));
	/* the default, 25% of the RAM or of the limit, never warns */
	ck_assert(!size_warns("25%", zr_phys_ram_bytes(), zr_mem_limit(), msg, sizeof(msg)));
	ck_assert_str_eq(msg, "");
}
END_TEST

/* The backing directory is resolved once: absolute, through symlinks,
 * without the slashes typed after it; the typed form stays for messages. */
START_TEST(test_resolve_backing)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char base[PATH_MAX], real[PATH_MAX], want[PATH_MAX + 8], err[512];
	struct zr_options o;

	snprintf(base, sizeof(base), "%s/zr-check-options-XXXXXX", tmp);
	ck_assert_ptr_nonnull(mkdtemp(base));
	ck_assert_ptr_nonnull(realpath(base, real));
	snprintf(want, sizeof(want), "%s/dir", real);
	ck_assert_int_eq(chdir(base), 0);
	ck_assert_int_eq(mkdir("dir", 0700), 0);
	ck_assert_int_eq(symlink("dir", "link"), 0);

	ck_assert_int_eq(parse(&o, err, sizeof(err), "dir//", "/m", NULL), 0);
	ck_assert_ptr_null(o.backing_real);
	ck_assert_int_eq(zr_options_resolve_backing(&o), 0);
	ck_assert_str_eq(o.backing_real, want);
	ck_assert_str_eq(o.backing, "dir//");
	zr_options_free(&o);
	ck_assert_ptr_null(o.backing_real);

	ck_assert_int_eq(parse(&o, err, sizeof(err), "./link/../dir/.", NULL), 0);
	ck_assert_int_eq(zr_options_resolve_backing(&o), 0);
	ck_assert_str_eq(o.backing_real, want);
	zr_options_free(&o);

	ck_assert_int_eq(parse(&o, err, sizeof(err), "link/", "/m", NULL), 0);
	ck_assert_int_eq(zr_options_resolve_backing(&o), 0);
	ck_assert_str_eq(o.backing_real, want);
	zr_options_free(&o);

	ck_assert_int_eq(parse(&o, err, sizeof(err), "missing", "/m", NULL), 0);
	ck_assert_int_eq(zr_options_resolve_backing(&o), -ENOENT);
	ck_assert_ptr_null(o.backing_real);
	zr_options_free(&o);

	ck_assert_int_eq(unlink("link"), 0);
	ck_assert_int_eq(rmdir("dir"), 0);
	ck_assert_int_eq(chdir("/"), 0);
	ck_assert_int_eq(rmdir(base), 0);
}
END_TEST

START_TEST(test_usage_errors)
{
	struct zr_options o;
	char err[512];

	ck_assert_int_eq(parse(&o, err, sizeof(err), NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "MOUNTPOINT"));
	zr_options_free(&o);
	ck_assert_int_eq(parse(&o, err, sizeof(err), "/a", "/b", "/c", NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "too many"));
	zr_options_free(&o);
}
END_TEST

START_TEST(test_parse_size)
{
	uint64_t v;

	ck_assert_int_eq(zr_parse_size("123", 0, &v), 0);
	ck_assert_uint_eq(v, 123);
	ck_assert_int_eq(zr_parse_size("64k", 0, &v), 0);
	ck_assert_uint_eq(v, 65536);
	ck_assert_int_eq(zr_parse_size("1.5G", 0, &v), 0);
	ck_assert_uint_eq(v, 3ull << 29);
	ck_assert_int_eq(zr_parse_size("2MiB", 0, &v), 0);
	ck_assert_uint_eq(v, 2u << 20);
	ck_assert_int_eq(zr_parse_size("50%", 1000, &v), 0);
	ck_assert_uint_eq(v, 500);
	ck_assert_int_eq(zr_parse_size("", 0, &v), -EINVAL);
	ck_assert_int_eq(zr_parse_size("12q", 0, &v), -EINVAL);
	ck_assert_int_eq(zr_parse_size("-5", 0, &v), -EINVAL);
	ck_assert_int_eq(zr_parse_size("99999999999t", 0, &v), -ERANGE);
	/* no fraction of a byte (read_ahead=4096.5 was taken as 4096) */
	ck_assert_int_eq(zr_parse_size("4096.5", 0, &v), -EINVAL);
	ck_assert_int_eq(zr_parse_size("4096.0", 0, &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(zr_parse_duration_ms("2m", &v), 0);
	ck_assert_uint_eq(v, 120000);
	ck_assert_int_eq(zr_parse_duration_ms("30", &v), 0);
	ck_assert_uint_eq(v, 30000);
	ck_assert_int_eq(zr_parse_duration_ms("7 days", &v), -EINVAL);
	ck_assert_int_eq(zr_parse_duration_ms(".5", &v), 0);
	ck_assert_uint_eq(v, 500);
	ck_assert_int_eq(zr_parse_duration_ms("1.5m", &v), 0);
	ck_assert_uint_eq(v, 90000);
	/* plain decimals only: what strtold() would also take is refused */
	ck_assert_int_eq(zr_parse_duration_ms("0x10", &v), -EINVAL);
	ck_assert_int_eq(zr_parse_duration_ms("1e3", &v), -EINVAL);
	ck_assert_int_eq(zr_parse_duration_ms(" 5", &v), -EINVAL);
	ck_assert_int_eq(zr_parse_duration_ms("+5", &v), -EINVAL);
	ck_assert_int_eq(zr_parse_duration_ms(".", &v), -EINVAL);
	ck_assert_int_eq(zr_parse_duration_ms("1..5", &v), -EINVAL);
	ck_assert_int_eq(zr_parse_size("0x10k", 0, &v), -EINVAL);
	ck_assert_int_eq(zr_parse_size("1e3", 0, &v), -EINVAL);
	ck_assert_int_eq(zr_parse_size("infk", 0, &v), -EINVAL);
	ck_assert_int_eq(zr_parse_size("5.k", 0, &v), 0);
	ck_assert_uint_eq(v, 5120);
}
END_TEST

/* zr_deadline(): a monotonic deadline carries nanoseconds into seconds. */
START_TEST(test_deadline)
{
	struct timespec before, ts, after;
	uint64_t ns[] = { 0, 1, 999999999ull, 1000000000ull, 1500000000ull, 3999999999ull };

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		uint64_t lo, t, hi;

		clock_gettime(CLOCK_MONOTONIC, &before);
		zr_deadline(&ts, CLOCK_MONOTONIC, ns[i]);
		clock_gettime(CLOCK_MONOTONIC, &after);
		ck_assert_int_ge(ts.tv_nsec, 0);
		ck_assert_int_lt(ts.tv_nsec, 1000000000L);
		lo = (uint64_t)before.tv_sec * 1000000000ull + (uint64_t)before.tv_nsec + ns[i];
		t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		hi = (uint64_t)after.tv_sec * 1000000000ull + (uint64_t)after.tv_nsec + ns[i];
		ck_assert_uint_ge(t, lo);
		ck_assert_uint_le(t, hi);
	}
}
END_TEST

/* zr_proc_stat_cpu() and zr_cpu_ticks() on a /proc/stat of three CPUs: the
 * cpu line is not a CPU's, a line that does not parse is skipped, and only
 * the look's CPUs count. */
START_TEST(test_cpu_ticks)
{
	static const char text[] =
		"cpu  1000 800 300 5000 70 0 10 0 0 0\n"
		"cpu0 100 400 100 2000 30 0 5 0 0 0\n"
		"cpu1 bad line\n"
		"cpu1 400 0 100 1500 40 0 5 7 0 0\n"
		"cpu2 500 400 100 1500 0 0 0 0 0 0\n"
		"intr 12345\n";
	char path[] = "/tmp/check_options.stat.XXXXXX";
	uint64_t idle, total;
	struct zr_cpu_look l;
	const char *p;
	unsigned cpu;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
	p = zr_proc_stat_cpu(text, &cpu, &idle, &total);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(cpu, 0);
	ck_assert_uint_eq(idle, 2030);	/* idle and I/O wait */
	ck_assert_uint_eq(total, 2635);	/* the first eight fields */
	p = zr_proc_stat_cpu(p, &cpu, &idle, &total);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(cpu, 1);
	ck_assert_uint_eq(idle, 1540);
	ck_assert_uint_eq(total, 2052);

	memset(&l, 0, sizeof(l));
	l.fd = fd;
	l.len = 4096;
	l.buf = malloc(l.len);
	ck_assert_ptr_nonnull(l.buf);
	CPU_ZERO(&l.cpus);
	CPU_SET(0, &l.cpus);
	CPU_SET(2, &l.cpus);
	ck_assert_int_eq(zr_cpu_ticks(&l, &idle, &total), 0);
	ck_assert_uint_eq(idle, 2030 + 1500);
	ck_assert_uint_eq(total, 2635 + 2500);
	CPU_ZERO(&l.cpus);
	CPU_SET(3, &l.cpus);	/* none of its CPUs in the file */
	ck_assert_int_eq(zr_cpu_ticks(&l, &idle, &total), -1);
	zr_cpu_look_close(&l);
}
END_TEST

START_TEST(test_unescape_octal)
{
	char a[] = "/mnt/with\\040space\\011tab";
	char b[] = "/odd\\9x\\";

	zr_unescape_octal(a);
	ck_assert_str_eq(a, "/mnt/with space\ttab");
	zr_unescape_octal(b);	/* not escapes: left as they are */
	ck_assert_str_eq(b, "/odd\\9x\\");
}
END_TEST

static Suite *options_suite(void)
{
	Suite *s = suite_create("options");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_acl);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_over_self);
	tcase_add_test(tc, test_values);
	tcase_add_test(tc, test_ro_rw);
	tcase_add_loop_test(tc, test_bad, 0, (int)ZR_ARRAY_SIZE(bad_opts));
	tcase_add_test(tc, test_messages);
	tcase_add_test(tc, test_size_warning);
	tcase_add_test(tc, test_resolve_backing);
	tcase_add_test(tc, test_usage_errors);
	tcase_add_test(tc, test_parse_size);
	tcase_add_test(tc, test_unescape_octal);
	tcase_add_test(tc, test_deadline);
	tcase_add_test(tc, test_cpu_ticks);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(options_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
