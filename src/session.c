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
 *    set-user-ID bit, and the set-group-ID bit when group-executable (or
 *    the caller is outside the file's group; for a chown, one without
 *    CAP_FSETID);
 *  - the first write to a file that carries security.capability removes it
 *    (data.c, zr_inode.has_caps).
 * The flag is added to the INIT reply only when the kernel offered it.
 *
 * Once the INIT reply is written, the mount's read-ahead window is set
 * (set_read_ahead()), as the kernel would otherwise clamp it to 128 KiB.
 *
 * Every request read is noted for the CPU latency request (cpulat.c) and,
 * as the time of the last request, for idle recompression (data.c)
 * (zr_session_note_request(), which uring.c's rings call too). With
 * uring=on the INIT reply may ask for FUSE over io_uring (want_uring()),
 * and the writev hook hands replies to requests that came through a ring
 * to uring.c.
 *
 * Busy polling (busy_poll=US). A request whose daemon thread sleeps in
 * read(2) costs two wake-ups: the daemon's, then the caller's. With
 * busy_poll on, the session fd is non-blocking and one thread at a time,
 * the leader, reads it; the others park on a condition variable (were they
 * asleep in read(2), the kernel would wake one of them for every request,
 * only for it to find the request taken).
 *  - During a burst of requests (cpulat.c decides), the leader reads in a
 *    loop for up to busy_poll µs, as long as the CPUs have time to spare
 *    (spin_allowed()), then waits in poll(2). Otherwise it waits in a
 *    read(2) made blocking (set_blocking()), one system call a request
 *    instead of three, or in poll(2) while its buffer is due back soon.
 *  - Outside a burst, the leader hands its role to a parked thread as soon
 *    as it has a request, and serves the request meanwhile: requests are
 *    served in parallel, as libfuse's threads do on their own.
 *  - In a burst, the leader serves the request itself and comes back to
 *    read the next one, with nobody to wake on the way, unless the request
 *    moves data or may wait on the disk or on other requests (hands_off());
 *    then it hands the role on first. A READ that finds its block missing
 *    from the tier hands it on before its pread (zr_session_blocking()).
 *  - While the leader serves a request in its turn, throughout a burst,
 *    and while large READs are served (below), one parked thread, the
 *    watchdog, wakes every ZR_LEAD_CHECK_NS (ZR_LEAD_BULK_NS for large
 *    READs); when the leader has been busy with one request for longer
 *    than that, the watchdog takes the role over (a handler that waits on
 *    another request, as lseek's does, relies on this as well as on
 *    hands_off()).
 *    The old leader parks when it is done.
 *  - A parked thread waits on a condition variable of its own, on a stack:
 *    the role goes to the thread that parked last, whose buffers are the
 *    likeliest to be in the CPU's caches (the one condition variable all
 *    shared woke them in turn, 29 threads over one cold read of 512 MiB).
 *  - A READ of ZR_TRIM_MIN or more is CPU work, decompression and the
 *    kernel's copy into the page cache. Its leader hands the role on only
 *    while fewer threads than CPUs serve such READs. Otherwise it serves
 *    the READ in its turn, and the first thread to come back from a request
 *    takes the role over at once: it reads the next request without waking
 *    anybody (a successor woken then ran on the CPU of the thread that woke
 *    it, behind it, while the reader's CPU sat idle). The watchdog, kept
 *    while such READs are served, bounds the wait if none comes back; one
 *    that must wait on the disk hands the role on (zr_session_blocking()).
 *    512 MiB held in the tier, read cold with `dd bs=1M` on a 2-vCPU Xeon
 *    guest: 1.25 GB/s with one condition variable, 1.54 with the stack and
 *    the READs served in turn (medians of 12 reads each, interleaved).
 * With the backing directory on tmpfs this took a round trip from about
 * 9.4 to 7.0 µs, and an untar of 10,000 files from 1.8 to 1.5 s
 * (docs/DESIGN-NOTES.md).
 *
 * Idle threads give their buffer back. Each libfuse worker reads requests
 * into a buffer of its own, max_write plus a page (1 MiB), and up to 32
 * workers stay: after a burst of large writes that is 33 MB of RSS that
 * holds nothing. A thread whose buffer took ZR_TRIM_MIN or more since it
 * last gave it back madvise(MADV_DONTNEED)s the buffer's pages (the next
 * request faults in what it fills) ZR_TRIM_IDLE_MS after the last request
 * that filled that much of it ended: its waits for a request (parked, or in
 * poll(2)) end at that time. Small requests do not hold the trim off, its
 * own or others': with a stats read every 0.2 s, leaders that took turns
 * kept 2-14 MiB of read buffers after six readers. Only the thread that
 * owns a buffer trims it, and only while it is not in read(2), so no
 * request can land in pages being given back. The same goes for the
 * thread's reply buffer (zr_session_reply_buf()): a READ is answered from a
 * mapping each thread keeps, not from malloc(), whose 1 MiB chunks stayed
 * in glibc's per-thread arenas after the reads (20-23 MiB of RSS outside
 * the tier after six readers, 3 now). With busy_poll=off
 * every thread sleeps in a blocking read(2) and nothing is given back (a
 * poll(2) with a time limit before it would wake them all at each request).
 *
 * Locking: park_lock protects leader, lead_gen, the stack of parked
 * threads and watcher; a thread leads while its my_gen equals lead_gen
 * (my_gen is per thread, lead_gen and watcher are also read as atomics
 * without the lock). lead_since (with lead_bulk) is written under
 * park_lock, by the leader only (my_gen == lead_gen) and by take_lead(),
 * and read under it by parking threads, so that a thread taking the role
 * acts on a time still current (atomics all the same). n_bulk is a relaxed
 * atomic counter. poll_fd
 * and n_cpus are set before the session loop starts. spin_lock protects
 * the look at the CPUs (spin_look(); its fields say more).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "zr_util.h"

/* How often the watchdog looks, and how long the leader may be busy with
 * one request before the watchdog takes its role over (ns). */
#define ZR_LEAD_CHECK_NS 1000000ull

/* The same while large READs are served: one of 512 KiB takes 0.5 ms on a
 * CPU of its own and twice that on a shared one, and a READ that will wait
 * on the disk hands the role on itself (zr_session_blocking()). */
#define ZR_LEAD_BULK_NS 4000000ull

static int poll_fd = -1;	/* the session fd; -1: busy_poll off */
static int poll_fl;		/* its status flags with O_NONBLOCK; set with poll_fd */
static pthread_mutex_t block_lock = PTHREAD_MUTEX_INITIALIZER;
static bool poll_blocking;	/* block_lock (relaxed atomic reads): poll_fd's
				 * O_NONBLOCK is off (set_blocking()) */
static uint64_t n_sleeps;	/* relaxed atomic: poll(2)s the leader slept in */
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static bool leader;		/* park_lock: a thread leads */
static uint64_t lead_gen;	/* park_lock (atomic reads): bumped for each new leader */

/* A thread waiting in park(): on the stack of parked threads, or the
 * watchdog. */
struct zr_parker {
	pthread_cond_t cond;	/* on park_lock, CLOCK_MONOTONIC */
	struct zr_parker *up, *down;	/* park_lock: neighbours on the stack */
	bool stacked;		/* park_lock: on the stack */
	bool idled;		/* owner only: gave its buffers back in this park() */
	bool fresh;		/* owner only: came to park() from a request, not
				 * woken yet */
	bool watched;		/* owner only: was the watchdog in this park() */
	bool ready;		/* cond is set up (owner only) */
};
static __thread struct zr_parker me;
static struct zr_parker *park_top;	/* park_lock: parked last, woken first */
static struct zr_parker *park_bottom;	/* park_lock: parked first */
static struct zr_parker *watcher;	/* park_lock (atomic reads): the parked
					 * thread that wakes now and then to
					 * check (the watchdog); NULL none */
static uint64_t lead_since;	/* park_lock (atomic too): when the leader took
				 * the request it serves in its turn (ns); 0
				 * while it waits for one */
static unsigned n_cpus = 1;	/* CPUs the daemon may run on; set by zr_session_hook() */
static unsigned n_bulk;		/* relaxed atomic: threads serving a large READ
				 * that have not said they wait (my_bulk) */
static bool lead_bulk;		/* park_lock (atomic too): the leader's request
				 * in its turn is a large READ (valid with
				 * lead_since) */
static __thread bool my_bulk;	/* this thread counts in n_bulk */
static __thread uint64_t my_gen;	/* the lead_gen this thread leads in; 0 none */
static __thread bool in_turn;	/* serving a request in the leader's turn */
static __thread uint64_t my_since;	/* the lead_since this thread set for its
					 * turn; 0 none */
static uint64_t n_leads;	/* relaxed atomic: requests served in the leader's turn */
static uint64_t n_takeovers;	/* relaxed atomic: times the watchdog took over */

/*
 * Whether the CPUs have time to spare for the leader's polling loop (see
 * spin_allowed()). spin_cpu and spin_hz are set before
 * the session loop starts. The look's counters are written by the thread
 * that looks, under spin_lock (taken with trylock: a leader that finds it
 * taken does not wait); spin_look_ms and spin_busy are also read as relaxed
 * atomics without it.
 */
#define ZR_SPIN_LOOK_MS 100
#define ZR_SPIN_STOP_PCT 20	/* polling stops below this share of spare time, */
#define ZR_SPIN_RESUME_PCT 30	/* and starts again at this one */
#define ZR_SPIN_CREDIT_PCT 10	/* the loop's own time counts as spare up to this */
static struct zr_cpu_look spin_cpu = { .fd = -1 };	/* fd -1: poll without looking */
static long spin_hz = 100;	/* /proc/stat's unit: ticks a second (USER_HZ) */
static pthread_mutex_t spin_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t spin_look_ms;	/* spin_lock: zr_now_ms() of the last look */
static bool spin_busy;		/* spin_lock: the CPUs have no time to spare */
static uint64_t spin_idle0, spin_total0, spin_ns0;	/* spin_lock: at the last look */
static uint64_t spin_ns;	/* relaxed atomic: time the leader read in a loop */
static uint64_t n_spin_stops;	/* relaxed atomic: looks that stopped the polling */

/*
 * Which threads serve a request read from /dev/fuse and have not come back
 * to read the next one (zr_session_drained()): one slot each, written only
 * by its thread (a line of its own: no shared counter on the hot path),
 * taken at its first read. Threads past the slots count in serving_extra
 * (relaxed atomic).
 */
#define ZR_SERVING_SLOTS 64
static struct {
	bool on;	/* atomic: release store, acquire load */
} __attribute__((aligned(64))) serving_slot[ZR_SERVING_SLOTS];
static unsigned n_serving_slots;	/* relaxed atomic: slots taken, and tries
					 * past the last one */
static unsigned serving_extra;
static __thread int my_slot = -1;	/* -2: none left, count in serving_extra */
static __thread bool serving;	/* this thread serves a request */

/* Say whether this thread serves a request (zr_io_read()). */
static void set_serving(bool on)
{
	serving = on;
	if (my_slot == -1) {
		unsigned i = __atomic_fetch_add(&n_serving_slots, 1, __ATOMIC_RELAXED);

		my_slot = i < ZR_SERVING_SLOTS ? (int)i : -2;
	}
	if (my_slot >= 0)
		__atomic_store_n(&serving_slot[my_slot].on, on, __ATOMIC_RELEASE);
	else if (on)
		__atomic_add_fetch(&serving_extra, 1, __ATOMIC_RELAXED);
	else
		__atomic_sub_fetch(&serving_extra, 1, __ATOMIC_RELAXED);
}

static __thread char *rbuf;	/* this thread's request buffer (libfuse's) */
static __thread size_t rbuf_len;	/* its length */
static __thread size_t rbuf_used;	/* most of it a request filled since the last trim */
static __thread uint64_t big_last_ms;	/* zr_now_ms() when the last request that
					 * filled ZR_TRIM_MIN of a buffer ended */
static __thread bool big_now;	/* the request being served filled that much */
static uint64_t n_trims;	/* relaxed atomic: buffers given back */

/* This thread's reply buffer (zr_session_reply_buf); obuf_key's value is
 * &obuf once mapped, so that the mapping goes when the thread ends. */
struct zr_obuf {
	char *p;	/* an anonymous mapping of len bytes; NULL none */
	size_t len;
	size_t used;	/* most of it handed out since the last trim */
};
static __thread struct zr_obuf obuf;
static pthread_key_t obuf_key;
static pthread_once_t obuf_once = PTHREAD_ONCE_INIT;
static bool obuf_keyed;	/* obuf_once: obuf_key exists */

static uint64_t init_unique;	/* unique of the INIT request; 0 once answered */
static uint32_t init_flags_in;	/* what the kernel offered */
static uint32_t init_flags2_in;	/* and the high 32 bits of it */

/* FUSE_OVER_IO_URING (1ULL << 41, FUSE 7.42) in flags2; Debian 12's
 * headers predate it. */
#define ZR_FUSE_OVER_IO_URING2 (1u << 9)

/*
 * Whether process @pid (with primary group @pgid) is in group @gid: its
 * supplementary groups are read from /proc, as libfuse does.
 */
static bool pid_in_group(uint32_t pid, uint32_t pgid, gid_t gid)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	bool found = false;
	FILE *f;

	if (pgid == gid)
		return true;
	snprintf(path, sizeof(path), "/proc/%u/task/%u/status", pid, pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	/* (getline: the Groups line of a process in hundreds of groups is
	 * longer than any fixed buffer would be; one cut short missed the
	 * groups past it, and split a number in two) */
	while (!found && getline(&line, &cap, f) > 0) {
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
	free(line);
	fclose(f);
	return found;
}

/* CAP_FSETID's bit (linux/capability.h) */
#define ZR_CAP_FSETID 4

/*
 * Whether thread @pid has CAP_FSETID in its effective set, read from /proc
 * (false if it cannot be read).
 */
static bool pid_has_fsetid(uint32_t pid)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	bool has = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/task/%u/status", pid, pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (getline(&line, &cap, f) > 0) {
		if (strncmp(line, "CapEff:", 7) == 0) {
			has = (strtoull(line + 7, NULL, 16) >> ZR_CAP_FSETID) & 1;
			break;
		}
	}
	free(line);
	fclose(f);
	return has;
}

/*
 * Clear set-id bits of node @nodeid the way the kernel would for a write by
 * the caller in @in (or for a chown, @chown): set-user-ID always;
 * set-group-ID when the file is group-executable, or when the caller is
 * not in the file's group.  The kernel asks for a write, a truncate or an
 * open with O_TRUNC only when the caller lacks CAP_FSETID, but for every
 * chown: there a caller with CAP_FSETID outside the file's group keeps
 * set-group-ID (setattr_should_drop_sgid(); a chgrp by root cleared it).
 */
static void kill_suidgid(struct zr_fs *fs, const struct fuse_in_header *in, bool chown)
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
		    ((mode & S_IXGRP) ||
		     (!pid_in_group(in->pid, in->gid, st.st_gid) &&
		      !(chown && pid_has_fsetid(in->pid)))))
			mode &= ~(mode_t)S_ISGID;
		if (mode != (st.st_mode & 07777))
			(void)fchmod(fd, mode);
	}
	zr_fd_put(fs, ino);
}

/*
 * Whether the leader hands its role on before serving the request in @buf
 * (@n bytes), even in a burst: requests that move data (a WRITE of 64 KiB
 * or more; large READs are bulk_read()'s) or may wait on the disk or on
 * other requests (fsync, fallocate, copy_file_range, lseek, truncate,
 * destroy).
 */
static bool hands_off(const void *buf, ssize_t n)
{
	const struct fuse_in_header *in = buf;
	size_t body = (size_t)n - sizeof(*in);

	switch (in->opcode) {
	case FUSE_WRITE:
		return body >= sizeof(struct fuse_write_in) &&
		       ((const struct fuse_write_in *)(in + 1))->size >= ZR_TRIM_MIN;
	case FUSE_SETATTR:
		return body >= sizeof(struct fuse_setattr_in) &&
		       (((const struct fuse_setattr_in *)(in + 1))->valid & FATTR_SIZE);
	case FUSE_FSYNC:
	case FUSE_FSYNCDIR:
	case FUSE_FALLOCATE:
	case FUSE_COPY_FILE_RANGE:
	case FUSE_LSEEK:
	case FUSE_DESTROY:
		return true;
	default:
		return false;
	}
}

/* Whether this thread's buffer holds enough pages to give back when idle. */
static bool trim_wanted(void)
{
	return rbuf_used >= ZR_TRIM_MIN || obuf.used >= ZR_TRIM_MIN;
}

/* madvise(MADV_DONTNEED) the whole pages of [@p, @p + @len); @return
 * whether any went back. */
static bool drop_pages(char *p, size_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t e = ((uintptr_t)p + len) & ~(page - 1);

	return e > a && madvise((void *)a, e - a, MADV_DONTNEED) == 0;
}

/* Give the pages of this thread's request and reply buffers back; they read
 * as zeros until used again. Caller is not in read(2) on them. */
static void trim_buffer(void)
{
	bool gave = false;

	if (rbuf_used >= ZR_TRIM_MIN)
		gave = drop_pages(rbuf, rbuf_len);
	if (obuf.used >= ZR_TRIM_MIN)
		gave = drop_pages(obuf.p, obuf.len) || gave;
	if (gave)
		__atomic_add_fetch(&n_trims, 1, __ATOMIC_RELAXED);
	rbuf_used = 0;
	obuf.used = 0;
}

static void obuf_unmap(void *arg)
{
	struct zr_obuf *b = arg;

	munmap(b->p, b->len);
	b->p = NULL;
	b->len = 0;
}

static void obuf_key_init(void)
{
	obuf_keyed = pthread_key_create(&obuf_key, obuf_unmap) == 0;
}

/**
 * zr_session_reply_buf() - a buffer for the reply this thread is building.
 * @size: bytes needed.
 *
 * The buffer is this thread's until its next call; a later call may move
 * it. Its pages go back when the thread is idle (see the top of the file).
 * @return the buffer, or NULL when it cannot be mapped (ENOMEM).
 */
void *zr_session_reply_buf(size_t size)
{
	size_t page, len;
	void *p;

	p = zr_uring_reply_buf(size);
	if (p)
		return p;
	if (size > obuf.len) {
		page = (size_t)sysconf(_SC_PAGESIZE);	/* only when it grows */
		pthread_once(&obuf_once, obuf_key_init);
		if (!obuf_keyed)
			return NULL;
		len = size < 128 * 1024 ? 128 * 1024 : (size + page - 1) & ~(page - 1);
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		if (obuf.p)
			munmap(obuf.p, obuf.len);
		obuf.p = p;
		obuf.len = len;
		pthread_setspecific(obuf_key, &obuf);
	}
	if (size > obuf.used)
		obuf.used = size;
	if (size >= ZR_TRIM_MIN)
		big_now = true;
	return obuf.p;
}

/* Milliseconds until this thread's buffer is due to go back (0: now). */
static uint64_t trim_left_ms(void)
{
	uint64_t idle = zr_now_ms() - big_last_ms;

	return idle >= ZR_TRIM_IDLE_MS ? 0 : ZR_TRIM_IDLE_MS - idle;
}

/* poll(2) @pfd without a time limit, but give this thread's buffer back
 * when it is due meanwhile. @return what poll returned. */
static int idle_poll(struct pollfd *pfd)
{
	__atomic_add_fetch(&n_sleeps, 1, __ATOMIC_RELAXED);
	while (trim_wanted()) {
		uint64_t left = trim_left_ms();
		int rc;

		if (!left) {
			trim_buffer();
			break;
		}
		rc = poll(pfd, 1, (int)left);
		if (rc != 0)
			return rc;
	}
	return poll(pfd, 1, -1);
}

/* Whether requests come in a burst that /dev/fuse's leader should poll
 * for. Not once they come through io_uring (uring.c): /dev/fuse then only
 * brings FORGETs and INTERRUPTs. */
static bool bursting(struct zr_fs *fs)
{
	return zr_cpulat_bursting(fs) && !zr_uring_active();
}

static bool am_leader(void)
{
	return my_gen && my_gen == __atomic_load_n(&lead_gen, __ATOMIC_ACQUIRE);
}

/* Put this thread on the stack of parked threads: on top, or at the
 * bottom when it has been idle a while or was the watchdog. Caller holds
 * park_lock. */
static void stack_push(bool bottom)
{
	me.stacked = true;
	if (!park_top) {
		me.up = me.down = NULL;
		park_top = park_bottom = &me;
	} else if (bottom) {
		me.up = park_bottom;
		me.down = NULL;
		park_bottom->down = &me;
		park_bottom = &me;
	} else {
		me.up = NULL;
		me.down = park_top;
		park_top->up = &me;
		park_top = &me;
	}
}

/* Take @p off the stack, if it is on it. Caller holds park_lock. */
static void stack_remove(struct zr_parker *p)
{
	if (!p->stacked)
		return;
	if (p->up)
		p->up->down = p->down;
	else
		park_top = p->down;
	if (p->down)
		p->down->up = p->up;
	else
		park_bottom = p->up;
	p->stacked = false;
}

/* Wake the thread parked last, else the watchdog. Caller holds park_lock. */
static void wake_one(void)
{
	struct zr_parker *p = park_top;

	if (p) {
		stack_remove(p);
		pthread_cond_signal(&p->cond);
	} else if (watcher) {
		pthread_cond_signal(&watcher->cond);
	}
}

/*
 * Give up the leader's role, if this thread still has it. @wake_all:
 * every parked thread wakes (the device failed); else one, to lead.
 */
static void step_down(bool wake_all)
{
	pthread_mutex_lock(&park_lock);
	if (my_gen == lead_gen) {
		leader = false;
		__atomic_store_n(&lead_since, 0, __ATOMIC_RELAXED);	/* (our turn's) */
		if (wake_all) {
			while (park_top)
				wake_one();
		}
		wake_one();
	}
	my_gen = 0;
	pthread_mutex_unlock(&park_lock);
}

/* Whether request @buf of @n bytes is a READ of at least ZR_TRIM_MIN. */
static bool bulk_read(const void *buf, ssize_t n)
{
	const struct fuse_in_header *in = buf;

	return in->opcode == FUSE_READ &&
	       (size_t)n >= sizeof(*in) + sizeof(struct fuse_read_in) &&
	       ((const struct fuse_read_in *)(in + 1))->size >= ZR_TRIM_MIN;
}

/*
 * Count this thread among those serving a large READ. @return whether as
 * many as there are CPUs (this one included) do now.
 */
static bool bulk_start(void)
{
	my_bulk = true;
	return __atomic_add_fetch(&n_bulk, 1, __ATOMIC_RELAXED) >= n_cpus;
}

/* This thread no longer counts as serving a large READ: it is done, or
 * will wait. */
static void bulk_done(void)
{
	my_bulk = false;
	__atomic_sub_fetch(&n_bulk, 1, __ATOMIC_RELAXED);
}

/* Take the role. Caller holds park_lock. */
static void take_lead(void)
{
	leader = true;
	__atomic_store_n(&lead_gen, lead_gen + 1, __ATOMIC_RELEASE);
	my_gen = lead_gen;
	__atomic_store_n(&lead_since, 0, __ATOMIC_RELAXED);
}

/* park()'s way out, also when the thread is cancelled in its wait: off the
 * stack, and park_lock given back. */
static void unlock_park(void *arg)
{
	(void)arg;
	stack_remove(&me);
	if (watcher == &me)
		__atomic_store_n(&watcher, NULL, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&park_lock);
}

/*
 * Wait until this thread may lead, and take the role: when it is free; at
 * once, on its way back from a request, when the leader serves a large
 * READ in its turn; or, as the watchdog, when the leader has been busy with
 * one request for longer than the limit. The role goes to the thread
 * that parked last (wake_one()): its buffers are the ones most likely
 * still in the CPU's caches and mapped. libfuse cancels its threads at
 * exit, here too: the cleanup handler gives park_lock back.
 */
static void park(struct zr_fs *fs)
{
	struct timespec ts;
	uint64_t since;

	me.idled = false;
	me.fresh = true;
	me.watched = false;
	if (!me.ready) {
		zr_cond_init_monotonic(&me.cond);
		me.ready = true;
	}
	pthread_mutex_lock(&park_lock);
	pthread_cleanup_push(unlock_park, NULL);
	while (leader) {
		uint64_t limit;
		bool bulk;

		/* pairs with need_watchdog()'s: a watchdog that stops sees
		 * the request its leader serves, or the leader sees that
		 * no watchdog is left */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		since = __atomic_load_n(&lead_since, __ATOMIC_ACQUIRE);
		bulk = __atomic_load_n(&lead_bulk, __ATOMIC_RELAXED);
		if (since && bulk && me.fresh)
			break;	/* the leader decompresses: read on for it */
		me.fresh = false;
		if (watcher || (!since && !bursting(fs) &&
				!__atomic_load_n(&n_bulk, __ATOMIC_RELAXED))) {
			uint64_t left = trim_wanted() ? trim_left_ms() : UINT64_MAX;

			if (!left) {	/* not while others wait for the lock */
				pthread_mutex_unlock(&park_lock);
				trim_buffer();
				pthread_mutex_lock(&park_lock);
				me.idled = true;
				continue;
			}
			/* a thread idle long enough to give its buffer
			 * back, or that watched, is the last one to wake */
			stack_push(me.idled || me.watched);
			if (left != UINT64_MAX) {
				zr_deadline(&ts, CLOCK_MONOTONIC, left * 1000000ull);
				pthread_cond_timedwait(&me.cond, &park_lock, &ts);
			} else {
				pthread_cond_wait(&me.cond, &park_lock);
			}
			stack_remove(&me);	/* (when it timed out) */
			continue;
		}
		/* a large READ, or a watch kept only for large READs to
		 * come, gets the longer limit */
		limit = (since ? bulk : !bursting(fs)) ? ZR_LEAD_BULK_NS : ZR_LEAD_CHECK_NS;
		if (since && zr_now_ns() - since > limit) {
			__atomic_add_fetch(&n_takeovers, 1, __ATOMIC_RELAXED);
			break;	/* the leader is slow: lead instead */
		}
		me.watched = true;
		__atomic_store_n(&watcher, &me, __ATOMIC_RELAXED);
		zr_deadline(&ts, CLOCK_MONOTONIC, limit);
		pthread_cond_timedwait(&me.cond, &park_lock, &ts);
		__atomic_store_n(&watcher, NULL, __ATOMIC_RELAXED);
	}
	take_lead();
	pthread_cleanup_pop(1);
}

/*
 * Look at the CPUs the daemon may run on (zr_cpu_ticks()): of their time
 * since the last look, the share that went idle, plus the leader's own
 * polling (which would have been idle time without it) up to
 * ZR_SPIN_CREDIT_PCT, is the spare time; below ZR_SPIN_STOP_PCT the CPUs
 * are busy, and they are free again from ZR_SPIN_RESUME_PCT. The credit
 * is capped so that the loop cannot keep itself going on CPUs that other
 * work needs: at least a tenth must be really idle. A look long after the
 * last one (requests paused) judges the whole time since. The first look,
 * and one that cannot read the file, count the CPUs as free: polling goes
 * on, and the next look (ZR_SPIN_LOOK_MS later) decides. Caller holds
 * spin_lock.
 */
static void spin_look(uint64_t now_ms)
{
	uint64_t idle, total, ns = __atomic_load_n(&spin_ns, __ATOMIC_RELAXED);
	bool busy = false;

	__atomic_store_n(&spin_look_ms, now_ms, __ATOMIC_RELAXED);
	if (zr_cpu_ticks(&spin_cpu, &idle, &total) < 0) {
		spin_total0 = 0;
	} else {
		if (spin_total0 && total > spin_total0) {
			uint64_t all = total - spin_total0;
			/* (iowait may go back: clamped) */
			uint64_t spare = idle > spin_idle0 ? idle - spin_idle0 : 0;
			uint64_t own = (ns - spin_ns0) * (uint64_t)spin_hz / 1000000000u;

			spare = spare * 100 + ZR_MIN(own * 100, ZR_SPIN_CREDIT_PCT * all);
			busy = spare < (spin_busy ? ZR_SPIN_RESUME_PCT : ZR_SPIN_STOP_PCT) * all;
		} else if (spin_total0) {
			busy = spin_busy;	/* (no tick counted since: no news) */
		}
		spin_idle0 = idle;
		spin_total0 = total;
		spin_ns0 = ns;
	}
	if (busy && !spin_busy)
		__atomic_add_fetch(&n_spin_stops, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&spin_busy, busy, __ATOMIC_RELAXED);
}

/*
 * Whether the leader may read in a loop now (@now_ns: zr_now_ns()). The
 * loop takes a CPU: that costs nobody while the CPUs have time to spare
 * (an untar: tar on one CPU and the daemon on the other leave them idle
 * over a third of the time), but when other work keeps them all busy (a
 * parallel build: compilers on every CPU, idle a twentieth of the time)
 * every loop that finds no request is time taken from that work. So the loop runs only while the
 * last look (spin_look(), at most every ZR_SPIN_LOOK_MS while the leader
 * is about to poll) found time to spare.
 */
static bool spin_allowed(uint64_t now_ns)
{
	if (spin_cpu.fd < 0)
		return true;
	if (now_ns / 1000000u >= __atomic_load_n(&spin_look_ms, __ATOMIC_RELAXED) + ZR_SPIN_LOOK_MS &&
	    pthread_mutex_trylock(&spin_lock) == 0) {
		uint64_t now = zr_now_ms();	/* (under the lock: never before the last look) */

		if (now - spin_look_ms >= ZR_SPIN_LOOK_MS)
			spin_look(now);
		pthread_mutex_unlock(&spin_lock);
	}
	return !__atomic_load_n(&spin_busy, __ATOMIC_RELAXED);
}

/* Count a polling loop that ran from @t0 to @end (ns), as at most
 * @spin_max: past its deadline the thread can only have been preempted. */
static void spun(uint64_t spin_max, uint64_t t0, uint64_t end)
{
	__atomic_add_fetch(&spin_ns, ZR_MIN(end - t0, spin_max), __ATOMIC_RELAXED);
}

/*
 * Make poll_fd blocking (@on) or not: the leader reads it blocking when it
 * is not to read in a loop nor to wake up to give its buffer back, which
 * takes one read(2) per request instead of a read that finds nothing, a
 * poll(2) and the read again (in a parallel build, when the CPUs are busy,
 * 2.0 reads and 0.7 polls a request were counted). The flag belongs to the
 * open file, which all threads share, and a thread that finds it the other
 * way round still gets its request: a read in a loop then sleeps in read(2)
 * until one comes, and a read that was to sleep returns EAGAIN and polls.
 * If fcntl fails, the flag stays as it was.
 */
static void set_blocking(bool on)
{
	if (__atomic_load_n(&poll_blocking, __ATOMIC_RELAXED) == on)
		return;
	pthread_mutex_lock(&block_lock);
	if (poll_blocking != on &&
	    fcntl(poll_fd, F_SETFL, on ? poll_fl & ~O_NONBLOCK : poll_fl) == 0)
		__atomic_store_n(&poll_blocking, on, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&block_lock);
}

/*
 * As the leader, read the next request from poll_fd: in a burst, while
 * spin_allowed(), read in a loop for up to busy_poll µs (whether the burst
 * goes on is asked as the loop starts), then sleep in poll(2) until one
 * comes; outside a burst, or with the CPUs busy, sleep in a blocking
 * read(2) (set_blocking()), or in poll(2) while this thread's buffer is
 * to be given back (idle_poll()).
 * @return what read(2) returned: the request's length, or -1 with errno
 * set (ENODEV once the file system is unmounted); -1 with errno EAGAIN
 * when this thread has lost the role meanwhile (the watchdog took it over
 * while this thread was held up on its way here); -1 with errno EINTR when
 * a signal interrupted it and the session is to end (main.c's end_loop()).
 * ENOENT (a request the kernel dropped while we copied it) is retried.
 */
static ssize_t lead_read(struct zr_fs *fs, void *buf, size_t len)
{
	struct pollfd pfd = { .fd = poll_fd, .events = POLLIN };
	uint64_t spin_max = (uint64_t)fs->opt->busy_poll * 1000u, deadline = 0, t0 = 0, now;
	ssize_t n;
	int err;

	for (;;) {
		if (!am_leader()) {
			n = -1;
			err = EAGAIN;
			break;
		}
		/* (a blocking read would keep a burst from polling, and this
		 * thread from giving its buffer back on time) */
		if (__atomic_load_n(&poll_blocking, __ATOMIC_RELAXED) &&
		    (trim_wanted() || (bursting(fs) && spin_allowed(zr_now_ns()))))
			set_blocking(false);
		n = read(poll_fd, buf, len);
		err = errno;
		if (n >= 0 || (err != EAGAIN && err != EINTR && err != ENOENT))
			break;
		if (err == EINTR && fuse_session_exited(fs->se))
			break;	/* (main.c's end_loop()) */
		if (err != EAGAIN)
			continue;
		if (!deadline && bursting(fs)) {
			t0 = zr_now_ns();
			if (spin_allowed(t0))
				deadline = t0 + spin_max;
		}
		if (deadline) {
			now = zr_now_ns();
			if (now < deadline)
				continue;
			spun(spin_max, t0, now);
			deadline = 0;
		} else if (!trim_wanted()) {
			/* no loop: sleep in read(2); in poll(2) when the loop
			 * ran out (so that the read after it may loop again)
			 * or the buffer is due back before a request may come */
			set_blocking(true);
			if (__atomic_load_n(&poll_blocking, __ATOMIC_RELAXED))
				continue;
		}
		if (idle_poll(&pfd) < 0) {
			err = errno;
			if (err != EINTR || fuse_session_exited(fs->se))
				break;
		}
	}
	if (deadline)
		spun(spin_max, t0, zr_now_ns());
	errno = err;
	return n;
}

/* Wake a parked thread to watch the leader if none does. */
static void need_watchdog(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);	/* (see park()) */
	if (__atomic_load_n(&watcher, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&park_lock);
	if (!watcher && park_bottom) {
		/* the coldest thread: watching needs no cache */
		struct zr_parker *p = park_bottom;

		stack_remove(p);
		pthread_cond_signal(&p->cond);
	}
	pthread_mutex_unlock(&park_lock);
}

/*
 * Read the next request with busy_poll on (see "Busy polling" above):
 * park until this thread leads, read, and hand the role on unless the
 * request is served in the leader's own turn.
 */
static ssize_t next_request(struct zr_fs *fs, void *buf, size_t len)
{
	uint64_t now;
	bool bulk;
	ssize_t n;

	in_turn = false;
	for (;;) {
		if (!am_leader())
			park(fs);
		/* our turn is over: clear its time, but only while we
		 * lead (a thread that took over meanwhile may have set its
		 * own, and cleared, it would leave that thread unwatched;
		 * helper-57). Under park_lock, which a thread taking the
		 * role holds from its look at lead_since to take_lead(): a
		 * clear made without it let a watchdog act on the time of
		 * a request already served, take the role from a leader on
		 * its way to read(2), and then see its own turn's time
		 * cleared by that thread (helper-65) */
		if (my_since) {
			pthread_mutex_lock(&park_lock);
			if (my_gen == lead_gen)
				__atomic_store_n(&lead_since, 0, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&park_lock);
			my_since = 0;
		}
		n = lead_read(fs, buf, len);
		if (n >= 0 || errno != EAGAIN)
			break;
		my_gen = 0;	/* superseded: park again */
	}
	if (n < (ssize_t)sizeof(struct fuse_in_header)) {
		int err = errno;

		step_down(n < 0);
		errno = err;
		return n;
	}
	now = zr_now_ns();
	bulk = bulk_read(buf, n);
	if (bulk ? !bulk_start() : !bursting(fs) || hands_off(buf, n)) {
		step_down(false);
		return n;
	}
	/* serve it in our turn, watched; published under park_lock, and
	 * only while we lead (a thread taken over meanwhile serves it
	 * outside any turn) */
	pthread_mutex_lock(&park_lock);
	if (my_gen == lead_gen) {
		__atomic_store_n(&lead_bulk, bulk, __ATOMIC_RELAXED);
		__atomic_store_n(&lead_since, now, __ATOMIC_RELEASE);
		my_since = now;
	}
	pthread_mutex_unlock(&park_lock);
	if (!my_since)
		return n;
	__atomic_add_fetch(&n_leads, 1, __ATOMIC_RELAXED);
	in_turn = true;
	need_watchdog();
	return n;
}

/** The name the kernel sends with FUSE_TMPFILE, and zr_op_create() knows a
 * nameless file by ("/", which no entry can be called). */
const char zr_tmpfile_name[] = "/";

/**
 * zr_session_map_request() - turn a request libfuse 3.14 cannot dispatch
 * into one it can, in place, before it is served (from /dev/fuse or a
 * ring). FUSE_TMPFILE (open(2) with O_TMPFILE, Linux 6.1) has the
 * arguments of a FUSE_CREATE and wants its reply, and its name is "/":
 * it becomes a FUSE_CREATE of that name, which zr_op_create() serves as
 * a file without a name. libfuse would answer it ENOSYS otherwise.
 * @buf, @n: the request as /dev/fuse delivers it.
 */
void zr_session_map_request(void *buf, size_t n)
{
	struct fuse_in_header *in = buf;
	const char *name = (const char *)(in + 1) + sizeof(struct fuse_create_in);

	if (in->opcode == FUSE_TMPFILE &&
	    n >= sizeof(*in) + sizeof(struct fuse_create_in) + sizeof(zr_tmpfile_name) &&
	    memcmp(name, zr_tmpfile_name, sizeof(zr_tmpfile_name)) == 0)
		in->opcode = FUSE_CREATE;
}

/**
 * zr_session_note_request() - what every request read does on its way in,
 * from /dev/fuse or a ring (uring.c): note it for the CPU latency request
 * and idle recompression, and carry out FUSE_HANDLE_KILLPRIV_V2's duties.
 * @buf, @n: the request as /dev/fuse delivers it (header and arguments).
 */
void zr_session_note_request(struct zr_fs *fs, const void *buf, size_t n)
{
	const struct fuse_in_header *in = buf;

	/* and when one comes: the fill thread's settling (settle_time()) stops
	 * as it starts, not once it is done */
	zr_note_ms(&fs->req_last_ms, zr_now_ms());
	zr_cpulat_busy(fs);
	switch (in->opcode) {
	case FUSE_INIT:
		if (n >= sizeof(*in) + offsetof(struct fuse_init_in, flags2)) {
			const struct fuse_init_in *ii = (const void *)(in + 1);

			init_flags_in = ii->flags;
			if ((ii->flags & FUSE_INIT_EXT) &&
			    n >= sizeof(*in) + offsetof(struct fuse_init_in, flags2) +
				 sizeof(ii->flags2))
				init_flags2_in = ii->flags2;
			__atomic_store_n(&init_unique, in->unique, __ATOMIC_RELEASE);
		}
		break;
	case FUSE_WRITE:
		if (n >= sizeof(*in) + sizeof(struct fuse_write_in)) {
			const struct fuse_write_in *wi = (const void *)(in + 1);

			if (wi->write_flags & FUSE_WRITE_KILL_SUIDGID)
				kill_suidgid(fs, in, false);
		}
		break;
	case FUSE_SETATTR:
		if (n >= sizeof(*in) + sizeof(struct fuse_setattr_in)) {
			const struct fuse_setattr_in *si = (const void *)(in + 1);

			if ((si->valid & FATTR_KILL_SUIDGID) && !(si->valid & FATTR_MODE))
				kill_suidgid(fs, in, si->valid & (FATTR_UID | FATTR_GID));
		}
		break;
	case FUSE_OPEN:
		if (n >= sizeof(*in) + sizeof(struct fuse_open_in)) {
			const struct fuse_open_in *oi = (const void *)(in + 1);

			if (oi->open_flags & FUSE_OPEN_KILL_SUIDGID)
				kill_suidgid(fs, in, false);
		}
		break;
	default:
		break;
	}
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
	const struct fuse_in_header *in = buf;
	uint64_t now_ms = zr_now_ms();	/* the previous request ends here */
	int cstate;
	ssize_t n;

	if (serving)
		set_serving(false);
	rbuf = buf;
	rbuf_len = len;
	if (my_bulk)
		bulk_done();
	if (big_now) {
		big_last_ms = now_ms;
		big_now = false;
	}
	zr_note_ms(&fs->req_last_ms, now_ms);	/* (all threads pass here) */
	n = poll_fd >= 0 ? next_request(fs, buf, len) : read(fd, buf, len);
	if (n > 0 && (size_t)n > rbuf_used)
		rbuf_used = (size_t)n;
	if (n >= (ssize_t)ZR_TRIM_MIN)
		big_now = true;
	if (n < (ssize_t)sizeof(*in))
		return n;
	set_serving(true);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cstate);
	zr_session_map_request(buf, (size_t)n);
	zr_session_note_request(fs, buf, (size_t)n);
	pthread_setcancelstate(cstate, NULL);
	return n;
}

/**
 * zr_session_drained() - whether no request waits in /dev/fuse to be read
 * and none read from it is still being served: then the kernel has nothing
 * queued for the daemon either, since a background request (a WRITE of the
 * writeback) is moved to the readable queue as one before it is answered.
 * A request between its read and its count is missed: ask twice, some time
 * apart. With uring=on, a request a ring thread serves counts too
 * (zr_uring_busy()): that narrows the gap, not closes it, as a ring
 * thread holds no request between its reply and its next completion, nor
 * while its next completion waits to be picked up.
 * @return true or false (true when poll(2) fails).
 */
bool zr_session_drained(struct zr_fs *fs)
{
	struct pollfd p = { .fd = fuse_session_fd(fs->se), .events = POLLIN };
	unsigned n = ZR_MIN(__atomic_load_n(&n_serving_slots, __ATOMIC_RELAXED),
			    (unsigned)ZR_SERVING_SLOTS);

	if (__atomic_load_n(&serving_extra, __ATOMIC_RELAXED) || zr_uring_busy())
		return false;
	for (unsigned i = 0; i < n; i++)
		if (__atomic_load_n(&serving_slot[i].on, __ATOMIC_ACQUIRE))
			return false;
	return poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN);
}

/*
 * Set the kernel's read-ahead window of our mount to the read_ahead option.
 * FUSE caps it at 128 KiB (the bdi default) whatever the daemon asks in
 * INIT, and it applies that cap when it handles our INIT reply, so this is
 * done just after. Sequential cold reads of large files then arrive as
 * 1 MiB requests that two daemon threads decompress in parallel. Writing
 * sysfs needs root; without it the kernel's default stays (not an error),
 * and the option reads 0 from then on.
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
	if (fd < 0 || write(fd, val, (size_t)n) != n) {
		/* the config file shows what is in effect: the kernel's
		 * default (helper-66) */
		zr_log(ZR_LOG_INFO, "read_ahead: cannot write %s (%s): the kernel's default window stays",
		       path, strerror(errno));
		__atomic_store_n(&fs->opt->read_ahead, 0, __ATOMIC_RELAXED);
	}
	if (fd >= 0)
		close(fd);
}

/*
 * Ask for FUSE over io_uring in the INIT reply @io (uring=on), when the
 * kernel offered it and the rings could be made ready (zr_uring_prepare():
 * once the kernel takes such a reply it holds every request back until
 * the rings take them, so nothing may fail after). @return whether it was
 * asked for; zr_uring_go() must then follow the reply.
 */
static bool want_uring(struct zr_fs *fs, struct fuse_init_out *io, size_t len)
{
	size_t max;
	int rc;

	if (!fs->opt->uring)
		return false;
	if (!(init_flags2_in & ZR_FUSE_OVER_IO_URING2) ||
	    len < offsetof(struct fuse_init_out, flags2) + sizeof(io->flags2)) {
		zr_log(ZR_LOG_WARNING,
		       "uring=on: the kernel does not offer FUSE over io_uring (Linux 6.14 or later, with /sys/module/fuse/parameters/enable_uring set to Y): using /dev/fuse");
		return false;
	}
	if (fs->opt->singlethread) {
		zr_log(ZR_LOG_WARNING, "uring=on: not with -s (the rings serve requests in parallel): using /dev/fuse");
		return false;
	}
	max = io->max_write;
	if ((io->flags & FUSE_MAX_PAGES) &&
	    (size_t)io->max_pages * (size_t)sysconf(_SC_PAGESIZE) > max)
		max = (size_t)io->max_pages * (size_t)sysconf(_SC_PAGESIZE);
	if (max < 8192)
		max = 8192;
	rc = zr_uring_prepare(fs, max);
	if (rc) {
		zr_log(ZR_LOG_WARNING, "uring=on: cannot set up the rings (%s): using /dev/fuse",
		       strerror(-rc));
		return false;
	}
	io->flags |= FUSE_INIT_EXT;
	io->flags2 |= ZR_FUSE_OVER_IO_URING2;
	return true;
}

static ssize_t zr_io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	uint64_t unique = __atomic_load_n(&init_unique, __ATOMIC_ACQUIRE);
	bool init_reply = false, uring = false;
	ssize_t n;

	if (zr_uring_reply(iov, count, &n))
		return n;
	if (unique && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header)) {
		struct fuse_out_header *out = iov[0].iov_base;

		if (out->unique == unique && out->error == 0 &&
		    iov[1].iov_len >= offsetof(struct fuse_init_out, max_background)) {
			struct fuse_init_out *io = iov[1].iov_base;

			if (init_flags_in & FUSE_HANDLE_KILLPRIV_V2)
				io->flags |= FUSE_HANDLE_KILLPRIV_V2;
			uring = want_uring(userdata, io, iov[1].iov_len);
			__atomic_store_n(&init_unique, 0, __ATOMIC_RELEASE);
			init_reply = true;
		}
	}
	n = writev(fd, iov, count);
	/* the kernel has applied the INIT reply when writev returns */
	if (init_reply && n >= 0)
		set_read_ahead(userdata);
	if (uring)
		zr_uring_go(n >= 0);
	return n;
}

/* Open what spin_look() reads, for the CPUs in @cpus; without it the
 * leader polls in every burst (the log says so). */
static void spin_start(const cpu_set_t *cpus)
{
	int err;

	spin_hz = sysconf(_SC_CLK_TCK);
	if (spin_hz <= 0)
		zr_log(ZR_LOG_INFO, "busy_poll: cannot look at the CPUs' time in /proc/stat (no clock tick rate): polling in every burst");
	else if ((err = zr_cpu_look_open(&spin_cpu, cpus)) < 0)
		zr_log(ZR_LOG_INFO, "busy_poll: cannot look at the CPUs' time in /proc/stat (%s): polling in every burst",
		       strerror(-err));
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
	int fd = fuse_session_fd(fs->se);
	int rc = fuse_session_custom_io(fs->se, &io, fd);
	cpu_set_t cpus;
	int fl;

	if (rc || !fs->opt->busy_poll)
		return rc;
	n_cpus = zr_daemon_cpus(&cpus);
	/* only once our read hook is in: libfuse's own read takes EAGAIN
	 * for a fatal error */
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		zr_log(ZR_LOG_INFO, "busy_poll: cannot make the FUSE descriptor non-blocking (%s): off",
		       strerror(errno));
	} else {
		poll_fl = fl | O_NONBLOCK;
		poll_fd = fd;
	}
	if (poll_fd >= 0)
		spin_start(&cpus);
	return 0;
}

/**
 * zr_session_blocking() - say that the request this thread serves is about
 * to wait on the backing disk (a block missing from the tier, a backing
 * file to open). If it is being served in the leader's turn, the role is
 * handed on first, so that other requests are read and served meanwhile;
 * a large READ no longer counts as CPU work. Cheap enough to call before
 * every pread.
 */
void zr_session_blocking(void)
{
	if (my_bulk)
		bulk_done();
	if (!in_turn)
		return;
	in_turn = false;
	step_down(false);
}

/**
 * zr_session_align() - move the @len bytes at @p, which lie in the request
 * buffer this thread read its request into, to the first address at or
 * after @p that is congruent to @phase modulo @align (a power of two), so
 * that they can be written with O_DIRECT. libfuse 3.14's buffer is a
 * malloc() of 1 MiB and a page for the headers, read from its start: a
 * WRITE's payload follows its 80 bytes of headers, and a payload of 1 MiB
 * has 4016 bytes of room after it. glibc maps so large a block on its own,
 * 16 bytes into a page, so a payload at a page-aligned offset moves 4000
 * bytes and fits; one that would need more stays (NULL). The bytes before
 * @p (the request's headers) stay; what was at @p may be overwritten.
 * @return the new address of the bytes, @p when it is congruent already,
 * or NULL when @p is not in this thread's request buffer (io_uring's
 * payload buffers are not) or the buffer has no room after it.
 */
char *zr_session_align(char *p, size_t len, uintptr_t phase, size_t align)
{
	uintptr_t skip = (phase - (uintptr_t)p) & (align - 1);
	size_t at;

	if (!skip)
		return p;
	if (!rbuf || p < rbuf || p > rbuf + rbuf_len)
		return NULL;
	at = (size_t)(p - rbuf);
	if (len > rbuf_len - at || skip > rbuf_len - at - len)
		return NULL;
	memmove(p + skip, p, len);
	if (at + skip + len > rbuf_used)
		rbuf_used = at + skip + len;	/* for the trim */
	return p + skip;
}

/** Requests the leader read and served in its own turn: in a burst, or
 * large READs while the CPUs are busy (for the stats). */
uint64_t zr_session_leads(void)
{
	return __atomic_load_n(&n_leads, __ATOMIC_RELAXED);
}

/** Time the leader spent reading in a loop, in ms (for the stats). */
uint64_t zr_session_poll_ms(void)
{
	return __atomic_load_n(&spin_ns, __ATOMIC_RELAXED) / 1000000u;
}

/** Looks that found the CPUs busy and stopped the polling loop (for the
 * stats). */
uint64_t zr_session_poll_stops(void)
{
	return __atomic_load_n(&n_spin_stops, __ATOMIC_RELAXED);
}

/** Times the leader slept in poll(2) for a request (for the stats). */
uint64_t zr_session_poll_sleeps(void)
{
	return __atomic_load_n(&n_sleeps, __ATOMIC_RELAXED);
}

/** Request buffers idle threads gave back (for the stats). */
uint64_t zr_session_trims(void)
{
	return __atomic_load_n(&n_trims, __ATOMIC_RELAXED);
}

/** Times the watchdog took the leader's role over (for the stats). */
uint64_t zr_session_takeovers(void)
{
	return __atomic_load_n(&n_takeovers, __ATOMIC_RELAXED);
}
