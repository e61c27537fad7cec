/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fs.h - internal interfaces of the zramfs daemon: options, inodes, the
 * bounded file-descriptor cache, the FUSE operations and the control files.
 *
 * Lock ordering (outermost first), for every file of the daemon:
 *   1. zr_inode.lock         (one file's data path: RMW, size, times)
 *   2. store locks           (zr_store.h: io mutex -> file lock -> pool)
 *   3. zr_fs.ns_lock         (names: aliases, parents; rwlock)
 *   4. zr_fs.fd_lock         (the fd cache and every zr_inode.fd field)
 *   5. zr_fs.itable_lock     (the inode table and every zr_inode.refs)
 *   6. zr_fs.subfs_lock      (innermost: the filesystems mounted inside
 *                             the backing directory, zr_data_note_subfs())
 * A store writeback callback runs under (2) and takes only (3)..(6); the
 * first one for a file on another mount also reads /proc/self/mountinfo
 * and opens that mount's root beneath the backing root, under (2).
 * A directory handle's zr_dirh.lock comes before all of these, and
 * zr_fs.dirh_lock is taken under it or alone (ops.c).
 * No lock is held while calling fuse_reply_*().
 */
#ifndef ZR_FS_H
#define ZR_FS_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <uthash.h>

struct zr_dirh;

#include "zr_store.h"

/* The hidden control directory at the mount root (reachable by name). */
#define ZR_CTL_NAME "zramfs"
#define ZR_CTL_DIRNAME ".zramfs"

enum zr_cache_mode {
	ZR_CACHE_WRITEBACK = 0,	/* tier holds dirty data, written back lazily */
	ZR_CACHE_WRITETHROUGH,	/* tier holds clean copies; writes go to disk at once */
	ZR_CACHE_NONE,		/* no tier: plain passthrough */
};

/* Options in force; filled by zr_options_parse(). */
struct zr_options {
	char *backing;		/* backing directory as given (for messages) */
	char *backing_real;	/* it absolute and resolved, once it is open:
				 * zr_options_resolve_backing(); NULL before */
	char *mountpoint;	/* mount point as given */
	char *size_str, *comp_str, *comp_level_str, *cold_comp_str;
	char *cold_level_str, *block_size_str, *min_saving_str, *policy_str;
	char *dirty_expire_str, *seq_cutoff_str, *cache_str, *high_wm_str;
	char *low_wm_str, *max_fds_str, *read_ahead_str, *max_read_str, *cpu_latency_str;
	char *busy_poll_str, *xattr_str, *uring_str, *stream_direct_str, *acl_str;
	struct zr_store_config store;	/* parsed store settings */
	uint64_t dirty_expire_ms;	/* writeback age of dirty data */
	uint64_t seq_cutoff;		/* bytes of sequential I/O that bypass the tier; 0 = off */
	enum zr_cache_mode cache;
	unsigned max_fds;		/* size of the fd cache */
	uint64_t read_ahead;		/* kernel read-ahead of the mount, bytes; 0 = its
					 * default (relaxed atomic: set to 0 when it
					 * cannot be written, session.c) */
	uint32_t max_read;		/* largest READ the kernel sends, bytes */
	int cpu_latency;		/* µs asked of PM QoS while busy; -1 = off */
	unsigned busy_poll;		/* µs a thread polls /dev/fuse while busy; 0 = off */
	bool no_xattr;			/* xattr=off: xattr requests answered ENOSYS */
	bool uring;			/* uring=on: ask for FUSE over io_uring */
	bool no_stream_direct;		/* stream_direct=off: streams never go with O_DIRECT */
	bool acl;			/* acl=on: the kernel enforces POSIX ACLs (the
					 * default, unless xattr=off or
					 * no_default_permissions; main() turns it off
					 * over a backing filesystem without ACLs when
					 * acl_str is NULL) */
	int foreground, debug, singlethread, show_help, show_version;
	int allow_other, allow_root, default_permissions, no_default_permissions, read_only;
	int over_self;			/* "zramfs DIR": mount over DIR itself */
};

/**
 * zr_options_parse() - parse argv into @o and the arguments handed to
 * libfuse (@fargs, which the caller frees with fuse_opt_free_args()).
 * @err: receives a message that names the problem and the allowed values.
 * The strings of @o are the caller's to free with zr_options_free(), after
 * a failure too (the ones parsed before it are kept).
 * @return 0, or -EINVAL.
 */
int zr_options_parse(int argc, char **argv, struct zr_options *o,
		     struct fuse_args *fargs, char *err, size_t errlen);

/**
 * zr_options_size_warning() - whether the budget of @o (size=) is more than
 * half of the memory there is: of @ram, the machine's physical RAM (0:
 * unknown), or of @limit, the memory limit of the daemon's cgroup
 * (UINT64_MAX: none), whichever is lower. A budget that large, with the
 * page cache and the daemon's own memory on top, invites the OOM killer.
 * @buf receives the warning (@len bytes at most) when there is one.
 * @return true when there is a warning.
 */
bool zr_options_size_warning(const struct zr_options *o, uint64_t ram,
			     uint64_t limit, char *buf, size_t len);

/**
 * zr_options_resolve_backing() - set @o->backing_real to the backing
 * directory's absolute path, symlinks, "." and ".." and extra slashes
 * resolved (realpath(3)), as it is at this moment; @o->backing keeps what
 * the user typed. Freed by zr_options_free().
 * @return 0, or -errno of realpath (-ENOENT...).
 */
int zr_options_resolve_backing(struct zr_options *o);

/** Free the strings of @o. */
void zr_options_free(struct zr_options *o);

/** Print the usage and every option with its default and unit. */
void zr_options_help(const char *prog);

/* A name of an inode: (parent, name). Hard links have several. */
struct zr_alias {
	struct zr_inode *parent;	/* holds a reference on parent */
	struct zr_alias *next;
	char name[];
};

struct zr_inode_key {
	dev_t dev;
	ino_t ino;
};

/* Threads that make stream copies with idle CPU time (data.c: fill_main) */
#define ZR_FILL_THREADS 1

/* Locks striped over files for their mtime stamps (zr_stamp_lock()) */
#define ZR_STAMP_LOCKS 64

/* Ends of a file's last accesses that a sequential stream may continue
 * from (data.c: seq_bypass) */
#define ZR_SEQ_ENDS 8

struct zr_inode {
	struct zr_inode_key key;	/* backing identity; immutable */
	UT_hash_handle hh;		/* in zr_fs.inodes; itable_lock */
	mode_t type;			/* S_IFMT bits; immutable */
	uint64_t refs;			/* itable_lock: nlookup + internal references */
	uint64_t nlookup;		/* itable_lock: kernel lookup count */
	bool unhashed;			/* itable_lock: gone from the backing tree,
					 * moved to zr_fs.dead (its st_ino may be reused) */
	struct zr_inode *removing_next;	/* itable_lock: next on zr_fs.removing, the
					 * inodes unhashed for a removal in flight
					 * (zr_inode_removing()) */
	struct zr_inode *kept_prev, *kept_next;	/* itable_lock: zr_fs.kept */
	bool kept;			/* itable_lock: on zr_fs.kept */

	struct zr_alias *aliases;	/* ns_lock: names in the backing tree */
	bool unlinked;			/* ns_lock: no name left (but the orphan's);
					 * false for an orphan with links we never
					 * looked up (zr_orphan_attach()) */
	bool orphaned;			/* ns_lock (relaxed atomic stores and loads): its
					 * last name went while open; its one name is in
					 * fs->orphans */
	unsigned rename_begun;		/* atomic (seq_cst): renames of ours of this
					 * inode begun, counted before the backing
					 * call (zr_rename_begin()) */
	unsigned rename_ended;		/* atomic (seq_cst): those ended, counted once
					 * its names are changed under ns_lock, or
					 * the call failed (zr_rename_end()); equal
					 * to rename_begun when none is in flight.
					 * A reader of a name that reached another
					 * file, or nothing, asks zr_rename_wait()
					 * whether one may explain it */

	int fd;				/* fd_lock: cached fd, -1 if none */
	int fd_flags;			/* fd_lock: O_RDWR/O_RDONLY of fd */
	unsigned fd_users;		/* fd_lock: pins on fd */
	unsigned pins;			/* fd_lock: fd must stay (unlinked and open) */
	struct zr_inode *lru_prev, *lru_next; /* fd_lock: fd cache LRU */

	/*
	 * Protects the fields below. Writers of whole, aligned blocks take it
	 * shared (the store serialises per block; compression runs in
	 * parallel), everything else that changes data or size exclusive.
	 */
	pthread_rwlock_t lock;
	struct zr_file *blocks;		/* regular files: the block map, or NULL */
	uint64_t size;			/* cached size: atomic loads; stores under lock
					 * (a shared writer grows it with a CAS) */
	bool size_valid;		/* size was loaded from the backing file */
	bool times_dirty;		/* fs->attr_lock: mtime must be stamped on the backing file */
	struct timespec mtime;		/* fs->attr_lock: cached mtime when times_dirty */
	struct stat *gone_st;		/* lock (the pointer is set once; a relaxed load
					 * may test it for NULL without the lock): the
					 * attributes (nlink 0) kept when the last name
					 * went, which GETATTR and SETATTR answer from
					 * once nothing else holds the file (ops.c:
					 * gone_stat); freed with the inode */
	uint64_t gen;			/* atomic: bumped under lock at the end of every
					 * change of the data, failed ones included (a
					 * reader's clean insert checks it under the lock
					 * held exclusive: data.c) */
	unsigned open_count;		/* lock: open file (or directory) handles */
	unsigned write_count;		/* lock (a relaxed atomic load may read it):
					 * those of regular files opened for
					 * writing (ops.c: handle_begin) */
	bool write_refused;		/* relaxed atomic: a WRITE failed or was cut
					 * short since the last lseek's invalidation:
					 * the kernel may still hold its pages, with
					 * what zramfs does not (data.c: zr_op_lseek) */
	bool fd_pinned;			/* fd pinned because the last name went while open
					 * (files, directories) or held by the kernel
					 * (directories: a working directory) */
	bool has_caps;			/* relaxed atomic: backing file has (or may
					 * have) security.capability; set with size_valid */
	bool caps_kill_failed;		/* relaxed atomic: a write could not remove it */
	bool subfs_noted;		/* relaxed atomic: on another device than
					 * the backing root, and its mount is the
					 * root's or in zr_fs.subfs (or the table
					 * was full) */
	uint64_t seq_ends[ZR_SEQ_ENDS];	/* relaxed atomics: where the last accesses
					 * ended (data.c: seq_bypass) */
	uint64_t seq_front;		/* relaxed atomic: the furthest end of the
					 * accesses near each other (a jump away
					 * moves it) */
	uint64_t seq_bytes;		/* relaxed atomic: bytes of the accesses
					 * that continued each other in a row,
					 * until they are a stream; then frozen,
					 * and 0 when the stream ends */
	unsigned seq_slot;		/* relaxed atomic: counts accesses; the next
					 * slot of seq_ends */
	int seq_credit;			/* relaxed atomic: the stream's credit
					 * (data.c: seq_bypass) */
	uint32_t seq_raw;		/* incompressible blocks in a row (relaxed atomic) */
	uint32_t raw_probe;		/* relaxed atomic: counts raw bypasses, see ZR_RAW_PROBE */
	uint64_t disk_end;		/* relaxed atomic, a hint: the file's bytes
					 * from its start that the backing file held
					 * at attach or got since (data.c: write-around) */
	uint64_t tb_seq;		/* counts writes that went to the backing file
					 * (data.c: to_backing); under the I/O mutex
					 * of @blocks */
	uint64_t unkicked;		/* relaxed atomic: bytes written to the backing
					 * file since its writeback was last started
					 * (data.c: kick_writeback) */
	int8_t direct;			/* relaxed atomic: the backing file takes
					 * O_DIRECT: 1 yes, -1 no, 0 not asked yet
					 * (data.c: direct_probe) */
	struct file_handle *handle;	/* regular files: the backing file's handle, or
					 * NULL (inode.c: zr_inode_take_handle); set once
					 * under lock before blocks, read by writeback
					 * (atomic acquire); freed with the inode */
	uint64_t handle_busy_ms;	/* relaxed atomic: zr_now_ms() when an open by
					 * handle last said ENOMEM for all of
					 * ZR_HANDLE_BUSY_US; 0 never (inode.c) */
	bool lost_logged;		/* relaxed atomic: writeback found once that no
					 * name reaches the file (data.c: backing_fd) */
	bool open_err_logged;		/* relaxed atomic: backing_fd logged that the
					 * file cannot be opened, and has not opened it
					 * since (data.c) */
};

/* The file capabilities a write must drop (data.c, ops.c). */
#define ZR_XATTR_CAPS "security.capability"

/*
 * fuse_file_info.fh of a regular file's handle: ZR_FH_WRITER when it was
 * opened for writing, so that its close (FLUSH) and its fsync report the
 * file's recorded writeback errors and a reader's do not.
 */
#define ZR_FH_WRITER 1u

/* Filesystems mounted inside the backing directory whose syncs are
 * checked (zr_fs.subfs), at most. */
#define ZR_SUBFS_MAX 16

static inline uint64_t zr_fh_of(int open_flags)
{
	return (open_flags & O_ACCMODE) != O_RDONLY ? ZR_FH_WRITER : 0;
}

#define ZR_FILL_QLEN 2048		/* queued runs of blocks to copy into the tier */
#define ZR_REFUSED_QLEN 64		/* files with refused writeback to drop from the
					 * kernel's cache (data.c: refused_queue) */

struct zr_fs {
	struct zr_options *opt;
	struct fuse_session *se;
	struct zr_store *store;		/* NULL with cache=none */
	uint32_t bs;			/* block size */
	int root_fd;			/* O_RDONLY|O_DIRECTORY of the backing root */
	uint64_t root_mnt_id;		/* its mount's ID (0: not known); set once */
	struct zr_inode root;

	/*
	 * A regular file whose last name goes while it is open gets a name in
	 * the orphan directory, .zramfs/unlinked of the backing root (hidden
	 * by the control directory), instead of a pinned fd: the fds stay a
	 * bounded cache however many such files there are. orphans is that
	 * directory's inode, like root never in the table and never freed;
	 * its fd is -1 until the directory is found at mount or made for the
	 * first orphan (under orphan_lock and fd_lock), then immutable.
	 */
	struct zr_inode orphans;
	pthread_mutex_t orphan_lock;
	bool no_orphans;		/* orphan_lock: it cannot be made here (EROFS,
					 * not a directory...); pin fds */
	uint64_t orphan_seq;		/* atomic: names given */
	uint64_t norphans;		/* atomic: files there now */

	pthread_mutex_t itable_lock;
	struct zr_inode *inodes;	/* itable_lock: hash by key */
	struct zr_inode *dead;		/* itable_lock: unhashed inodes still referenced */
	struct zr_inode *removing;	/* itable_lock: those of dead whose removal
					 * from the backing tree is in flight (a list
					 * by removing_next: one per request at most) */
	struct zr_inode *kept;		/* itable_lock: inodes whose references went
					 * to 0 while they had blocks in the tier,
					 * for zr_fs_sweep() (some may be referenced
					 * again: it takes those off) */

	pthread_rwlock_t ns_lock;
	/* Threads in zr_rename_wait(), waiting for a rename of an inode to
	 * end (rare: one mutex and condition for all). rename_waiters: atomic
	 * (seq_cst), read by zr_rename_end() after it counts the end, so
	 * that a rename with no waiter takes no lock; rename_lock (innermost)
	 * serves only rename_cond, which zr_rename_end() broadcasts. */
	unsigned rename_waiters;
	pthread_mutex_t rename_lock;
	pthread_cond_t rename_cond;
	pthread_mutex_t attr_lock;	/* zr_inode.mtime and times_dirty; innermost */
	/* A writeback's stamp of a file's mtime on its backing file, and a
	 * SETATTR of its times, one at a time per file (zr_stamp_lock()):
	 * held across those backing calls, so not attr_lock, which every
	 * getattr takes. Taken before attr_lock. */
	pthread_mutex_t stamp_locks[ZR_STAMP_LOCKS];
	pthread_mutex_t sync_lock;	/* one zr_data_syncfs() at a time, and its
					 * three fields below; taken under
					 * retry_lock, takes the store's locks */
	uint64_t sync_w, sync_r;	/* sync_lock: zr_data_syncfs()'s counts of
					 * writes to the backing file and of what
					 * left RAM, at the last syncfs that
					 * succeeded */
	bool sync_lost;			/* sync_lock (relaxed atomic to read): a
					 * syncfs failed after data had left RAM,
					 * which may be lost: the exit status says
					 * so */
	/* Other filesystems mounted inside the backing directory that files
	 * were opened for writing on: the root of each one's mount, open
	 * beneath the backing root (a duplicate of its first such file's
	 * descriptor when that cannot be), for zr_data_syncfs() to sync as
	 * well. Opened before the first write
	 * there, so that its syncfs sees every error from then on (errseq:
	 * a descriptor opened later would not). Entries are only added, and
	 * closed by zr_fs_destroy(). */
	pthread_mutex_t subfs_lock;	/* the three fields below; innermost
					 * (taken in write paths, under ino->lock) */
	struct zr_subfs {
		uint64_t mnt_id;	/* its mount's ID (0: not known) */
		dev_t dev;		/* the device of the file that added it */
		int fd;
	} subfs[ZR_SUBFS_MAX];
	unsigned n_subfs;		/* subfs_lock */
	bool subfs_said;		/* subfs_lock: the log said that one is not
					 * synced (too many, or no descriptor) */
	uint64_t tb_writes;		/* relaxed atomic: writes straight to the
					 * backing file (to_backing(), a
					 * truncate's tail, a punch's zeros) */
	uint64_t wb_writes;		/* relaxed atomic: writebacks begun
					 * (zr_data_writeback_cb) */
	pthread_mutex_t mode_lock;	/* around a backing file's mode changes: a
					 * chmod, chown or access ACL change
					 * through the mount, and the owner's
					 * temporary u+r or u+w of an unprivileged
					 * daemon (inode.c: owner_reopen()); takes
					 * no other lock */

	pthread_mutex_t fd_lock;
	struct zr_inode *lru_head, *lru_tail; /* fd_lock: inodes with an idle fd */
	unsigned nfds;			/* fd_lock: fds held by the cache */

	/* directory handles with a stream open (ops.c, zr_dirh) */
	pthread_mutex_t dirh_lock;
	struct zr_dirh *dirh_head, *dirh_tail;	/* dirh_lock */
	unsigned ndirh;			/* dirh_lock */
	struct zr_dirh *dirh_all;	/* dirh_lock: every open handle, for
					 * zr_dirh_free_all() at the exit */
	unsigned dir_pins;		/* atomic: removed directories with a pinned fd
					 * (ops.c prepare_unlink, zr_dir_unpin) */
	unsigned file_pins;		/* atomic: files unlinked while open with a
					 * pinned fd (ops.c prepare_unlink, undo_pin,
					 * release_pinned) */
	bool file_pins_said;		/* relaxed atomic: the log said file_pins
					 * reached its cap */

	/* statistics of the daemon itself (relaxed atomics) */
	uint64_t bytes_read_backing;
	uint64_t bytes_written_backing;
	uint64_t fd_opens;
	uint64_t psi_shrinks;		/* times memory pressure shrank the tier */
	uint64_t lowmem_shrinks;	/* times low headroom shrank the tier */
	uint64_t recompress_busy;	/* 5 s idle recompression passes made
					 * while the CPUs were busy (cut to
					 * ZR_RECOMP_BUSY_MS) */
	uint64_t stream_copies;		/* blocks of bypassed streams copied into the tier */
	uint64_t fill_thread_copies;	/* those of them the fill thread made */
	uint64_t written_around;	/* bytes of partial-block writes sent to the
					 * backing file while the tier was full */
	uint64_t bytes_written_direct;	/* bytes of streams written to the backing
					 * file with O_DIRECT (data.c: direct_pwrite) */
	uint64_t writes_direct;		/* the O_DIRECT writes that wrote them */
	bool direct_said;		/* relaxed atomic: the log said that a backing
					 * file does no direct I/O (data.c: direct_no) */
	unsigned direct_fds;		/* relaxed atomic: descriptors open for
					 * O_DIRECT writes (data.c: direct_pwrite) */
	uint64_t misses_not_kept;	/* read misses not kept in the full tier
					 * (data.c: read_admit) */
	uint32_t *ghost;		/* relaxed atomics: tags of recent misses not
					 * let into the full tier (data.c:
					 * ghost_seen); NULL without a store */
	uint64_t ghost_mask;		/* its slots less one; set before the session */
	uint64_t handle_opens;		/* files opened through their handle (no name
					 * reached them) */
	uint64_t removed_dropped;	/* dirty bytes dropped: the backing file was removed */
	uint64_t creates_stale;		/* CREATEs that met a name made behind the
					 * kernel's back, answered ESTALE */
	uint64_t creates_as_caller;	/* the kernel's walks again after those that
					 * met such a name again, opened as the caller
					 * (ops.c: open_as_caller) */
	uint64_t lost_logs[2];		/* files data.c's backing_fd() logged, renamed
					 * and removed */
	uint64_t open_err_logs;		/* atomic: times data.c's backing_fd() logged
					 * that a file cannot be opened */

	/* writeback thread */
	pthread_t wb_thread;
	pthread_mutex_t wb_lock;
	pthread_cond_t wb_cond;
	bool wb_stop;			/* wb_lock */
	bool wb_running;
	uint64_t dirty_expire_ms;	/* relaxed atomic; changed by control */
	bool expire_now;		/* relaxed atomic: control changed it, so the
					 * writeback thread scans for expired data at once */
	bool xattr_enotsup;		/* immutable: the backing filesystem has no xattrs (probed at mount) */
	bool acl_on;			/* set at INIT, before any other request: the
					 * kernel enforces POSIX ACLs and sends
					 * modes without the umask (acl=on) */
	bool links_trusted;		/* immutable: the backing filesystem's link
					 * counts can be trusted (handles_trusted()):
					 * a cached fd with none is a removed file */
	bool no_handles;		/* immutable: files cannot be opened by handle
					 * (no CAP_DAC_READ_SEARCH, or the filesystem has
					 * none; probed at mount) */
	uint64_t max_file_size;		/* immutable: largest file on backing_dev (probed at mount; UINT64_MAX: not known) */
	bool backing_in_ram;		/* immutable: the backing filesystem is tmpfs or ramfs */
	bool kernel_times;		/* set at INIT: the kernel's writeback cache is on, so
					 * the kernel keeps a file's mtime and times every
					 * write itself (data.c: data_write_locked) */

	/*
	 * Blocks of bypassed streams waiting for a clean copy in the tier
	 * (data.c: fill_enqueue, fill_drain, fill_main), made by the fill
	 * thread with the CPU time no one else wants, and by the writeback
	 * thread in pauses, so that compression stays off the write path.
	 * Each entry holds an inode reference. Lock order: ino->lock,
	 * fill_lock, itable_lock.
	 */
	pthread_mutex_t fill_lock;
	pthread_cond_t fill_cond;	/* with fill_lock: copies queued, or stop */
	bool fill_stop;			/* set under fill_lock; relaxed atomic loads
					 * (fill_run looks at it at every block) */
	unsigned fill_threads;		/* fill threads running (set and read by the
					 * thread that starts and stops them) */
	pthread_t fill_thread[ZR_FILL_THREADS];
	uint64_t read_last_ms;		/* relaxed atomic: zr_now_ms() of the last read */
	struct zr_fill {
		struct zr_inode *ino;
		uint64_t idx;		/* first block */
		uint32_t n;		/* blocks */
	} fill_q[ZR_FILL_QLEN];		/* fill_lock: ring buffer */
	unsigned fill_head, fill_len;	/* fill_lock */
	uint64_t fg_last_ms;		/* relaxed atomic: last read, or copy queued */
	uint64_t req_last_ms;		/* relaxed atomic: zr_now_ms() when a request
					 * last arrived or ended (session.c) */
	uint64_t settle_last_ms;	/* relaxed atomic: when a pass of
					 * zr_store_settle() last began (data.c) */
	bool settle_forcing;		/* relaxed atomic: forced settle slices run
					 * until no block is pending (data.c:
					 * settle_overdue) */
	bool fill_idle;			/* fill_lock (relaxed atomic reads): the
					 * fill thread waits ZR_FILL_IDLE_MS */
	uint64_t fill_dropped;		/* relaxed atomic: blocks not queued, queue full */

	/*
	 * Ranges of the kernel's cache whose writeback WRITEs were refused,
	 * for the refusal thread to have the kernel drop (data.c:
	 * refused_queue, refused_main). One entry per file, widened to
	 * cover its ranges.
	 */
	pthread_mutex_t ref_lock;
	pthread_cond_t ref_cond;	/* with ref_lock: a range queued, or stop */
	bool ref_stop;			/* ref_lock */
	bool ref_running;		/* ref_lock (written by the thread that starts
					 * and stops the refusal thread) */
	pthread_t ref_thread;
	struct zr_refused {
		fuse_ino_t ino;
		uint64_t off, end;	/* [off, end) */
	} ref_q[ZR_REFUSED_QLEN];	/* ref_lock */
	unsigned ref_len;		/* ref_lock */
	bool ref_full_said;		/* ref_lock: the queue was full, logged once */

	/* CPU latency request while requests flow (cpulat.c, which says
	 * which lock protects what) */
	int lat_fd;			/* /dev/cpu_dma_latency, -1 if not used */
	bool lat_inited, lat_running;
	uint64_t lat_last_ms;		/* relaxed atomic: last burst of requests */
	uint64_t lat_win;		/* relaxed atomic: current counting window */
	uint32_t lat_count;		/* relaxed atomic: requests in lat_win */
	pthread_mutex_t lat_lock;
	pthread_cond_t lat_cond;	/* lat_lock; CLOCK_MONOTONIC */
	pthread_t lat_thread;
	bool lat_held;			/* lat_lock; relaxed atomic reads */
	bool lat_failed;		/* lat_lock; relaxed atomic reads */
	bool lat_stop;			/* lat_lock */
	uint64_t lat_raised;		/* relaxed atomic: times the request was raised */

	dev_t backing_dev;
	char bdi[32];			/* "MAJ:MIN" of our mount, set before the loop; "" if unknown */
	bool read_only;
	bool quiesced;			/* relaxed atomic: no request runs any more (the
					 * final writeback), so a missing name is not a
					 * rename in progress (inode.c: inode_reopen) */
	bool ending;			/* atomic (seq_cst): main.c end_loop() is about
					 * to end the session: no invalidation of the
					 * kernel's cache starts (data.c inval_inode) */
	unsigned invalidating;		/* atomic (seq_cst): threads in data.c
					 * inval_inode() */
	uint64_t timeout_s;		/* entry/attr timeout */
};

extern const struct fuse_lowlevel_ops zr_ops;

/* inode.c */
int zr_fs_init(struct zr_fs *fs, struct zr_options *opt, int root_fd);
void zr_fs_destroy(struct zr_fs *fs);
struct zr_inode *zr_inode_from_ino(struct zr_fs *fs, fuse_ino_t ino);
void zr_inode_ref(struct zr_fs *fs, struct zr_inode *ino);
void zr_inode_unref(struct zr_fs *fs, struct zr_inode *ino);
int zr_inode_lookup(struct zr_fs *fs, struct zr_inode *parent, int pfd, const char *name,
		    const struct stat *st, bool confirmed, struct zr_inode **out);
void zr_inode_forget(struct zr_fs *fs, struct zr_inode *ino, uint64_t n);
bool zr_name_reaches(int dirfd, const char *name, const struct zr_inode_key *key);
struct zr_alias *zr_alias_new(const char *name);
unsigned zr_rename_mark(struct zr_inode *ino);
void zr_rename_begin(struct zr_inode *ino);
void zr_rename_end(struct zr_fs *fs, struct zr_inode *ino);
bool zr_rename_wait(struct zr_fs *fs, struct zr_inode *ino, unsigned mark);
void zr_alias_rename(struct zr_fs *fs, struct zr_inode *ino, struct zr_inode *oldp,
		     const char *oldname, struct zr_inode *newp, struct zr_alias *fresh);
int zr_alias_add(struct zr_fs *fs, struct zr_inode *ino, struct zr_inode *parent,
		 const char *name);
bool zr_alias_remove(struct zr_fs *fs, struct zr_inode *ino, struct zr_inode *parent,
		     const char *name);
bool zr_alias_is_last(struct zr_fs *fs, struct zr_inode *ino, struct zr_inode *parent,
		      const char *name);
int zr_fd_get(struct zr_fs *fs, struct zr_inode *ino);
int zr_fd_get_cached(struct zr_fs *fs, struct zr_inode *ino);
void zr_fd_put(struct zr_fs *fs, struct zr_inode *ino);
void zr_fd_install(struct zr_fs *fs, struct zr_inode *ino, int fd);
void zr_fd_pin(struct zr_fs *fs, struct zr_inode *ino);
bool zr_fd_is_pinned(struct zr_fs *fs, struct zr_inode *ino);
void zr_fd_unpin(struct zr_fs *fs, struct zr_inode *ino);
int zr_inode_name(struct zr_fs *fs, struct zr_inode *ino, struct zr_inode **parent,
		  char name[NAME_MAX + 1]);
void zr_fs_sweep(struct zr_fs *fs);
bool zr_inode_unhash(struct zr_fs *fs, struct zr_inode *ino);
bool zr_inode_removing(struct zr_fs *fs, struct zr_inode *ino);
void zr_inode_removed(struct zr_fs *fs, struct zr_inode *ino, bool gone);
int zr_orphan_link(struct zr_fs *fs, struct zr_inode *ino, int pfd, const char *name,
		   char oname[NAME_MAX + 1]);
int zr_orphan_tmpfile(struct zr_fs *fs, int fd, char oname[NAME_MAX + 1]);
void zr_orphan_unlink(struct zr_fs *fs, struct zr_inode *ino, const char *oname);
void zr_orphan_linked(struct zr_fs *fs, struct zr_inode *ino);
void zr_orphan_attach(struct zr_fs *fs, struct zr_inode *ino, bool linked);
bool zr_orphan_remove(struct zr_fs *fs, struct zr_inode *ino);
void zr_fs_drop_orphans(struct zr_fs *fs);
bool zr_inode_looked_up(struct zr_fs *fs, struct zr_inode *ino);
void zr_orphan_reap(struct zr_fs *fs, struct zr_inode *ino);
void zr_dir_unpin(struct zr_fs *fs, struct zr_inode *ino);
void zr_inode_take_handle(struct zr_fs *fs, struct zr_inode *ino, int fd);
int zr_fd_get_by_handle(struct zr_fs *fs, struct zr_inode *ino, bool *gone);
int zr_fd_get_nowait(struct zr_fs *fs, struct zr_inode *ino);
bool zr_fd_reopen_waits(bool on);
int zr_fd_get_waiting(struct zr_fs *fs, struct zr_inode *ino);
int zr_fd_make_writable(struct zr_fs *fs, struct zr_inode *ino, int fd);
bool zr_inode_same_file(struct zr_inode *ino, int dirfd, const char *name, int flags);

/* data.c */
int zr_data_writeback_cb(void *ctx, void *owner, uint64_t index,
			 unsigned nblocks, const void *buf);
int zr_data_attach(struct zr_fs *fs, struct zr_inode *ino, int fd, bool created);
int zr_data_size(struct zr_fs *fs, struct zr_inode *ino, uint64_t *size);
void zr_data_fix_stat(struct zr_fs *fs, struct zr_inode *ino, struct stat *st);
bool zr_data_may_expire_cb(void *ctx, void *owner);
uint64_t zr_data_space_cb(void *ctx, void *owner);
int zr_data_truncate(struct zr_fs *fs, struct zr_inode *ino, int fd, uint64_t size,
		     bool open_trunc);
void zr_dirh_free_all(struct zr_fs *fs);
int zr_data_syncfs(struct zr_fs *fs, const char *who);
void zr_data_note_subfs(struct zr_fs *fs, struct zr_inode *ino, int fd);
uint64_t zr_data_mount_id(int fd);
int zr_data_writeback_inode(struct zr_fs *fs, struct zr_inode *ino);
int zr_data_flush_inode(struct zr_fs *fs, struct zr_inode *ino, bool writer);
void zr_data_drop_inode(struct zr_fs *fs, struct zr_inode *ino);
void zr_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void zr_op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv,
		     off_t off, struct fuse_file_info *fi);
void zr_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi);
void zr_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void zr_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
		     off_t len, struct fuse_file_info *fi);
void zr_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		 struct fuse_file_info *fi);
void zr_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			   struct fuse_file_info *fi_in, fuse_ino_t ino_out,
			   off_t off_out, struct fuse_file_info *fi_out,
			   size_t len, int flags);
int zr_wb_start(struct zr_fs *fs);
void zr_wb_stop(struct zr_fs *fs);
/** Make the doorkeeper's table for a budget of @budget bytes (the store
 * must exist). @return 0 or -ENOMEM. */
int zr_data_ghost_init(struct zr_fs *fs, uint64_t budget);
/** Free it (no request may run). */
void zr_data_ghost_free(struct zr_fs *fs);

/* session.c */
/* An idle request thread's buffers (session.c's for /dev/fuse, uring.c's
 * rings) go back after this long without a request (ms), if requests or
 * replies filled at least ZR_TRIM_MIN of them since they last went back. */
#define ZR_TRIM_IDLE_MS 1000
#define ZR_TRIM_MIN (64u * 1024u)

int zr_session_hook(struct zr_fs *fs);
extern const char zr_tmpfile_name[];
void zr_session_map_request(void *buf, size_t n);
void zr_session_note_request(struct zr_fs *fs, const void *buf, size_t n);
bool zr_session_drained(struct zr_fs *fs);

/* uring.c: FUSE over io_uring (uring=on) */
int zr_uring_prepare(struct zr_fs *fs, size_t max_payload);
void zr_uring_go(bool ok);
bool zr_uring_stop(void);
bool zr_uring_busy(void);
bool zr_uring_reply(const struct iovec *iov, int count, ssize_t *res);
void *zr_uring_reply_buf(size_t size);
bool zr_uring_may_wait(void);
bool zr_uring_active(void);
struct zr_uring_stats {
	uint64_t requests;	/* served through the rings */
	uint64_t threads;	/* ring threads started */
	uint64_t unpins;	/* a thread allowed off its CPU for bulk requests */
	uint64_t repins;	/* and pinned again by small ones */
	uint64_t unpinned;	/* threads off their CPU now */
	uint64_t trims;		/* ring buffers idle threads gave back */
	bool sched_idle;	/* the ring threads run at SCHED_IDLE now */
	uint64_t sched_switches; /* between SCHED_IDLE and SCHED_OTHER */
};
void zr_uring_stats(struct zr_uring_stats *out);
uint64_t zr_session_leads(void);
uint64_t zr_session_poll_ms(void);
uint64_t zr_session_poll_stops(void);
uint64_t zr_session_poll_sleeps(void);
uint64_t zr_session_takeovers(void);
/* Request buffers idle threads gave back (session.c). */
uint64_t zr_session_trims(void);
void *zr_session_reply_buf(size_t size);
void zr_session_blocking(void);
char *zr_session_align(char *p, size_t len, uintptr_t phase, size_t align);

/* cpulat.c */
int zr_cpulat_start(struct zr_fs *fs);
void zr_cpulat_stop(struct zr_fs *fs);
void zr_cpulat_busy(struct zr_fs *fs);
bool zr_cpulat_held(struct zr_fs *fs);
bool zr_cpulat_bursting(struct zr_fs *fs);
uint64_t zr_cpulat_raised(struct zr_fs *fs);

/* ctl.c: the control directory */
#define ZR_CTL_INO_DIR   ((fuse_ino_t)2)
#define ZR_CTL_INO_STATS ((fuse_ino_t)3)
#define ZR_CTL_INO_CONFIG ((fuse_ino_t)4)
#define ZR_CTL_INO_CONTROL ((fuse_ino_t)5)
#define ZR_CTL_INO_LAST  ZR_CTL_INO_CONTROL
static inline bool zr_is_ctl(fuse_ino_t ino)
{
	return ino >= ZR_CTL_INO_DIR && ino <= ZR_CTL_INO_LAST;
}
void zr_ctl_stat(struct zr_fs *fs, fuse_ino_t ino, struct stat *st);
int zr_ctl_lookup(struct zr_fs *fs, fuse_ino_t parent, const char *name,
		  struct fuse_entry_param *e);
void zr_ctl_open(fuse_req_t req, struct zr_fs *fs, fuse_ino_t ino, struct fuse_file_info *fi);
void zr_ctl_read(fuse_req_t req, struct zr_fs *fs, fuse_ino_t ino, size_t size,
		 off_t off, struct fuse_file_info *fi);
void zr_ctl_write(fuse_req_t req, struct zr_fs *fs, fuse_ino_t ino, const char *buf,
		  size_t size, struct fuse_file_info *fi);
void zr_ctl_release(struct zr_fs *fs, struct fuse_file_info *fi);
void zr_ctl_readdir(fuse_req_t req, struct zr_fs *fs, size_t size, off_t off,
		    int plus);

static inline struct zr_fs *zr_fs_of(fuse_req_t req)
{
	return (struct zr_fs *)fuse_req_userdata(req);
}

/* The lock of @ino's mtime stamps (zr_fs.stamp_locks). */
static inline pthread_mutex_t *zr_stamp_lock(struct zr_fs *fs, const struct zr_inode *ino)
{
	return &fs->stamp_locks[((uintptr_t)ino / 64) % ZR_STAMP_LOCKS];
}

#endif /* ZR_FS_H */
