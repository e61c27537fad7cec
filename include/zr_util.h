/* SPDX-License-Identifier: GPL-2.0-or-later */
/* zr_util.h - small helpers shared by the engine and the daemon. */
#ifndef ZR_UTIL_H
#define ZR_UTIL_H

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define ZR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ZR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ZR_MAX(a, b) ((a) > (b) ? (a) : (b))
#define ZR_UNUSED __attribute__((unused))
#define ZR_LIKELY(x) __builtin_expect(!!(x), 1)
#define ZR_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Relaxed atomic counters: statistics are read without any lock. */
#define zr_stat_add(p, v) __atomic_add_fetch((p), (v), __ATOMIC_RELAXED)
#define zr_stat_sub(p, v) __atomic_sub_fetch((p), (v), __ATOMIC_RELAXED)
#define zr_stat_read(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define zr_stat_set(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

/** Monotonic clock in milliseconds. */
uint64_t zr_now_ms(void);

/** Monotonic clock in nanoseconds. */
uint64_t zr_now_ns(void);

/** Whether the running kernel's release is @major.@minor or later (false
 * when uname() fails or its release does not parse). */
bool zr_kernel_at_least(int major, int minor);

/* Store @now (zr_now_ms()) in @at, a relaxed atomic, unless it holds it
 * already: at most one store a millisecond to a line threads on every core
 * read and write. */
static inline void zr_note_ms(uint64_t *at, uint64_t now)
{
	if (__atomic_load_n(at, __ATOMIC_RELAXED) != now)
		__atomic_store_n(at, now, __ATOMIC_RELAXED);
}

/**
 * zr_deadline() - set @ts to @ns nanoseconds from now on clock @clk (the
 * clock of the condition variable it is for), for
 * pthread_cond_timedwait().
 */
void zr_deadline(struct timespec *ts, clockid_t clk, uint64_t ns);

/**
 * zr_cond_init_monotonic() - initialize @cond to time its waits on
 * CLOCK_MONOTONIC (deadlines from zr_deadline(..., CLOCK_MONOTONIC, ...)),
 * which a change of the wall clock does not move.
 */
void zr_cond_init_monotonic(pthread_cond_t *cond);

/**
 * zr_parse_size() - parse "123", "64k", "1.5G", "25%" (of @ram_bytes) into
 * bytes. Suffixes k, m, g, t (powers of 1024), case-insensitive, optional
 * trailing "b"/"iB". A fraction is taken with a suffix (rounded down to a
 * byte), not without ("4096.5").
 * @return 0, or -EINVAL when @s is not such a number, -ERANGE on overflow.
 */
int zr_parse_size(const char *s, uint64_t ram_bytes, uint64_t *out);

/**
 * zr_parse_duration_ms() - parse "30", "30s", "500ms", "2m" into
 * milliseconds (a bare number is seconds).
 * @return 0 or -EINVAL/-ERANGE.
 */
int zr_parse_duration_ms(const char *s, uint64_t *out);

/** The CPUs this process may run on (a taskset or cpuset it was started
 * under holds) into @set: all of them if they cannot be read.
 * @return how many, at least 1. */
unsigned zr_daemon_cpus(cpu_set_t *set);
const char *zr_proc_stat_cpu(const char *p, unsigned *cpu, uint64_t *idle, uint64_t *total);

/**
 * struct zr_cpu_look - what zr_cpu_ticks() reads /proc/stat with: the open
 * file, room for its text, and the CPUs whose lines it sums (those the
 * daemon may run on). Its user says which lock or thread owns it.
 */
struct zr_cpu_look {
	int fd;			/* /proc/stat; -1: not open */
	char *buf;		/* what is read of it */
	size_t len;		/* buf's size */
	cpu_set_t cpus;
};

/** Open /proc/stat into @l for zr_cpu_ticks() over @cpus.
 * @return 0, or -errno with l->fd -1 and nothing held. */
int zr_cpu_look_open(struct zr_cpu_look *l, const cpu_set_t *cpus);

/** Give back what zr_cpu_look_open() took (nothing after it failed). */
void zr_cpu_look_close(struct zr_cpu_look *l);

/** The idle (and I/O wait) ticks and all ticks, summed over l->cpus.
 * @return 0, or -1 if the file cannot be read or shows none of them. */
int zr_cpu_ticks(struct zr_cpu_look *l, uint64_t *idle, uint64_t *total);

/** Physical RAM of the machine in bytes (MemTotal, from sysconf), whatever
 * the cgroup's limit. 0 if unknown. */
uint64_t zr_phys_ram_bytes(void);

/** RAM this process may use, in bytes: physical RAM (sysconf), or the
 * memory limit of its cgroup when lower. 0 if unknown. */
uint64_t zr_ram_bytes(void);

/** The memory limit of this process's cgroup and its parents (v1 or v2),
 * in bytes; UINT64_MAX when there is none or it cannot be read. */
uint64_t zr_mem_limit(void);

/**
 * zr_mem_headroom() - memory that can still be used before the OOM killer
 * acts: the lowest of the system's MemAvailable and, for each limited
 * memory cgroup from this process's up, its limit less what it uses that
 * reclaim cannot take back (its usage less its page cache). *@scale gets
 * what that headroom is a share of (RAM, or that cgroup's limit).
 * @return 0, or -ENOENT when none of it can be read.
 */
int zr_mem_headroom(uint64_t *headroom, uint64_t *scale);

/** Format @bytes as "1.5G" style into @buf (size @len). @return @buf. */
char *zr_human_size(uint64_t bytes, char *buf, size_t len);

/** Decode the octal escapes of a mountinfo field (\040 for a space) in place. */
void zr_unescape_octal(char *s);

/* Logging: to stderr, or syslog once zr_log_use_syslog() was called. */
enum zr_log_level { ZR_LOG_ERR = 3, ZR_LOG_WARNING = 4, ZR_LOG_INFO = 6, ZR_LOG_DEBUG = 7 };
void zr_log_use_syslog(const char *ident);
void zr_log_set_level(enum zr_log_level level);
void zr_log(enum zr_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* ZR_UTIL_H */
