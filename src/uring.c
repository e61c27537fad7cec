// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * uring.c - FUSE over io_uring (-o uring=on): requests reach the daemon
 * through io_uring command rings, one queue per CPU, instead of read(2)
 * and writev(2) on /dev/fuse. libfuse 3.14 does not speak this protocol
 * (Linux 6.14, FUSE 7.42), so the daemon does it here and hands every
 * request to libfuse's own dispatcher, fuse_session_process_buf().
 *
 * Why: a request read from /dev/fuse is served by whichever daemon thread
 * reads it, mostly on the other CPU than the process that made it, which
 * then waits for two wake-ups across CPUs (an IPI each, dear in a VM) and
 * two syscalls of the daemon's (read, writev). The kernel puts a request
 * made on CPU n in queue n, and the threads of queue n are pinned to CPU n:
 * the caller sleeps, the daemon thread runs where it ran, and one syscall
 * (io_uring_enter) both answers a request and waits for the next. Bulk
 * requests (mostly read-ahead and writeback) come from a process that does
 * not sleep meanwhile, so a thread serving them in a row may run on any
 * CPU until it serves small ones again or waits a second (place()).
 *
 * The protocol, as the kernel speaks it:
 *  - The daemon sets FUSE_OVER_IO_URING in its INIT reply (session.c) and
 *    the kernel accepts it only when the fuse module's enable_uring
 *    parameter is Y (/sys/module/fuse/parameters/enable_uring).
 *  - Then each ring entry is registered (FUSE_IO_URING_CMD_REGISTER, an
 *    IORING_OP_URING_CMD on the /dev/fuse fd, 128-byte SQEs) with two
 *    buffers: a header (struct ring_header: the fuse_in_header, the
 *    opcode's fixed argument, the entry's sizes) and a payload buffer of
 *    at least max(max_write, max_pages pages). Once the kernel has taken
 *    the INIT reply, it holds every new request back until every CPU's
 *    queue has an entry (or a REGISTER fails, which sends it back to
 *    /dev/fuse); so the rings and the first threads are made before the
 *    reply (zr_uring_prepare()), which asks only if that worked, and the
 *    threads register once it is taken (zr_uring_go()). FORGETs,
 *    INTERRUPTs and notifications always go through /dev/fuse.
 *  - A request completes the entry's command; the daemon serves it, writes
 *    the fuse_out_header in the header buffer and the reply's arguments in
 *    the payload buffer, and sends FUSE_IO_URING_CMD_COMMIT_AND_FETCH,
 *    which also waits for the next request.
 *
 * Threads and buffers. ZR_URING_PER_QUEUE threads per possible CPU to
 * start with, each with an io_uring of its own and one entry registered,
 * so a request that waits on the disk holds up at most one of its queue's
 * threads. A queue grows (up to ZR_URING_MAX_PER_QUEUE) when a thread takes
 * a request and none is left waiting, and before a request waits on others
 * (zr_uring_may_wait()): a request the kernel queues while no entry waits
 * is fetched only by the next commit of that queue, not by an entry
 * registered after it. An
 * entry's payload buffer sits a page into a mapping: the request's header
 * and its opcode's argument are copied just before the payload, which
 * makes the contiguous message libfuse expects without moving the payload
 * (a WRITE's data).
 *
 * Replies. libfuse answers through session.c's writev hook, which hands
 * replies to zr_uring_reply(): a reply whose unique is that of a request an
 * entry holds is copied into that entry's buffers, others go to /dev/fuse.
 * The payload buffer still holds the request's own payload (a WRITE's
 * data, a LOOKUP's name) while its handler runs, so a reply to a request
 * that has a payload is staged in a second buffer and copied over once the
 * handler has returned; a reply to one without (READ, GETATTR) goes
 * straight into the payload buffer.
 *
 * Stopping: zr_uring_stop() writes an eventfd that every ring polls; on
 * unmount the kernel ends the commands with ENOTCONN.
 *
 * Locking: the entries array (ents, n_ents, queues) is written by
 * zr_uring_prepare() before any thread starts and freed after all joined.
 * Each entry's ring and buffers belong to its thread; unique (the request
 * the entry holds, 0 none) is an atomic the writev hook reads, and what
 * zr_uring_stop() waits on; replied, reply_len and staged are reset by the
 * owner before it publishes unique (release), then written under the
 * entry's lock, which also protects the thread's start stage. ents_lock
 * lets zr_uring_busy() read unique from another thread while free_all()
 * may run. grow_lock protects each queue's started count, each
 * entry's started flag and stopping; a queue's idle count is an atomic.
 * gate_lock protects gate.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <linux/time_types.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs.h"
#include "zr_util.h"

/* The kernel's ABI for this (FUSE 7.42), which Debian 12's headers predate. */
#define RING_ENTER_NO_IOWAIT (1U << 7)	/* IORING_ENTER_NO_IOWAIT (Linux 6.15) */
#define RING_FEAT_NO_IOWAIT (1U << 17)	/* IORING_FEAT_NO_IOWAIT */

enum {
	RING_CMD_REGISTER = 1,		/* FUSE_IO_URING_CMD_REGISTER */
	RING_CMD_COMMIT_AND_FETCH = 2,	/* FUSE_IO_URING_CMD_COMMIT_AND_FETCH */
};

struct ring_ent_in_out {		/* struct fuse_uring_ent_in_out */
	uint64_t flags;
	uint64_t commit_id;		/* the request's unique, for the commit */
	uint32_t payload_sz;		/* bytes of payload, either way */
	uint32_t padding;
	uint64_t reserved;
};

struct ring_header {			/* struct fuse_uring_req_header */
	char in_out[128];		/* fuse_in_header / fuse_out_header */
	char op_in[128];		/* the opcode's fixed argument */
	struct ring_ent_in_out ent;
};

struct ring_cmd_req {			/* struct fuse_uring_cmd_req, in the SQE */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#define ZR_URING_PER_QUEUE 2		/* threads a queue starts with */
#define ZR_URING_MAX_PER_QUEUE 8	/* and may grow to (zr_uring_may_wait()) */
#define ZR_URING_LEAD 4096		/* room before the payload for the headers */
#define ZR_URING_STOP_MS 5000		/* zr_uring_stop() waits this long at most */
#define ZR_URING_BULK (128u * 1024u)	/* a READ reply or WRITE this big is bulk */
#define ZR_URING_UNPIN 2		/* unpinned after this many bulk requests in a row */
#define ZR_URING_REPIN 4		/* pinned again after this many other requests */
/* (a bulk request fills the buffers past ZR_TRIM_MIN, so ring_next() waits
 * with a time limit while a thread is unpinned, and pins it after a pause) */
_Static_assert(ZR_URING_BULK >= ZR_TRIM_MIN, "bulk requests must make the buffers big");
#define TAG_CMD 1
#define TAG_STOP 2

struct zr_uring_ent {
	struct zr_fs *fs;
	unsigned qid;
	pthread_t tid;
	bool started;			/* grow_lock: tid is a thread to join */
	int stage_reached;		/* lock: 1 ring ready, 2 REGISTER sent */
	bool stage_ok;			/* lock: and no failure on the way */

	/* the ring: its thread's alone */
	int ring_fd;
	unsigned wait_flags;		/* io_uring_enter() flags of a wait */
	void *sq_map, *cq_map, *sqe_map;
	size_t sq_len, cq_len, sqe_len;
	unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
	unsigned *cq_head, *cq_tail, *cq_mask;
	struct io_uring_cqe *cqes;
	char *sqes;			/* 128-byte entries */

	/* the buffers registered with the kernel */
	struct ring_header *hdr;
	char *area;			/* ZR_URING_LEAD + payload_len, mmap()ed */
	char *payload;			/* area + ZR_URING_LEAD */
	size_t payload_len;
	char *stage;			/* payload_len, mmap()ed: staged replies */
	struct iovec iov[2];

	uint64_t unique;		/* atomic: request held, 0 none */
	uint32_t req_payload;		/* its payload bytes (owner only) */
	int os_tid;			/* atomic (seq_cst): its thread's kernel
					 * id, 0 none (class_join(), set_all()) */
	uint64_t served;		/* relaxed atomic, owner writes: requests */
	bool big;			/* owner only: the buffers took ZR_TRIM_MIN
					 * or more since they last went back */
	bool counted_idle;		/* owner only: counted in its queue's idle */
	bool pinned;			/* owner only: pinned to its queue's CPU */
	bool unpinned;			/* owner only: may run on any CPU (place()) */
	unsigned bulk_run;		/* owner only: bulk requests in a row */
	unsigned small_run;		/* owner only: other requests in a row */

	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool replied;			/* lock */
	bool staged;			/* lock: reply in stage, not payload */
	uint32_t reply_len;		/* lock: reply's bytes after the out header */
};

/* A queue: its CPU's threads, ents[qid * ZR_URING_MAX_PER_QUEUE + k]. */
struct zr_uring_queue {
	unsigned started;	/* grow_lock (relaxed atomic reads): slots used */
	unsigned idle;		/* atomic: threads whose entry waits for a request */
};

static struct zr_uring_ent *ents;
static unsigned n_ents;
/* held for writing by free_all(), for reading by zr_uring_busy(), which
 * another thread may call while zr_uring_stop() frees */
static pthread_rwlock_t ents_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct zr_uring_queue *queues;
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
static bool stopping;		/* grow_lock (atomic reads): zr_uring_stop() runs */

/* The gate the first threads wait at, ring set up, until the kernel has
 * taken the INIT reply that asks for io_uring: 0 wait, 1 go, -1 give up. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate;		/* gate_lock */

static bool grow_queue(unsigned qid, bool wait);
static int stop_fd = -1;
static bool active;			/* atomic: entries registered */
static uint64_t n_requests;		/* relaxed atomic: requests served */
static uint64_t n_trims;		/* relaxed atomic: buffers given back */
static uint64_t n_threads;		/* relaxed atomic: ring threads started */
static uint64_t n_unpins;		/* relaxed atomic: place() unpinned a thread */
static uint64_t n_repins;		/* relaxed atomic: and pinned it after small requests */
static uint64_t n_unpinned;		/* atomic: threads unpinned now */
static cpu_set_t any_cpu;		/* the daemon's CPUs, set before any thread */
static bool can_widen;			/* any_cpu has more than one CPU */
static __thread struct zr_uring_ent *cur;	/* this thread's entry, if a ring thread */

static int sys_setup(unsigned entries, struct io_uring_params *p)
{
	return (int)syscall(__NR_io_uring_setup, entries, p);
}

static int sys_enter(int fd, unsigned submit, unsigned wait, unsigned flags,
		     void *arg, size_t argsz)
{
	return (int)syscall(__NR_io_uring_enter, fd, submit, wait, flags, arg, argsz);
}

/* Enable @e's ring, made disabled, from the thread that submits to it (the
 * ring's single issuer). @return 0 or -errno. */
static int ring_enable(struct zr_uring_ent *e)
{
	if (syscall(__NR_io_uring_register, e->ring_fd, IORING_REGISTER_ENABLE_RINGS,
		    NULL, 0) < 0)
		return -errno;
	return 0;
}

/*
 * Set up @e's ring; @disabled: created disabled, for the thread that will
 * submit to it to enable (ring_enable()). DEFER_TASKRUN (Linux 6.1) is
 * required: the kernel then copies requests into the entry's buffers only
 * inside this thread's io_uring_enter(), which ring_next()'s trimming
 * relies on. @return 0 or -errno.
 */
static int ring_setup(struct zr_uring_ent *e, bool disabled)
{
	struct io_uring_params p;
	int fd;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER |
		  IORING_SETUP_DEFER_TASKRUN;
	if (disabled)
		p.flags |= IORING_SETUP_R_DISABLED;
	fd = sys_setup(4, &p);
	if (fd < 0)
		return -errno;
	e->ring_fd = fd;
	/* a thread waiting for requests is idle, not waiting for I/O: since
	 * Linux 6.5 a wait with commands in flight counts as iowait (100%
	 * "wa" in top on an idle machine) unless told not to (6.15) */
	e->wait_flags = p.features & RING_FEAT_NO_IOWAIT ? RING_ENTER_NO_IOWAIT : 0;
	e->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	e->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	e->sqe_len = p.sq_entries * 128;
	e->sq_map = mmap(NULL, e->sq_len, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
	if (e->sq_map == MAP_FAILED)
		goto fail;
	e->cq_map = mmap(NULL, e->cq_len, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
	if (e->cq_map == MAP_FAILED)
		goto fail;
	e->sqe_map = mmap(NULL, e->sqe_len, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
	if (e->sqe_map == MAP_FAILED)
		goto fail;
	e->sq_head = (unsigned *)((char *)e->sq_map + p.sq_off.head);
	e->sq_tail = (unsigned *)((char *)e->sq_map + p.sq_off.tail);
	e->sq_mask = (unsigned *)((char *)e->sq_map + p.sq_off.ring_mask);
	e->sq_array = (unsigned *)((char *)e->sq_map + p.sq_off.array);
	e->cq_head = (unsigned *)((char *)e->cq_map + p.cq_off.head);
	e->cq_tail = (unsigned *)((char *)e->cq_map + p.cq_off.tail);
	e->cq_mask = (unsigned *)((char *)e->cq_map + p.cq_off.ring_mask);
	e->cqes = (struct io_uring_cqe *)((char *)e->cq_map + p.cq_off.cqes);
	e->sqes = e->sqe_map;
	return 0;
fail:
	{
		int err = -errno;

		if (e->sq_map && e->sq_map != MAP_FAILED)
			munmap(e->sq_map, e->sq_len);
		if (e->cq_map && e->cq_map != MAP_FAILED)
			munmap(e->cq_map, e->cq_len);
		e->sq_map = e->cq_map = e->sqe_map = NULL;
		close(fd);
		e->ring_fd = -1;
		return err;
	}
}

static void ring_teardown(struct zr_uring_ent *e)
{
	if (e->ring_fd < 0)
		return;
	munmap(e->sqe_map, e->sqe_len);
	munmap(e->cq_map, e->cq_len);
	munmap(e->sq_map, e->sq_len);
	close(e->ring_fd);	/* cancels the command still registered */
	e->ring_fd = -1;
}

/* A cleared SQE of @e's ring, queued for the next sys_enter(). The ring
 * has room: at most two are ever in flight (a command and the stop poll). */
static struct io_uring_sqe *sqe_get(struct zr_uring_ent *e)
{
	unsigned tail = *e->sq_tail;
	unsigned idx = tail & *e->sq_mask;
	struct io_uring_sqe *sqe = (struct io_uring_sqe *)(e->sqes + (size_t)idx * 128);

	memset(sqe, 0, 128);
	e->sq_array[idx] = idx;
	__atomic_store_n(e->sq_tail, tail + 1, __ATOMIC_RELEASE);
	return sqe;
}

static void sqe_cmd(struct zr_uring_ent *e, unsigned op, uint64_t commit_id)
{
	struct io_uring_sqe *sqe = sqe_get(e);
	struct ring_cmd_req *req = (struct ring_cmd_req *)sqe->cmd;

	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fuse_session_fd(e->fs->se);
	sqe->cmd_op = op;
	sqe->user_data = TAG_CMD;
	if (op == RING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)e->iov;
		sqe->len = 2;
	}
	req->commit_id = commit_id;
	req->qid = (uint16_t)e->qid;
}

/*
 * Submit what is queued and wait for a completion. @tag and @res receive
 * it. @timeout_ms: give up waiting after this long (0: never).
 * @return 0, -ETIME when @timeout_ms passed without a completion, or
 * -errno of io_uring_enter (not EINTR, which is retried).
 */
static int ring_wait(struct zr_uring_ent *e, unsigned submit, uint64_t timeout_ms,
		     uint64_t *tag, int *res)
{
	struct __kernel_timespec ts = {
		.tv_sec = (long long)(timeout_ms / 1000),
		.tv_nsec = (long long)(timeout_ms % 1000) * 1000000,
	};
	struct io_uring_getevents_arg arg = {
		.ts = (uint64_t)(uintptr_t)&ts,
	};

	for (;;) {
		unsigned head = *e->cq_head;
		int rc;

		/* (what is to submit goes first: a commit carries a reply,
		 * which a completion already there, the stop's, must not
		 * leave unsent, helper-43) */
		if (!submit && head != __atomic_load_n(e->cq_tail, __ATOMIC_ACQUIRE)) {
			struct io_uring_cqe *cqe = &e->cqes[head & *e->cq_mask];

			*tag = cqe->user_data;
			*res = cqe->res;
			__atomic_store_n(e->cq_head, head + 1, __ATOMIC_RELEASE);
			return 0;
		}
		if (timeout_ms)
			rc = sys_enter(e->ring_fd, submit, 1,
				       IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG | e->wait_flags,
				       &arg, sizeof(arg));
		else
			rc = sys_enter(e->ring_fd, submit, 1, IORING_ENTER_GETEVENTS | e->wait_flags,
				       NULL, 0);
		if (rc < 0) {
			if (errno == ETIME)
				return -ETIME;
			if (errno == EINTR || errno == EAGAIN || errno == EBUSY)
				continue;
			return -errno;
		}
		submit = 0;
	}
}

/* Pin the calling thread to @cpu. @return whether it could (it says why
 * not in the log). */
static bool pin(unsigned cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		zr_log(ZR_LOG_INFO, "uring: cannot pin a thread to CPU %u: %s", cpu, strerror(errno));
		return false;
	}
	return true;
}

/*
 * Where @e's thread may run, once it answered a request (@bulk: serve()'s
 * answer) or waited ZR_TRIM_IDLE_MS for one (@idle). A queue's threads are
 * pinned to its CPU, where the process that made a sync request sleeps
 * until the answer: the thread runs in its place, and the process wakes on
 * its own CPU. Read-ahead and writeback come from a process that runs on
 * meanwhile (dd streaming a file in), and a pinned thread then shares that
 * process's CPU while the other one idles: 1.2 GB/s of cold 1 MiB reads,
 * against 1.8 unpinned. So a thread that served ZR_URING_UNPIN bulk
 * requests in a row may run on any of the daemon's CPUs (the scheduler
 * wakes it on an idle one), and is pinned again after ZR_URING_REPIN other
 * requests in a row, or after a pause. (A single bulk request is often
 * waited on: the WRITE of a file a close() flushes.)
 */
static void place(struct zr_uring_ent *e, bool bulk, bool idle)
{
	if (bulk) {
		e->small_run = 0;
		if (e->bulk_run < ZR_URING_UNPIN)
			e->bulk_run++;
		if (e->bulk_run >= ZR_URING_UNPIN && e->pinned && !e->unpinned && can_widen &&
		    sched_setaffinity(0, sizeof(any_cpu), &any_cpu) == 0) {
			e->unpinned = true;
			__atomic_add_fetch(&n_unpins, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&n_unpinned, 1, __ATOMIC_RELAXED);
		}
		return;
	}
	e->bulk_run = 0;
	if (!e->unpinned || (!idle && ++e->small_run < ZR_URING_REPIN))
		return;
	/* (should its CPU have gone, it runs on any: pin() logs why) */
	e->pinned = pin(e->qid);
	if (!e->pinned && can_widen)
		(void)sched_setaffinity(0, sizeof(any_cpu), &any_cpu);
	e->unpinned = false;
	e->small_run = 0;
	__atomic_sub_fetch(&n_unpinned, 1, __ATOMIC_RELAXED);
	if (!idle)
		__atomic_add_fetch(&n_repins, 1, __ATOMIC_RELAXED);
}

/*
 * Submit the commit of the request @e served (@bulk: serve()'s answer) and
 * wait for the next completion, as ring_wait() without a time limit; but
 * when the buffers took ZR_TRIM_MIN or more since they last went back, give
 * their pages back once ZR_TRIM_IDLE_MS pass without a request. The kernel
 * writes a request into them only from this thread (task work run in
 * io_uring_enter), never while it is in madvise(). Where the thread may
 * run changes only here (place()), after the reply went.
 */
static int ring_next(struct zr_uring_ent *e, unsigned submit, bool bulk,
		     uint64_t *tag, int *res)
{
	int rc;

	/* (without big buffers the thread served no bulk request since its
	 * last pause and, unless zr_uring_may_wait() moved it, is pinned:
	 * place() would do nothing) */
	if (!e->big && !e->unpinned)
		return ring_wait(e, submit, 0, tag, res);
	/* submit on its own: io_uring_enter() that submits reports the
	 * submission, not the timeout, and would wait twice as long */
	while (submit && sys_enter(e->ring_fd, submit, 0, 0, NULL, 0) < 0) {
		if (errno != EINTR && errno != EAGAIN && errno != EBUSY)
			return -errno;
	}
	place(e, bulk, false);
	rc = ring_wait(e, 0, ZR_TRIM_IDLE_MS, tag, res);
	if (rc != -ETIME)
		return rc;
	place(e, false, true);
	if (madvise(e->area, ZR_URING_LEAD + e->payload_len, MADV_DONTNEED) == 0 &&
	    madvise(e->stage, e->payload_len, MADV_DONTNEED) == 0)
		__atomic_add_fetch(&n_trims, 1, __ATOMIC_RELAXED);
	e->big = false;
	return ring_wait(e, 0, 0, tag, res);
}

/*
 * After its handler returned: whether the request @e holds has its reply.
 * Every zramfs handler replies before it returns; one that did not would
 * leave the entry, and the process waiting on it, hanging for good, so
 * it is answered EIO here, with an error in the log.
 */
static void check_reply(struct zr_uring_ent *e, uint32_t opcode)
{
	pthread_mutex_lock(&e->lock);
	if (!e->replied) {
		struct fuse_out_header out = {
			.len = sizeof(out), .error = -EIO,
			.unique = __atomic_load_n(&e->unique, __ATOMIC_RELAXED),
		};

		zr_log(ZR_LOG_ERR, "uring: opcode %u returned without a reply: EIO", opcode);
		memcpy(e->hdr->in_out, &out, sizeof(out));
		e->reply_len = 0;
		e->staged = false;
		e->replied = true;
	}
	pthread_mutex_unlock(&e->lock);
}

/*
 * Serve the request that just arrived in @e's buffers: rebuild the message
 * libfuse reads from /dev/fuse in front of the payload, dispatch it, and
 * leave the reply in the buffers for the commit. @return whether it was
 * bulk: a READ answered with, or a WRITE of, ZR_URING_BULK bytes or more
 * (mostly read-ahead and writeback; see place()).
 */
static bool serve(struct zr_uring_ent *e)
{
	struct fuse_in_header in;
	uint32_t psz = e->hdr->ent.payload_sz;
	struct fuse_buf fb;
	size_t hsz;
	char *msg;

	memcpy(&in, e->hdr->in_out, sizeof(in));
	if (in.len < sizeof(in) + (uint64_t)psz || psz > e->payload_len ||
	    in.len - sizeof(in) - psz > sizeof(e->hdr->op_in)) {
		struct fuse_out_header out = {
			.len = sizeof(out), .error = -EIO, .unique = in.unique,
		};

		zr_log(ZR_LOG_ERR, "uring: malformed request (opcode %u, len %u, payload %u)",
		       in.opcode, in.len, psz);
		memcpy(e->hdr->in_out, &out, sizeof(out));
		e->hdr->ent.payload_sz = 0;
		return false;
	}
	hsz = in.len - sizeof(in) - psz;
	msg = e->payload - sizeof(in) - hsz;
	memcpy(msg, &in, sizeof(in));
	memcpy(msg + sizeof(in), e->hdr->op_in, hsz);
	e->req_payload = psz;
	/* (no reply can reach the entry before unique says it holds this
	 * request: the release store publishes these) */
	e->replied = false;
	e->staged = false;
	e->reply_len = 0;
	__atomic_store_n(&e->unique, in.unique, __ATOMIC_RELEASE);

	zr_session_map_request(msg, in.len);
	zr_session_note_request(e->fs, msg, in.len);
	memset(&fb, 0, sizeof(fb));
	fb.mem = msg;
	fb.size = in.len;
	fuse_session_process_buf(e->fs->se, &fb);
	__atomic_add_fetch(&n_requests, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&e->served, e->served + 1, __ATOMIC_RELAXED);

	check_reply(e, in.opcode);
	__atomic_store_n(&e->unique, 0, __ATOMIC_RELEASE);
	if (e->staged)
		memcpy(e->payload, e->stage, e->reply_len);
	e->hdr->ent.payload_sz = e->reply_len;
	if (psz >= ZR_TRIM_MIN || e->reply_len >= ZR_TRIM_MIN)
		e->big = true;
	return (in.opcode == FUSE_READ && e->reply_len >= ZR_URING_BULK) ||
	       (in.opcode == FUSE_WRITE && psz >= ZR_URING_BULK);
}

/* Count @e's thread among its queue's idle ones, or not. */
static void idle_enter(struct zr_uring_ent *e)
{
	if (!e->counted_idle) {
		e->counted_idle = true;
		__atomic_add_fetch(&queues[e->qid].idle, 1, __ATOMIC_RELEASE);
	}
}

static void idle_leave(struct zr_uring_ent *e)
{
	if (e->counted_idle) {
		e->counted_idle = false;
		__atomic_sub_fetch(&queues[e->qid].idle, 1, __ATOMIC_RELEASE);
	}
}

/* Note that @e's thread has reached @stage (1: its ring is ready to
 * submit to; 2: its REGISTER went in), @ok or not, for whoever waits for
 * it (wait_stage()). */
static void say_stage(struct zr_uring_ent *e, int stage, bool ok)
{
	pthread_mutex_lock(&e->lock);
	e->stage_reached = stage;
	e->stage_ok = ok;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
}

/* Wait until @e's thread has reached @stage or failed. @return its ok. */
static bool wait_stage(struct zr_uring_ent *e, int stage)
{
	bool ok;

	pthread_mutex_lock(&e->lock);
	while (e->stage_reached < stage && e->stage_ok)
		pthread_cond_wait(&e->cond, &e->lock);
	ok = e->stage_ok;
	pthread_mutex_unlock(&e->lock);
	return ok;
}

/* Wait for zr_uring_go(). @return true to go on, false to give up. */
static bool wait_gate(void)
{
	int g;

	pthread_mutex_lock(&gate_lock);
	while (gate == 0)
		pthread_cond_wait(&gate_cond, &gate_lock);
	g = gate;
	pthread_mutex_unlock(&gate_lock);
	return g > 0;
}

/*
 * Register @e's entry and poll the stop eventfd: both SQEs are submitted
 * before this returns (the kernel registers the entry in the submitting
 * call; one it refuses completes at once, for the loop to report).
 * @return 0, or -errno of io_uring_enter (nothing is in flight then).
 */
static int ring_register(struct zr_uring_ent *e)
{
	struct io_uring_sqe *sqe;
	int rc;

	sqe = sqe_get(e);
	sqe->opcode = IORING_OP_POLL_ADD;
	sqe->fd = stop_fd;
	sqe->poll32_events = POLLIN;
	sqe->user_data = TAG_STOP;
	sqe_cmd(e, RING_CMD_REGISTER, 0);
	do {
		rc = sys_enter(e->ring_fd, 2, 0, 0, NULL, 0);
	} while (rc < 0 && (errno == EINTR || errno == EAGAIN || errno == EBUSY));
	return rc == 2 ? 0 : rc < 0 ? -errno : -EIO;
}

/*
 * Before the INIT reply: whether the kernel lets this daemon send FUSE
 * commands through io_uring at all. A REGISTER refused by io_uring or a
 * security module (security_uring_cmd()) would not send the kernel back
 * to /dev/fuse, only one FUSE itself refuses does; so one is sent now,
 * which FUSE, past those checks, answers EAGAIN while the connection has
 * no INIT reply. @return 0 when allowed, else what refused it.
 */
static int probe(struct zr_uring_ent *e)
{
	uint64_t tag;
	int rc, res;

	sqe_cmd(e, RING_CMD_REGISTER, 0);
	rc = ring_wait(e, 1, 0, &tag, &res);
	if (rc)
		return rc;
	return res == -EAGAIN ? 0 : res < 0 ? res : -EPROTO;
}

/*
 * The ring threads' scheduling class (sched_main()). A request's caller
 * sleeps on its CPU, and the ring thread pinned there serves it; the reply
 * wakes the caller while the ring thread still runs, so the scheduler may
 * move the caller to the other CPU if it is idle, and its next request
 * goes to the queue there (in some periods of the host a lone loop of
 * open, fstat, read and close took 28-32 us an iteration so, against 16-17
 * through /dev/fuse). At SCHED_IDLE a ring thread does not count as
 * running, so the caller stays, and takes the CPU back at once; but a
 * pinned SCHED_IDLE thread gets almost nothing of a CPU that other work
 * keeps busy (weight 3 against 1024), and so neither do its requests, nor
 * whoever waits for a lock it holds. So sched_main() switches, every
 * ZR_SCHED_PERIOD_MS:
 *  - at SCHED_OTHER, to SCHED_IDLE once requests come, every CPU was idle
 *    at least ZR_SCHED_IDLE_PCT of the last ZR_SCHED_LOOK_MS (/proc/stat:
 *    a CPU-bound process anywhere keeps them all at SCHED_OTHER), and a
 *    dwell time has passed since the last switch back;
 *  - at SCHED_IDLE, back to SCHED_OTHER as soon as one ring thread looks
 *    starved: it waited to run (run_delay, /proc/self/task/TID/schedstat)
 *    more than ZR_SCHED_STARVED_NS per request it served in the period,
 *    and more than ZR_SCHED_STARVED_MIN_NS in all (a thread that serves
 *    the requests nobody waits for, RELEASEs and WRITEs, while tar runs
 *    on its CPU waited 1.6-2.7 ms of 10 in an untar: not starved);
 *    or it is runnable and has not run since the last look (state R in
 *    its stat file at both looks, the same run count: run_delay grows
 *    only once it runs); or it has held the same request since the last
 *    look (a long request, or one stuck behind a lock or the CPU);
 *  - at SCHED_IDLE, back to SCHED_OTHER after ZR_SCHED_QUIET_END_MS
 *    without a request, so that the next burst starts there.
 * The dwell doubles (up to ZR_SCHED_DWELL_MAX_MS) each time SCHED_IDLE
 * lasted less than a second, and starts again from ZR_SCHED_DWELL_MIN_MS
 * once it lasted longer. A stall is thus one period or two, once per dwell.
 * The period is ZR_SCHED_QUIET_MS while no request comes at SCHED_OTHER.
 * Without /proc/stat, or when a thread may not go back from SCHED_IDLE
 * (RLIMIT_NICE), the threads stay at SCHED_OTHER.
 */
#define ZR_SCHED_PERIOD_MS 10
#define ZR_SCHED_QUIET_MS 100
#define ZR_SCHED_QUIET_END_MS 1000
#define ZR_SCHED_STARVED_NS 50000
#define ZR_SCHED_STARVED_MIN_NS 5000000
#define ZR_SCHED_IDLE_PCT 20
#define ZR_SCHED_LOOK_MS 100
#define ZR_SCHED_DWELL_MIN_MS 500
#define ZR_SCHED_DWELL_MAX_MS 8000

static bool sched_idle;			/* atomic (seq_cst), sched_main() writes:
					 * the ring threads are at SCHED_IDLE */
static uint64_t n_sched_switches;	/* relaxed atomic: switches either way */
static pthread_mutex_t sched_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sched_cond;	/* (CLOCK_MONOTONIC) */
static bool sched_stop;			/* sched_lock */
static bool sched_started;		/* written by the thread that took the
					 * INIT reply, then by zr_uring_stop()'s
					 * (after libfuse joined that one) */
static pthread_t sched_tid;

/* Put the thread @tid (0: the caller) at SCHED_IDLE or back at SCHED_OTHER.
 * @return 0 or -errno. */
static int set_class(int tid, bool idle)
{
	struct sched_param sp = { .sched_priority = 0 };

	return sched_setscheduler(tid, idle ? SCHED_IDLE : SCHED_OTHER, &sp) ? -errno : 0;
}

/*
 * Set the flag, then every ring thread that has published its id, to
 * @idle (sched_main() alone calls this, or zr_uring_stop() once it ended).
 * No lock: a thread starting at SCHED_IDLE could be preempted holding it,
 * and the switch back would wait behind it. class_join() publishes the id
 * before it reads the flag, and reads it again after it set its class, so
 * either this sees the id or the thread sees the flag (seq_cst), and a
 * thread whose own change crossed this one's sets itself again.
 */
static void set_all(bool idle)
{
	__atomic_store_n(&sched_idle, idle, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&n_sched_switches, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < n_ents; i++) {
		int tid = __atomic_load_n(&ents[i].os_tid, __ATOMIC_SEQ_CST);

		if (tid > 0)
			(void)set_class(tid, idle);
	}
}

/* A ring thread starts (@tid its id) or ends (0): publish it, and take the
 * class of the moment (a thread grown by one at SCHED_IDLE inherits it). */
static void class_join(struct zr_uring_ent *e, int tid)
{
	bool want;

	__atomic_store_n(&e->os_tid, tid, __ATOMIC_SEQ_CST);
	if (!tid)
		return;
	do {
		want = __atomic_load_n(&sched_idle, __ATOMIC_SEQ_CST);
		(void)set_class(0, want);
	} while (__atomic_load_n(&sched_idle, __ATOMIC_SEQ_CST) != want);
}

/* What sched_main() saw of one ring thread at its last look. */
struct sched_watch {
	int tid;			/* the thread the fds are of, 0 none */
	int stat_fd, sched_fd;		/* its /proc stat and schedstat */
	uint64_t delay, runs, served, unique;
	bool runnable;
};

static void watch_close(struct sched_watch *w)
{
	if (w->stat_fd >= 0)
		close(w->stat_fd);
	if (w->sched_fd >= 0)
		close(w->sched_fd);
	memset(w, 0, sizeof(*w));
	w->stat_fd = w->sched_fd = -1;
}

/* Read thread @tid's /proc/self/task/TID/@what through *@fd (opened on
 * first use) into @buf. @return false if it cannot be read. */
static bool proc_read(int *fd, int tid, const char *what, char *buf, size_t size)
{
	ssize_t n;

	if (*fd < 0) {
		snprintf(buf, size, "/proc/self/task/%d/%s", tid, what);
		*fd = open(buf, O_RDONLY | O_CLOEXEC);
		if (*fd < 0)
			return false;
	}
	n = pread(*fd, buf, size - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = 0;
	return true;
}

/*
 * Look at ring thread @e (its watch @w) again. @return whether it looks
 * starved since the last look (see above); a thread seen for the first
 * time, or whose files cannot be read, does not.
 */
static bool watch_starved(struct zr_uring_ent *e, struct sched_watch *w)
{
	int tid = __atomic_load_n(&e->os_tid, __ATOMIC_SEQ_CST);
	uint64_t served = __atomic_load_n(&e->served, __ATOMIC_RELAXED);
	uint64_t unique = __atomic_load_n(&e->unique, __ATOMIC_ACQUIRE);
	unsigned long long exec, delay, runs;
	bool first, runnable, starved;
	char buf[512], *p;

	if (tid != w->tid) {
		watch_close(w);
		w->tid = tid;
	}
	if (tid <= 0)
		return false;
	first = w->runs == 0;
	if (!proc_read(&w->sched_fd, tid, "schedstat", buf, sizeof(buf)) ||
	    sscanf(buf, "%llu %llu %llu", &exec, &delay, &runs) != 3)
		return false;
	(void)exec;
	if (!proc_read(&w->stat_fd, tid, "stat", buf, sizeof(buf)) ||
	    !(p = strrchr(buf, ')')) || p[1] != ' ')
		return false;
	runnable = p[2] == 'R';
	starved = !first &&
		  ((delay > w->delay &&
		    delay - w->delay > ZR_MAX(ZR_SCHED_STARVED_MIN_NS,
					      ZR_SCHED_STARVED_NS * (served - w->served + 1))) ||
		   (runnable && w->runnable && runs == w->runs) ||
		   (unique && unique == w->unique));
	w->delay = delay;
	w->runs = runs ? runs : 1;
	w->served = served;
	w->unique = unique;
	w->runnable = runnable;
	return starved;
}

/*
 * The lowest share (percent) of idle time of the CPUs since the last call,
 * from /proc/stat's cpuN lines read through @fd into @buf (@size bytes);
 * @prev holds two counters per CPU, @ncpu of them. @return the share, or
 * -1 if it cannot be read (or there is no earlier call to compare with).
 */
static int min_idle_pct(int fd, char *buf, size_t size, uint64_t *prev, unsigned ncpu)
{
	ssize_t n = pread(fd, buf, size - 1, 0);
	uint64_t idle, total;
	int lowest = 101;
	const char *p;
	unsigned cpu;

	if (n <= 0)
		return -1;
	buf[n] = 0;
	for (p = buf; (p = zr_proc_stat_cpu(p, &cpu, &idle, &total));) {
		if (cpu >= ncpu)
			continue;
		/* (iowait is idle time too, and may go back: clamped) */
		if (prev[2 * cpu + 1] && total > prev[2 * cpu + 1]) {
			int64_t d = (int64_t)(idle - prev[2 * cpu]);
			int pct = d <= 0 ? 0 : (int)((uint64_t)d * 100 / (total - prev[2 * cpu + 1]));

			lowest = ZR_MIN(lowest, ZR_MIN(pct, 100));
		} else if (prev[2 * cpu + 1]) {
			lowest = 0;	/* no tick counted: cannot tell */
		}
		prev[2 * cpu] = idle;
		prev[2 * cpu + 1] = total;
	}
	return lowest > 100 ? -1 : lowest;
}

static void *sched_main(void *arg)
{
	unsigned ncpu = n_ents / ZR_URING_MAX_PER_QUEUE;
	size_t bufsize = 4096 + (size_t)ncpu * 160;
	struct sched_watch *w = calloc(n_ents, sizeof(*w));
	uint64_t *prev = calloc(2 * (size_t)ncpu, sizeof(*prev));
	char *buf = malloc(bufsize);
	uint64_t last_req = 0, t_switch = zr_now_ms(), t_req = t_switch;
	uint64_t dwell = ZR_SCHED_DWELL_MIN_MS, look_t = t_switch;
	unsigned period = ZR_SCHED_QUIET_MS;
	int stat_fd = -1, idle_pct = -1;
	struct timespec dl;
	bool stop = false;

	(void)arg;
	pthread_setname_np(pthread_self(), "zramfs-rsched");
	if (w)
		for (unsigned i = 0; i < n_ents; i++)
			w[i].stat_fd = w[i].sched_fd = -1;
	stat_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	if (!w || !prev || !buf || stat_fd < 0) {
		zr_log(ZR_LOG_INFO, "uring: no /proc/stat: ring threads stay at SCHED_OTHER");
		goto out;
	}
	(void)min_idle_pct(stat_fd, buf, bufsize, prev, ncpu);	/* the first counts */
	/* a thread that may not leave SCHED_IDLE (RLIMIT_NICE, a security
	 * module) would be stuck there: try the way back on this one first */
	if (set_class(0, true) != 0 || set_class(0, false) != 0) {
		zr_log(ZR_LOG_INFO, "uring: cannot switch threads to SCHED_IDLE and back: ring threads stay at SCHED_OTHER");
		goto out;
	}
	while (!stop) {
		uint64_t req, dreq, now;
		bool idle, starved = false;
		unsigned who = 0;

		zr_deadline(&dl, CLOCK_MONOTONIC, period * 1000000ull);
		pthread_mutex_lock(&sched_lock);
		while (!sched_stop &&
		       pthread_cond_timedwait(&sched_cond, &sched_lock, &dl) != ETIMEDOUT)
			;
		stop = sched_stop;
		pthread_mutex_unlock(&sched_lock);
		now = zr_now_ms();
		req = __atomic_load_n(&n_requests, __ATOMIC_RELAXED);
		dreq = req - last_req;
		last_req = req;
		if (dreq)
			t_req = now;
		idle = __atomic_load_n(&sched_idle, __ATOMIC_RELAXED);
		for (unsigned i = 0; idle && i < n_ents; i++)
			if (watch_starved(&ents[i], &w[i]) && !starved) {
				starved = true;
				who = i;
			}
		if (now - look_t >= ZR_SCHED_LOOK_MS) {
			idle_pct = min_idle_pct(stat_fd, buf, bufsize, prev, ncpu);
			look_t = now;
		}
		if (idle && now - t_req >= ZR_SCHED_QUIET_END_MS) {
			zr_log(ZR_LOG_DEBUG, "uring: no request for %llu ms: ring threads at SCHED_OTHER",
			       (unsigned long long)(now - t_req));
			set_all(false);
			dwell = ZR_SCHED_DWELL_MIN_MS;
			t_switch = now;
		} else if (idle && starved) {
			zr_log(ZR_LOG_DEBUG, "uring: queue %u's thread looks starved: ring threads back at SCHED_OTHER",
			       ents[who].qid);
			set_all(false);
			dwell = now - t_switch < 1000 ? ZR_MIN(dwell * 2, ZR_SCHED_DWELL_MAX_MS)
						      : ZR_SCHED_DWELL_MIN_MS;
			t_switch = now;
			idle_pct = -1;	/* look again from now */
			look_t = now;
			(void)min_idle_pct(stat_fd, buf, bufsize, prev, ncpu);
		} else if (!idle && dreq && now - t_switch >= dwell &&
			   idle_pct >= ZR_SCHED_IDLE_PCT) {
			zr_log(ZR_LOG_DEBUG, "uring: every CPU at least %d%% idle: ring threads at SCHED_IDLE",
			       idle_pct);
			set_all(true);
			t_switch = now;
			for (unsigned i = 0; i < n_ents; i++)
				w[i].runs = 0;	/* the next look compares with none */
		}
		period = dreq || __atomic_load_n(&sched_idle, __ATOMIC_RELAXED) ? ZR_SCHED_PERIOD_MS
									    : ZR_SCHED_QUIET_MS;
	}
out:
	if (w)
		for (unsigned i = 0; i < n_ents; i++)
			watch_close(&w[i]);
	if (stat_fd >= 0)
		close(stat_fd);
	free(w);
	free(prev);
	free(buf);
	return NULL;
}

/* Start sched_main() (the rings serve). */
static void sched_start(void)
{
	zr_cond_init_monotonic(&sched_cond);
	sched_stop = false;
	sched_started = pthread_create(&sched_tid, NULL, sched_main, NULL) == 0;
	if (!sched_started)
		zr_log(ZR_LOG_INFO, "uring: no scheduling thread: ring threads stay at SCHED_OTHER");
}

/* Stop sched_main() and put every ring thread back at SCHED_OTHER. */
static void sched_end(void)
{
	if (!sched_started)
		return;
	pthread_mutex_lock(&sched_lock);
	sched_stop = true;
	pthread_cond_signal(&sched_cond);
	pthread_mutex_unlock(&sched_lock);
	pthread_join(sched_tid, NULL);
	sched_started = false;
	pthread_cond_destroy(&sched_cond);
	set_all(false);
}

static void ring_run(struct zr_uring_ent *e);

static void *ring_main(void *arg)
{
	struct zr_uring_ent *e = arg;

	class_join(e, (int)gettid());
	ring_run(e);
	class_join(e, 0);
	return NULL;
}

/* ring_main()'s work: set up, register, serve until stopped. */
static void ring_run(struct zr_uring_ent *e)
{
	bool registered = false, bulk;
	char name[16];
	int rc, res = 0;
	uint64_t tag = 0;

	cur = e;
	snprintf(name, sizeof(name), "zramfs-ring%u", e->qid);
	pthread_setname_np(pthread_self(), name);
	e->pinned = pin(e->qid);
	e->unpinned = false;
	e->bulk_run = e->small_run = 0;
	/* a queue's first threads find their ring made (disabled) before the
	 * INIT reply; the threads a queue grows by make theirs */
	rc = e->ring_fd >= 0 ? ring_enable(e) : ring_setup(e, false);
	if (rc) {
		zr_log(ZR_LOG_WARNING, "uring: queue %u: cannot set up a ring: %s",
		       e->qid, strerror(-rc));
		ring_teardown(e);
		say_stage(e, 1, false);
		return;
	}
	if (e == &ents[0] && (rc = probe(e)) != 0) {
		zr_log(ZR_LOG_WARNING, "uring: the kernel refuses io_uring commands on /dev/fuse: %s",
		       strerror(-rc));
		ring_teardown(e);
		say_stage(e, 1, false);
		return;
	}
	say_stage(e, 1, true);
	if (!wait_gate()) {
		ring_teardown(e);
		return;
	}
	rc = ring_register(e);
	if (rc) {
		zr_log(ZR_LOG_ERR, "uring: queue %u: cannot submit the REGISTER: %s",
		       e->qid, strerror(-rc));
		ring_teardown(e);
		say_stage(e, 2, false);
		return;
	}
	idle_enter(e);
	/* a REGISTER refused completes at once: its CQE is there already */
	if (*e->cq_head != __atomic_load_n(e->cq_tail, __ATOMIC_ACQUIRE)) {
		struct io_uring_cqe *cqe = &e->cqes[*e->cq_head & *e->cq_mask];

		say_stage(e, 2, !(cqe->user_data == TAG_CMD && cqe->res < 0));
	} else {
		say_stage(e, 2, true);
	}
	rc = ring_wait(e, 0, 0, &tag, &res);
	for (;;) {
		if (rc) {
			zr_log(ZR_LOG_ERR, "uring: queue %u: io_uring_enter: %s",
			       e->qid, strerror(-rc));
			break;
		}
		if (tag == TAG_STOP)
			break;
		idle_leave(e);
		if (res < 0) {
			if (res == -ENOTCONN || res == -ECONNABORTED)
				break;
			if (!registered) {
				/* the kernel went back to /dev/fuse if the
				 * rings were not ready yet */
				zr_log(ZR_LOG_WARNING, "uring: queue %u: REGISTER refused: %s",
				       e->qid, strerror(-res));
				break;
			}
			/* the request went away (aborted); so did the entry:
			 * register it again */
			zr_log(ZR_LOG_INFO, "uring: queue %u: commit failed: %s; registering again",
			       e->qid, strerror(-res));
			registered = false;
			place(e, false, true);	/* (the wait has no time limit) */
			sqe_cmd(e, RING_CMD_REGISTER, 0);
			idle_enter(e);
			rc = ring_wait(e, 1, 0, &tag, &res);
			continue;
		}
		if (!registered) {
			registered = true;
			__atomic_store_n(&active, true, __ATOMIC_RELEASE);
		}
		/* keep an entry of this queue waiting for requests while this
		 * one is served: a request queued while none waits is fetched
		 * only by a later commit, not by an entry registered after it */
		if (__atomic_load_n(&queues[e->qid].idle, __ATOMIC_ACQUIRE) == 0)
			grow_queue(e->qid, false);
		bulk = serve(e);
		sqe_cmd(e, RING_CMD_COMMIT_AND_FETCH, e->hdr->ent.commit_id);
		idle_enter(e);
		rc = ring_next(e, 1, bulk, &tag, &res);
	}
	idle_leave(e);
	ring_teardown(e);
}

/* Find the entry holding the request @unique. */
static struct zr_uring_ent *find_ent(uint64_t unique)
{
	if (!unique)
		return NULL;
	if (cur && __atomic_load_n(&cur->unique, __ATOMIC_ACQUIRE) == unique)
		return cur;
	for (unsigned i = 0; i < n_ents; i++)
		if (__atomic_load_n(&ents[i].unique, __ATOMIC_ACQUIRE) == unique)
			return &ents[i];
	return NULL;
}

/**
 * zr_uring_reply() - take a reply libfuse writes, if it answers a request
 * a ring entry holds: copy it into that entry's buffers for the commit.
 * @iov, @count: the reply, as given to the session's writev hook.
 * @res: receives what writev would have returned (its length, or -errno).
 * @return true when the reply was taken; false: it goes to /dev/fuse.
 */
bool zr_uring_reply(const struct iovec *iov, int count, ssize_t *res)
{
	const struct fuse_out_header *out;
	struct zr_uring_ent *e;
	size_t len = 0, off = 0;
	char *dst;

	if (!__atomic_load_n(&active, __ATOMIC_ACQUIRE) || count < 1 ||
	    iov[0].iov_len < sizeof(*out))
		return false;
	out = iov[0].iov_base;
	e = find_ent(out->unique);
	if (!e)
		return false;
	for (int i = 1; i < count; i++)
		len += iov[i].iov_len;
	if (len > e->payload_len) {
		/* cannot happen: replies are bounded by max_write/max_pages */
		struct fuse_out_header err = {
			.len = sizeof(err), .error = -EIO, .unique = out->unique,
		};

		zr_log(ZR_LOG_ERR, "uring: reply of %zu bytes does not fit", len);
		memcpy(e->hdr->in_out, &err, sizeof(err));
		len = 0;
	} else {
		struct fuse_out_header oh = *out;

		oh.len = (uint32_t)(sizeof(oh) + len);
		memcpy(e->hdr->in_out, &oh, sizeof(oh));
	}
	dst = e->req_payload ? e->stage : e->payload;
	for (int i = 1; i < count && off < len; i++) {
		if (iov[i].iov_base != dst + off)	/* (may lie in the payload) */
			memmove(dst + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	pthread_mutex_lock(&e->lock);
	e->staged = dst == e->stage;
	e->reply_len = (uint32_t)len;
	e->replied = true;
	pthread_mutex_unlock(&e->lock);
	*res = (ssize_t)(sizeof(*out) + len);
	return true;
}

/**
 * zr_uring_reply_buf() - a buffer a READ's reply may be built in, if this
 * thread serves one from a ring: the entry's payload buffer, which the
 * reply then need not be copied into. @return it, or NULL (not a ring
 * thread, the request has a payload of its own, or @size does not fit).
 */
void *zr_uring_reply_buf(size_t size)
{
	if (!cur || !__atomic_load_n(&cur->unique, __ATOMIC_RELAXED) ||
	    cur->req_payload || size > cur->payload_len)
		return NULL;
	if (size >= ZR_TRIM_MIN)
		cur->big = true;	/* (a scratch buffer too: copy_file_range) */
	return cur->payload;
}

/**
 * zr_uring_may_wait() - say that the request this thread serves is about
 * to wait for other requests: the WRITEs of the dirty pages that a cache
 * invalidation makes the kernel launder, which it sends to the queue of
 * the CPU this thread runs on. On a ring thread, this makes sure the queue
 * has another entry waiting for a request, and starts a thread for one
 * when none is (up to ZR_URING_MAX_PER_QUEUE threads a queue). Elsewhere it
 * does nothing.
 * @return true, or false when no other entry can be had: the caller must
 * then not wait (it would deadlock, as single-threaded).
 */
bool zr_uring_may_wait(void)
{
	struct zr_uring_ent *e = cur;
	unsigned qid;

	if (!e)
		return true;
	/* at exit the siblings stop at their next completion: none may be
	 * left to serve the WRITEs (helper-12) */
	if (__atomic_load_n(&stopping, __ATOMIC_ACQUIRE))
		return false;
	qid = e->qid;
	if (e->unpinned || !e->pinned) {
		/*
		 * Not on its queue's CPU, maybe (place() widened it, or it
		 * could not be pinned): the WRITEs go to the queue of the CPU
		 * it runs on when it asks, so it stays there until place()
		 * pins it back (helper-43).
		 */
		int cpu = sched_getcpu();

		if (cpu < 0 || (unsigned)cpu >= n_ents / ZR_URING_MAX_PER_QUEUE ||
		    !pin((unsigned)cpu))
			return false;
		if (!e->unpinned) {
			e->unpinned = true;
			__atomic_add_fetch(&n_unpinned, 1, __ATOMIC_RELAXED);
		}
		qid = (unsigned)cpu;
	}
	if (__atomic_load_n(&queues[qid].idle, __ATOMIC_ACQUIRE) > 0)
		return true;
	return grow_queue(qid, true);
}

/*
 * Start another thread for queue @qid, unless it has ZR_URING_MAX_PER_QUEUE
 * or the rings are stopping. @wait: until its entry is registered (the
 * kernel registers it in the submitting call).
 * @return whether a thread started (and, with @wait, registered).
 */
static bool grow_queue(unsigned qid, bool wait)
{
	struct zr_uring_queue *q = &queues[qid];
	struct zr_uring_ent *n;

	if (__atomic_load_n(&q->started, __ATOMIC_RELAXED) >= ZR_URING_MAX_PER_QUEUE)
		return false;	/* (checked again under the lock) */
	pthread_mutex_lock(&grow_lock);
	if (stopping || q->started >= ZR_URING_MAX_PER_QUEUE) {
		pthread_mutex_unlock(&grow_lock);
		return false;
	}
	n = &ents[qid * ZR_URING_MAX_PER_QUEUE + q->started];
	__atomic_store_n(&q->started, q->started + 1, __ATOMIC_RELAXED);
	if (pthread_create(&n->tid, NULL, ring_main, n) != 0) {
		pthread_mutex_unlock(&grow_lock);
		return false;
	}
	n->started = true;
	__atomic_add_fetch(&n_threads, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&grow_lock);
	zr_log(ZR_LOG_DEBUG, "uring: queue %u: thread %u started", qid, q->started);
	return !wait || wait_stage(n, 2);
}

/** zr_uring_stats() - what the rings did so far, for .zramfs/stats
 * (each field read on its own: no snapshot across them). */
void zr_uring_stats(struct zr_uring_stats *out)
{
	out->requests = __atomic_load_n(&n_requests, __ATOMIC_RELAXED);
	/* the queues' first threads and those they grew by */
	out->threads = __atomic_load_n(&n_threads, __ATOMIC_RELAXED);
	out->unpins = __atomic_load_n(&n_unpins, __ATOMIC_RELAXED);
	out->repins = __atomic_load_n(&n_repins, __ATOMIC_RELAXED);
	out->unpinned = __atomic_load_n(&n_unpinned, __ATOMIC_RELAXED);
	out->trims = __atomic_load_n(&n_trims, __ATOMIC_RELAXED);
	out->sched_idle = __atomic_load_n(&sched_idle, __ATOMIC_RELAXED);
	out->sched_switches = __atomic_load_n(&n_sched_switches, __ATOMIC_RELAXED);
}

/** Whether requests come through the rings (for the stats and session.c). */
bool zr_uring_active(void)
{
	return __atomic_load_n(&active, __ATOMIC_ACQUIRE);
}

static void ent_free(struct zr_uring_ent *e)
{
	ring_teardown(e);	/* (made by zr_uring_prepare(), no thread started) */
	if (e->area && e->area != MAP_FAILED)
		munmap(e->area, ZR_URING_LEAD + e->payload_len);
	if (e->stage && e->stage != MAP_FAILED)
		munmap(e->stage, e->payload_len);
	free(e->hdr);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
}

/* The number of queues the kernel makes: one per possible CPU (the last
 * number in /sys/devices/system/cpu/possible, plus one), or 0 when that
 * cannot be read: a queue left without an entry would hold every request
 * back, so no guess. */
static unsigned possible_cpus(void)
{
	char buf[256];
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	long n = 0;

	if (f) {
		if (fgets(buf, sizeof(buf), f)) {
			char *p = buf + strcspn(buf, "\n");

			while (p > buf && (p[-1] >= '0' && p[-1] <= '9'))
				p--;
			n = strtol(p, NULL, 10) + 1;
		}
		fclose(f);
	}
	return n < 1 || n > 65536 ? 0 : (unsigned)n;
}

/* Free what zr_uring_prepare() made, once no thread runs. */
static void free_all(void)
{
	pthread_rwlock_wrlock(&ents_lock);
	for (unsigned i = 0; i < n_ents; i++)
		ent_free(&ents[i]);
	free(ents);
	free(queues);
	ents = NULL;
	queues = NULL;
	n_ents = 0;
	pthread_rwlock_unlock(&ents_lock);
	if (stop_fd >= 0)
		close(stop_fd);
	stop_fd = -1;
}

/**
 * zr_uring_prepare() - get FUSE over io_uring ready before the INIT reply
 * asks for it: buffers, rings (disabled) and the first threads of every
 * queue, which wait at a gate. Once the kernel has taken such a reply, it
 * holds every request back until each queue has an entry, so whatever can
 * fail is done before: if this fails, the reply must not ask.
 * @max_payload: the largest payload the kernel will exchange (max of
 * max_write and max_pages pages, at least 8 KiB).
 * @return 0, then zr_uring_go() must follow; or -errno.
 */
int zr_uring_prepare(struct zr_fs *fs, size_t max_payload)
{
	unsigned ncpu = possible_cpus();
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t plen = (max_payload + page - 1) & ~(page - 1);
	unsigned n = ncpu * ZR_URING_MAX_PER_QUEUE;
	int rc = 0;

	if (ents)
		return -EALREADY;
	if (!ncpu)
		return -ENOENT;	/* /sys/devices/system/cpu/possible */
	gate = 0;
	stopping = false;
	/* where an unpinned ring thread may run: where the daemon may (a
	 * taskset it was started under holds) */
	can_widen = zr_daemon_cpus(&any_cpu) > 1;
	stop_fd = eventfd(0, EFD_CLOEXEC);
	if (stop_fd < 0)
		return -errno;
	ents = calloc(n, sizeof(*ents));
	queues = calloc(ncpu, sizeof(*queues));
	if (!ents || !queues) {
		free_all();
		return -ENOMEM;
	}
	/* every slot's buffers now (address space only: pages come as
	 * requests fill them), so that a queue grows without allocating */
	for (unsigned i = 0; i < n; i++) {
		struct zr_uring_ent *e = &ents[i];

		e->fs = fs;
		e->qid = i / ZR_URING_MAX_PER_QUEUE;
		e->ring_fd = -1;
		e->payload_len = plen;
		e->stage_ok = true;
		pthread_mutex_init(&e->lock, NULL);
		pthread_cond_init(&e->cond, NULL);
		n_ents = i + 1;
		e->hdr = aligned_alloc(64, (sizeof(*e->hdr) + 63) & ~(size_t)63);
		e->area = mmap(NULL, ZR_URING_LEAD + plen, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		e->stage = mmap(NULL, plen, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (!e->hdr || e->area == MAP_FAILED || e->stage == MAP_FAILED) {
			free_all();
			return -ENOMEM;
		}
		memset(e->hdr, 0, sizeof(*e->hdr));
		e->payload = e->area + ZR_URING_LEAD;
		e->iov[0].iov_base = e->hdr;
		e->iov[0].iov_len = sizeof(*e->hdr);
		e->iov[1].iov_base = e->payload;
		e->iov[1].iov_len = plen;
	}
	pthread_mutex_lock(&grow_lock);
	for (unsigned q = 0; q < ncpu && !rc; q++) {
		for (unsigned k = 0; k < ZR_URING_PER_QUEUE && !rc; k++) {
			struct zr_uring_ent *e = &ents[q * ZR_URING_MAX_PER_QUEUE + k];

			rc = ring_setup(e, true);
			if (!rc && pthread_create(&e->tid, NULL, ring_main, e) != 0)
				rc = -EAGAIN;
			if (!rc) {
				e->started = true;
				__atomic_add_fetch(&n_threads, 1, __ATOMIC_RELAXED);
			}
		}
		queues[q].started = ZR_URING_PER_QUEUE;
	}
	pthread_mutex_unlock(&grow_lock);
	for (unsigned i = 0; i < n_ents && !rc; i++)
		if (ents[i].started && !wait_stage(&ents[i], 1))
			rc = -EIO;	/* the thread said why */
	if (rc) {
		zr_uring_go(false);
		return rc;
	}
	zr_log(ZR_LOG_INFO, "uring: %u queues, %u threads each (up to %u), payload %zu KiB",
	       ncpu, ZR_URING_PER_QUEUE, ZR_URING_MAX_PER_QUEUE, plen / 1024);
	return 0;
}

/*
 * Send the kernel back to /dev/fuse while the rings are not ready: a
 * REGISTER that FUSE itself refuses (a queue number past its queues) does
 * that, from a ring of this thread's own. Requests then no longer wait for
 * a queue that will get no entry.
 */
static void fall_back(void)
{
	struct zr_uring_ent t;
	uint64_t tag;
	int res = 0;

	memset(&t, 0, sizeof(t));
	t.fs = ents[0].fs;
	t.ring_fd = -1;
	t.iov[0] = ents[0].iov[0];
	t.iov[1] = ents[0].iov[1];
	t.qid = 0xffff;
	if (ring_setup(&t, false) != 0) {
		zr_log(ZR_LOG_ERR, "uring: cannot send the kernel back to /dev/fuse: requests wait; unmount");
		return;
	}
	sqe_cmd(&t, RING_CMD_REGISTER, 0);
	if (ring_wait(&t, 1, 0, &tag, &res) != 0 || res != -EINVAL)
		zr_log(ZR_LOG_ERR, "uring: the kernel did not go back to /dev/fuse (%d): requests wait; unmount",
		       res);
	ring_teardown(&t);
}

/*
 * After the gate opened: wait until each first thread has sent its
 * REGISTER, and give a queue none of whose first threads could another
 * thread. A queue still without an entry holds every request made on its
 * CPU back (the kernel waits for all queues); that is logged as an error.
 */
static void check_queues(void)
{
	unsigned nq = n_ents / ZR_URING_MAX_PER_QUEUE;

	for (unsigned q = 0; q < nq; q++) {
		bool ok = false;

		for (unsigned k = 0; k < ZR_URING_PER_QUEUE; k++) {
			struct zr_uring_ent *e = &ents[q * ZR_URING_MAX_PER_QUEUE + k];

			if (e->started && wait_stage(e, 2))
				ok = true;
		}
		if (!ok && !grow_queue(q, true)) {
			zr_log(ZR_LOG_ERR, "uring: queue %u has no entry: back to /dev/fuse", q);
			fall_back();
			return;
		}
	}
}

/**
 * zr_uring_go() - after zr_uring_prepare(): @ok, the kernel has taken the
 * INIT reply that asked for io_uring, and the threads register their
 * entries; else (the reply failed, or preparing did) they end, and all is
 * freed.
 */
void zr_uring_go(bool ok)
{
	pthread_mutex_lock(&gate_lock);
	gate = ok ? 1 : -1;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
	if (!ents)
		return;
	if (ok) {
		check_queues();
		sched_start();
		return;
	}
	for (unsigned i = 0; i < n_ents; i++)
		if (ents[i].started)
			pthread_join(ents[i].tid, NULL);
	free_all();
}

/* Whether a ring thread is serving a request (its entry holds one). */
static bool any_busy(void)
{
	for (unsigned i = 0; i < n_ents; i++)
		if (__atomic_load_n(&ents[i].unique, __ATOMIC_ACQUIRE))
			return true;
	return false;
}

/**
 * zr_uring_busy() - whether a ring thread is serving a request, for the
 * drain of a session that ends on a signal (zr_session_drained()). Safe
 * from any thread, also while zr_uring_stop() frees the rings.
 * @return true or false (false when there are no rings)
 */
bool zr_uring_busy(void)
{
	bool busy;

	pthread_rwlock_rdlock(&ents_lock);
	/* (active: zr_uring_prepare() has made the entries, before) */
	busy = __atomic_load_n(&active, __ATOMIC_ACQUIRE) && any_busy();
	pthread_rwlock_unlock(&ents_lock);
	return busy;
}

/**
 * zr_uring_stop() - stop the ring threads and free their buffers. Requests
 * still queued for the rings wait for the unmount, which fails them.
 * The threads serve on for up to ZR_URING_STOP_MS while some of them are
 * busy (one may wait for a WRITE another is to serve: an lseek, when the
 * loop ended on a signal with the mount still there), then end at their
 * next completion. One still busy after another ZR_URING_STOP_MS is left
 * behind, detached, with its buffers.
 * @return true when every thread ended (all is freed), false when one was
 * left behind: the caller must not free the session or the file system.
 */
bool zr_uring_stop(void)
{
	uint64_t one = 1, t0 = zr_now_ms();
	struct timespec dl;
	bool all = true;

	if (!ents)
		return true;
	/* no thread starts after this; those that did see the eventfd set */
	pthread_mutex_lock(&grow_lock);
	__atomic_store_n(&stopping, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&grow_lock);
	pthread_mutex_lock(&gate_lock);
	if (gate == 0) {	/* never opened: the threads just end */
		gate = -1;
		pthread_cond_broadcast(&gate_cond);
	}
	pthread_mutex_unlock(&gate_lock);
	sched_end();	/* (at SCHED_OTHER, the busy ones finish sooner) */
	while (any_busy() && zr_now_ms() - t0 < ZR_URING_STOP_MS)
		usleep(10000);
	if (stop_fd >= 0 && write(stop_fd, &one, sizeof(one)) != sizeof(one))
		zr_log(ZR_LOG_WARNING, "uring: cannot wake the ring threads: %s", strerror(errno));
	zr_deadline(&dl, CLOCK_MONOTONIC, ZR_URING_STOP_MS * 1000000ull);
	for (unsigned i = 0; i < n_ents; i++) {
		if (!ents[i].started)
			continue;
		if (pthread_clockjoin_np(ents[i].tid, NULL, CLOCK_MONOTONIC, &dl) != 0) {
			zr_log(ZR_LOG_WARNING, "uring: queue %u: a thread is still busy; left behind",
			       ents[i].qid);
			pthread_detach(ents[i].tid);
			all = false;
		}
	}
	/* a thread left behind still holds a request: its reply must still
	 * reach its entry (through /dev/fuse it would be refused, and the
	 * entry would answer EIO for it; helper-64) */
	if (all) {
		__atomic_store_n(&active, false, __ATOMIC_RELEASE);
		free_all();
	}
	return all;
}
