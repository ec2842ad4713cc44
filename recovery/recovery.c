/* SPDX-License-Identifier: MIT */
/*
 * recovery.c - the recovery thread (recovery.h): requests, the cycle's
 * steps, their outcomes and the automatic policy.
 *
 * Design notes
 * ============
 *
 * The store is the queue.  A request only commits "recovering" (the store
 * checks, in that commit, that the GPU is drained or failed, that no claim
 * lives on it and that no other GPU recovers) and wakes the thread; the
 * thread runs the program for whichever GPU the store says is recovering.
 * After recovery_start() has made every GPU an earlier vfhealthd left
 * recovering failed (interrupted), every recovering GPU is one this process
 * marked, so a cycle is never run twice and never resumed after a restart.
 *
 * The target.  The device is never what the store's text says: the
 * request and, again, the thread right before the program check that sysfs
 * shows an NVIDIA GPU with SR-IOV at that address, and take its VFs from
 * its virtfnN links (recovery_gpu_target), making each registered one the
 * GPU's in the store; the thread then refuses the cycle (failed) when one
 * of them has a claim or a reservation, which the store's check at begin
 * could not see while the VF's stored parent was empty.  The program's
 * VFHEALTH_VFS lists exactly those VFs.
 *
 * Outcomes.  The program's exit 0 is not trusted alone: every VF sysfs
 * showed under the GPU, and every registered VF of it, must be named by a
 * virtfnN link of the physical function afterwards.  An outcome the store could not take (unavailable) is kept
 * and offered again every RETRY_NS; meanwhile the GPU stays recovering,
 * out of placement.
 *
 * The automatic policy (auto.c) is evaluated whenever the store says a
 * quarantine, a claim, a GPU or the setting changed, and at the nearest
 * deadline of an automatic drain.  A drain the policy started says so in
 * the GPU's history (detail "auto: ..."), so that a restarted vfhealthd
 * still knows it is the policy's to cycle, and when it began: its deadline
 * (--auto-drain-timeout) runs from that stored time, so a restart does not
 * put it off.  A GPU's quarantines count only when they began after its
 * last cycle began and after its last undrain (auto_counts): a cycle that
 * failed is not retried, and an operator's undrain is not undone, for the
 * quarantines that were already there.
 */
#include "recovery/recovery.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/prometheus.h"
#include "grammar/vf.h"
#include "recovery/recovery-internal.h"

#define RETRY_NS (5 * NSEC_PER_SEC)
#define HISTORY_SCAN 64 /* a GPU's newest events the policy looks at */
#define PROGRAM_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

enum outcome {
	OUTCOME_SUCCESS,
	OUTCOME_FAILED,
	OUTCOME_TIMEOUT,
	OUTCOME_VF_MISSING,
	OUTCOME_INTERRUPTED,
	OUTCOME_COUNT,
};

static const char *const outcome_names[OUTCOME_COUNT] = {
	[OUTCOME_SUCCESS] = "success",         [OUTCOME_FAILED] = "failed",
	[OUTCOME_TIMEOUT] = "timeout",         [OUTCOME_VF_MISSING] = "vf_missing",
	[OUTCOME_INTERRUPTED] = "interrupted",
};

struct gpu_counts {
	char parent[VF_ADDR_BUFSZ];
	uint64_t outcomes[OUTCOME_COUNT];
	uint64_t drain_timeouts; /* automatic drains ended at their deadline */
	double last_duration_s;  /* < 0: no cycle ran here */
};

struct recovery {
	char *program;  /* its path, for messages */
	int program_fd; /* what runs: opened and checked once (program_open) */
	char *record_path;
	/* processes of an earlier vfhealthd's cycle that would not end
	 * (recovery.lock; 0: none) */
	pid_t linger_pid;
	uint64_t linger_start;
	int linger_fd;
	int64_t timeout_ns;
	int64_t drain_timeout_ns; /* an automatic drain's deadline; 0: none */
	char *sysfs_root;
	struct store *store;

	pthread_mutex_t lock; /* recovery.lock: a leaf */
	pthread_cond_t cond;
	bool kicked, stop;
	atomic_bool running;       /* the thread runs: changes wake it */
	struct gpu_counts *counts; /* by parent, for the metrics */
	size_t n_counts;
	pthread_t thread;
	int stop_fd; /* an eventfd, readable once recovery_stop began */

	/* the thread's own */
	bool interrupted_done;
	struct {
		char parent[VF_ADDR_BUFSZ];
		bool ok;
		enum outcome outcome;
		char detail[STORE_GPU_DETAIL_MAX + 1];
		double duration_s;
	} pending; /* an outcome the store has not taken yet ("" parent: none) */
	char (*observed)[VF_ADDR_BUFSZ]; /* GPUs whose would-be drain observe mode logged */
	size_t n_observed;

	/* --register sysfs (register.c) */
	bool register_sysfs;
	bool rescan;               /* recovery.lock: look at sysfs again */
	int64_t rescan_at_ns;      /* recovery.lock: and at this monotonic time (0: no) */
	atomic_bool keeps_absent;  /* the last scan left a VF absent */
	struct register_state reg; /* the thread's own (and recovery_start's) */
	int uevent_fd;             /* -1: none, rescans every REGISTER_RESCAN_NS */
	pthread_t uevent_thread;
	bool uevent_running;
};

/* -- options ------------------------------------------------------------------ */

/* -- the last cycle's processes ------------------------------------------------ */

/* While a cycle runs, record_path holds "BOOT_ID PID START": the init of
 * its PID namespace (program.c), by pid and start time, on this boot.
 * While that process lives, processes of the cycle may; once it is gone,
 * none is (the kernel ends them all before the init's exit is seen).  The
 * init dies with vfhealthd (its parent-death signal: SIGTERM to the
 * namespace, SIGKILL after the grace), so the record is only ever found at
 * a start when an earlier vfhealthd died mid-cycle. */
#define LINGER_KILL_WAIT_MS 5000

static int read_boot_id(char buf[static 40])
{
	_cleanup_close_ int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, 39);
	if (n < 36)
		return n < 0 ? -errno : -EIO;
	buf[36] = '\0';
	return 0;
}

static int record_write(struct recovery *r, pid_t init)
{
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = -1;
	char boot[40], line[128], state;
	uint64_t start;
	int k, len;

	if (!r->record_path)
		return 0;
	if ((k = read_boot_id(boot)) < 0 || (k = process_start_time(init, &start, &state)) < 0)
		return k;
	if (asprintf(&tmp, "%s.tmp", r->record_path) < 0)
		return -ENOMEM;
	len = snprintf(line, sizeof(line), "%s %d %" PRIu64 "\n", boot, (int)init, start);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, line, (size_t)len) != len || rename(tmp, r->record_path) < 0) {
		k = -errno;
		unlink(tmp);
		return k;
	}
	return 0;
}

static void record_clear(struct recovery *r)
{
	if (r->record_path && unlink(r->record_path) < 0 && errno != ENOENT)
		log_warn("cannot remove %s: %s", r->record_path, strerror(errno));
}

/* Whether pid is still the process that started at start, alive. */
static bool same_process_lives(pid_t pid, uint64_t start)
{
	uint64_t now;
	char state = 0;

	return process_start_time(pid, &now, &state) == 0 && now == start && state != 'Z' &&
	       state != 'X';
}

/* Wait up to ms for the process (its pidfd, or its /proc entry without
 * one) to be gone; true when it is. */
static bool wait_gone(int pidfd, pid_t pid, uint64_t start, int ms)
{
	int64_t until = monotonic_ns() + (int64_t)ms * 1000000;

	for (;;) {
		int64_t left = (until - monotonic_ns()) / 1000000;
		if (pidfd >= 0) {
			struct pollfd p = { .fd = pidfd, .events = POLLIN };
			int k = poll(&p, 1, left > 0 ? (int)left : 0);
			if (k != 0 || left <= 0)
				return k > 0 || (k < 0 && errno != EINTR);
			continue;
		}
		if (!same_process_lives(pid, start))
			return true;
		if (left <= 0)
			return false;
		usleep(10000); /* no pidfd_open(2): nothing to wait on */
	}
}

/* At start, before anything is served: the processes of a cycle an
 * earlier vfhealthd left end (they had SIGTERM when it died; SIGKILL once
 * the grace is over); a process stuck in the kernel is waited for no longer,
 * but then no cycle starts while it lives (last_cycle_lingers). */
static void last_cycle_end(struct recovery *r)
{
	_cleanup_close_ int fd = -1, pidfd = -1;
	char buf[128], boot[40], rec_boot[40];
	struct stat st;
	uint64_t start;
	int pid;
	ssize_t n;

	if (!r->record_path)
		return;
	fd = open(r->record_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			log_warn("cannot read %s: %s", r->record_path, strerror(errno));
		return;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	/* only what this user wrote names a process to kill */
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
	    sscanf(buf, "%39s %d %" SCNu64, rec_boot, &pid, &start) != 3 || pid <= 1) {
		log_warn("%s is not a cycle's record: ignored", r->record_path);
		record_clear(r);
		return;
	}
	if (read_boot_id(boot) < 0 || strcmp(boot, rec_boot) != 0) {
		record_clear(r); /* from an earlier boot */
		return;
	}
	pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	/* after the pidfd: it names the recorded process, not a later one */
	if (!same_process_lives((pid_t)pid, start)) {
		record_clear(r);
		return;
	}
	log_warn("the processes of the last cycle (init pid %d) still run: an earlier vfhealthd"
		 " died during it; waiting for them to end",
		 pid);
	if (!wait_gone(pidfd, (pid_t)pid, start, (int)(RECOVERY_KILL_GRACE_NS / 1000000) + 1000)) {
		if (pidfd >= 0)
			(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		else
			kill((pid_t)pid, SIGKILL);
		if (!wait_gone(pidfd, (pid_t)pid, start, LINGER_KILL_WAIT_MS)) {
			log_err("the processes of the last cycle (init pid %d) do not end, even"
				" killed: stuck in the kernel? No cycle starts while they live",
				pid);
			r->linger_pid = (pid_t)pid;
			r->linger_start = start;
			r->linger_fd = move_fd(pidfd);
			return;
		}
	}
	log_notice("the processes of the last cycle (init pid %d) have ended", pid);
	record_clear(r);
}

/* Whether processes of the last cycle still live (they must not meet a
 * new cycle on the GPU they were changing).  Any thread. */
static bool last_cycle_lingers(struct recovery *r)
{
	bool lingers;

	pthread_mutex_lock(&r->lock);
	lingers = r->linger_pid > 0 && !wait_gone(r->linger_fd, r->linger_pid, r->linger_start, 0);
	if (r->linger_pid > 0 && !lingers) {
		log_notice("the processes of the last cycle (init pid %d) have ended",
			   (int)r->linger_pid);
		r->linger_pid = 0;
		if (r->linger_fd >= 0)
			close(move_fd(r->linger_fd));
		record_clear(r);
	}
	pthread_mutex_unlock(&r->lock);
	return lingers;
}

/* -- options ------------------------------------------------------------------ */

int recovery_new(const struct recovery_options *opt, struct recovery **ret)
{
	_cleanup_free_ struct recovery *r = NULL;
	_cleanup_close_ int program_fd = -1;
	char why[PATH_MAX + 128];
	int k;

	if (!opt || !ret)
		return -EINVAL;
	if (opt->program && opt->program[0] != '/') {
		log_err("--recover-program must be an absolute path, not '%s'", opt->program);
		return -EINVAL;
	}
	/* opened once: what runs is what was checked, whatever the path
	 * names later */
	if (opt->program && (k = program_open(opt->program, &program_fd, why, sizeof(why))) < 0) {
		log_err("--recover-program %s: refused: %s", opt->program, why);
		return k;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->timeout_ns = opt->timeout_ns > 0 ? opt->timeout_ns :
					      RECOVERY_TIMEOUT_DEFAULT_S * NSEC_PER_SEC;
	r->drain_timeout_ns = opt->auto_drain_timeout_ns < 0 ?
				      0 :
			      opt->auto_drain_timeout_ns == 0 ?
				      AUTO_DRAIN_TIMEOUT_DEFAULT_S * NSEC_PER_SEC :
				      opt->auto_drain_timeout_ns;
	r->stop_fd = -1;
	r->linger_fd = -1;
	r->uevent_fd = -1;
	r->register_sysfs = opt->register_sysfs;
	if ((opt->program && !(r->program = strdup(opt->program))) ||
	    (opt->record_path && !(r->record_path = strdup(opt->record_path))) ||
	    !(r->sysfs_root = strdup(opt->sysfs_root ? opt->sysfs_root : "/sys"))) {
		free(r->program);
		free(r->record_path);
		return -ENOMEM;
	}
	r->program_fd = move_fd(program_fd);
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	last_cycle_end(r);
	*ret = move_ptr(r);
	return 0;
}

bool recovery_configured(const struct recovery *r)
{
	return r && r->program;
}

/* -- metrics ------------------------------------------------------------------ */

/* recovery.lock held: parent's counts, added when new (NULL: no memory). */
static struct gpu_counts *counts_of_locked(struct recovery *r, const char *parent)
{
	for (size_t i = 0; i < r->n_counts; i++)
		if (strcmp(r->counts[i].parent, parent) == 0)
			return &r->counts[i];
	struct gpu_counts *grown = reallocarray(r->counts, r->n_counts + 1, sizeof(*grown));
	if (!grown)
		return NULL;
	r->counts = grown;
	struct gpu_counts *c = &r->counts[r->n_counts++];
	memset(c, 0, sizeof(*c));
	snprintf(c->parent, sizeof(c->parent), "%s", parent);
	c->last_duration_s = -1;
	return c;
}

static void count_outcome(struct recovery *r, const char *parent, enum outcome o, double seconds)
{
	pthread_mutex_lock(&r->lock);
	struct gpu_counts *c = counts_of_locked(r, parent);
	if (c) {
		c->outcomes[o]++;
		if (seconds >= 0)
			c->last_duration_s = seconds;
	}
	pthread_mutex_unlock(&r->lock);
}

static void count_drain_timeout(struct recovery *r, const char *parent)
{
	pthread_mutex_lock(&r->lock);
	struct gpu_counts *c = counts_of_locked(r, parent);
	if (c)
		c->drain_timeouts++;
	pthread_mutex_unlock(&r->lock);
}

/* vfhealth_gpu_auto_drain_timeouts_total: one series for every GPU, 0
 * before its first timeout, so that an alert on its increase sees the
 * first one. */
static void render_drain_timeouts(struct recovery *r, FILE *out)
{
	_cleanup_free_ struct store_gpu_info *gpus = NULL;
	size_t n = 0;

	if (!r->store || store_gpu_list(r->store, &gpus, &n) < 0)
		n = 0;
	prom_family(out, "vfhealth_gpu_auto_drain_timeouts_total", "counter",
		    "Automatic drains of the parent GPU ended by --auto-drain-timeout (its VMs did "
		    "not leave, or its cycle could not begin, in time) since vfhealthd started.");
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < n; i++) {
		uint64_t count = 0;
		for (size_t j = 0; j < r->n_counts; j++)
			if (strcmp(r->counts[j].parent, gpus[i].parent) == 0)
				count = r->counts[j].drain_timeouts;
		prom_sample_u64(out, "vfhealth_gpu_auto_drain_timeouts_total",
				PROM_LABELS({ "parent", gpus[i].parent }), count);
	}
	pthread_mutex_unlock(&r->lock);
}

void recovery_render_metrics(void *userdata, FILE *out)
{
	struct recovery *r = userdata;

	char seconds[32];

	prom_family(out, "vfhealth_gpu_recoveries_total", "counter",
		    "SR-IOV cycles of the parent GPU since vfhealthd started, by outcome (success, "
		    "failed, timeout, vf_missing, interrupted).");
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->n_counts; i++)
		for (size_t o = 0; o < OUTCOME_COUNT; o++)
			prom_sample_u64(out, "vfhealth_gpu_recoveries_total",
					PROM_LABELS({ "parent", r->counts[i].parent },
						    { "outcome", outcome_names[o] }),
					r->counts[i].outcomes[o]);
	prom_family(out, "vfhealth_gpu_recovery_duration_seconds", "gauge",
		    "How long the parent GPU's last cycle took: the program and the check of its "
		    "VFs.");
	for (size_t i = 0; i < r->n_counts; i++) {
		if (r->counts[i].last_duration_s < 0)
			continue;
		snprintf(seconds, sizeof(seconds), "%.3f", r->counts[i].last_duration_s);
		prom_sample(out, "vfhealth_gpu_recovery_duration_seconds",
			    PROM_LABELS({ "parent", r->counts[i].parent }), seconds);
	}
	pthread_mutex_unlock(&r->lock);
	render_drain_timeouts(r, out);
}

/* -- the thread's steps --------------------------------------------------------- */

static void kick(struct recovery *r)
{
	pthread_mutex_lock(&r->lock);
	r->kicked = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* Look at sysfs again (--register sysfs): now, and, with settle, once
 * more REGISTER_SETTLE_NS later. */
static void kick_rescan(struct recovery *r, bool settle)
{
	pthread_mutex_lock(&r->lock);
	r->rescan = true;
	if (settle)
		r->rescan_at_ns = monotonic_ns() + REGISTER_SETTLE_NS;
	r->kicked = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* The scan, when one is due; *retry when the store refused a change,
 * *wait_ns (when >= 0) lowered to the next one due. */
static void rescan_step(struct recovery *r, bool *retry, int64_t *wait_ns)
{
	bool due, again = false;
	int64_t now = monotonic_ns(), next;

	pthread_mutex_lock(&r->lock);
	if (r->rescan_at_ns && now >= r->rescan_at_ns) {
		r->rescan_at_ns = 0;
		r->rescan = true;
	}
	due = r->rescan;
	r->rescan = false;
	pthread_mutex_unlock(&r->lock);
	if (due) {
		if (register_scan(&r->reg, r->sysfs_root, r->store, &again) < 0 || again) {
			*retry = true;
			pthread_mutex_lock(&r->lock);
			r->rescan = true;
			pthread_mutex_unlock(&r->lock);
		}
		atomic_store(&r->keeps_absent, r->reg.absent > 0);
	}
	pthread_mutex_lock(&r->lock);
	if (r->uevent_fd < 0 && !r->rescan_at_ns)
		r->rescan_at_ns = now + REGISTER_RESCAN_NS; /* no uevents: look now and then */
	next = r->rescan_at_ns ? r->rescan_at_ns - now : -1;
	pthread_mutex_unlock(&r->lock);
	if (next >= 0 && (*wait_ns < 0 || next < *wait_ns))
		*wait_ns = next > 0 ? next : 0;
}

/* Without the kernel's uevents, sysfs is looked at every REGISTER_RESCAN_NS
 * instead: said once, the socket closed, a look now. */
static void uevents_lost(struct recovery *r, const char *what, int k)
{
	log_warn("%s: %s; sysfs is looked at every %" PRId64 " s instead", what, strerror(-k),
		 REGISTER_RESCAN_NS / NSEC_PER_SEC);
	pthread_mutex_lock(&r->lock);
	close(move_fd(r->uevent_fd));
	pthread_mutex_unlock(&r->lock);
	kick_rescan(r, false);
}

static void *uevent_main(void *arg)
{
	struct recovery *r = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = r->uevent_fd, .events = POLLIN },
				       { .fd = r->stop_fd, .events = POLLIN } };
		bool pci = false;
		int k;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			k = -errno;
		} else if (p[1].revents) {
			return NULL;
		} else {
			k = uevent_drain(r->uevent_fd, &pci);
		}
		if (k < 0) {
			uevents_lost(r, "cannot read the kernel's uevents", k);
			return NULL;
		}
		if (pci)
			kick_rescan(r, true);
	}
}

/* Offer the pending outcome to the store; false: try again later. */
static bool finish_pending(struct recovery *r)
{
	size_t cleared = 0;
	const char *parent = r->pending.parent;
	struct log_fields f = { .parent = parent, .reason = r->pending.detail };
	int k = store_gpu_recover_end(r->store, parent, r->pending.ok, r->pending.detail, &cleared);

	if (k == -EIO)
		return false;
	if (k < 0)
		log_err("GPU %s: the end of its cycle was refused: %s", parent, strerror(-k));
	else if (r->pending.ok)
		log_event(LOG_NOTICE, LOG_EVENT_RECOVERED, &f,
			  "GPU %s: recovered: its SR-IOV cycle took %.1f s, every VF is back;"
			  " %zu VF%s cleared (why=recovered), on probation after the GPU's cycle"
			  " until their first OK; the GPU serves again",
			  parent, r->pending.duration_s, cleared, cleared == 1 ? "" : "s");
	else
		log_event(LOG_ERR, LOG_EVENT_RECOVERY_FAILED, &f,
			  "GPU %s: recovery failed (%s): %s; its VFs stay out of service."
			  " After fixing it by hand: echo 0 > gpus/%s/drain",
			  parent, outcome_names[r->pending.outcome], r->pending.detail, parent);
	count_outcome(r, parent, r->pending.outcome, r->pending.duration_s);
	r->pending.parent[0] = '\0';
	if (r->register_sysfs)
		kick_rescan(r, false); /* the cycle changed its VFs */
	return true;
}

struct line_context {
	struct recovery *r;
	const char *parent;
	const char *program;
};

/* The cycle's init exists, the program not yet: record it first. */
static int program_started(void *userdata, pid_t init)
{
	const struct line_context *c = userdata;
	int k = record_write(c->r, init);

	if (k < 0)
		log_err("GPU %s: cannot record the cycle in %s: %s", c->parent, c->r->record_path,
			strerror(-k));
	return k;
}

static void program_line(void *userdata, const char *line)
{
	const struct line_context *c = userdata;
	log_info("GPU %s: %s: %s", c->parent, c->program, line);
}

static char *strv_join(char (*list)[VF_ADDR_BUFSZ], size_t n)
{
	char *s = calloc(n ? n * VF_ADDR_BUFSZ : 1, 1);

	for (size_t i = 0; s && i < n; i++) {
		if (i)
			strcat(s, " ");
		strcat(s, list[i]);
	}
	return s;
}

/* Run the program for parent (recovering) and set r->pending to the
 * outcome.  A stop leaves the GPU recovering and pending empty. */
static void run_cycle(struct recovery *r, const char *parent)
{
	_cleanup_free_ char(*vfs)[VF_ADDR_BUFSZ] = NULL;
	_cleanup_free_ char(*before)[VF_ADDR_BUFSZ] = NULL;
	_cleanup_free_ char(*after)[VF_ADDR_BUFSZ] = NULL;
	_cleanup_free_ char *vf_list = NULL, *env_parent = NULL, *env_vfs = NULL,
			    *env_numvfs = NULL, *env_sysfs = NULL;
	size_t n_vfs = 0, n_before = 0, n_after = 0;
	struct program_result res;
	struct line_context lc = { .r = r, .parent = parent, .program = r->program };
	struct log_fields f = { .parent = parent };
	int k;

	memset(&r->pending, 0, sizeof(r->pending));
	snprintf(r->pending.parent, sizeof(r->pending.parent), "%s", parent);
	r->pending.outcome = OUTCOME_FAILED;
	r->pending.duration_s = -1;
	/* Again right before the program: the request's check is older than
	 * this, and sysfs, not the store, says what the device is and which
	 * VFs are its own. */
	const char *why = NULL;
	char in_use_vf[VF_ADDR_BUFSZ];
	size_t in_use = 0;
	k = recovery_gpu_target(r->sysfs_root, r->store, parent, &before, &n_before, &why);
	if (k < 0) {
		snprintf(r->pending.detail, sizeof(r->pending.detail), "not cycled: %s (%s)",
			 why ? why : "sysfs", strerror(-k));
		return;
	}
	/* a VF whose parent the store learnt only now may hold a claim */
	k = store_vfs_in_use(r->store, before, n_before, &in_use, in_use_vf);
	if (k < 0 || in_use) {
		snprintf(r->pending.detail, sizeof(r->pending.detail),
			 "not cycled: VF %s has a claim or a reservation",
			 k < 0 ? "(unreadable)" : in_use_vf);
		return;
	}
	k = store_gpu_vfs(r->store, parent, &vfs, &n_vfs);
	if (k < 0 && k != -ENOENT) {
		snprintf(r->pending.detail, sizeof(r->pending.detail), "cannot list its VFs: %s",
			 strerror(-k));
		return;
	}
	/* exactly the VFs sysfs shows under the GPU */
	vf_list = strv_join(before, n_before);
	if (!vf_list || asprintf(&env_parent, "VFHEALTH_PARENT=%s", parent) < 0 ||
	    asprintf(&env_vfs, "VFHEALTH_VFS=%s", vf_list) < 0 ||
	    asprintf(&env_numvfs, "VFHEALTH_NUMVFS=%zu", n_before ? n_before : n_vfs) < 0 ||
	    asprintf(&env_sysfs, "VFHEALTH_SYSFS_ROOT=%s", r->sysfs_root) < 0) {
		snprintf(r->pending.detail, sizeof(r->pending.detail), "out of memory");
		return;
	}
	char *argv[] = { r->program, (char *)parent, NULL };
	char *envp[] = { (char *)PROGRAM_PATH, env_parent, env_vfs, env_numvfs, env_sysfs, NULL };
	struct program_run run = { .exec_fd = r->program_fd,
				   .argv = argv,
				   .envp = envp,
				   .timeout_ns = r->timeout_ns,
				   .kill_grace_ns = RECOVERY_KILL_GRACE_NS,
				   .stop_fd = r->stop_fd,
				   .own_pid_ns = true,
				   .started = program_started,
				   .line = program_line,
				   .userdata = &lc };

	log_event(LOG_NOTICE, LOG_EVENT_RECOVERY_STARTED, &f,
		  "GPU %s: recovery started: running %s for its %zu VF%s (timeout %" PRId64 " s)",
		  parent, r->program, n_before, n_before == 1 ? "" : "s",
		  r->timeout_ns / NSEC_PER_SEC);
	k = program_run(&run, &res);
	record_clear(r); /* reaped: nothing of it is left */
	if (k < 0) {
		snprintf(r->pending.detail, sizeof(r->pending.detail), "cannot run %s: %s",
			 r->program, strerror(-k));
		return;
	}
	r->pending.duration_s = (double)res.elapsed_ns / NSEC_PER_SEC;
	switch (res.end) {
	case PROGRAM_STOPPED:
		log_warn("GPU %s: vfhealthd stops: %s killed; the GPU stays recovering and is"
			 " failed (interrupted) at the next start",
			 parent, r->program);
		r->pending.parent[0] = '\0';
		return;
	case PROGRAM_TIMED_OUT:
		r->pending.outcome = OUTCOME_TIMEOUT;
		snprintf(r->pending.detail, sizeof(r->pending.detail),
			 "timed out after %" PRId64 " s: killed", r->timeout_ns / NSEC_PER_SEC);
		return;
	case PROGRAM_SIGNALED:
		snprintf(r->pending.detail, sizeof(r->pending.detail), "killed by signal %s",
			 sigabbrev_np(res.status) ? sigabbrev_np(res.status) : "?");
		return;
	case PROGRAM_EXITED:
		break;
	}
	if (res.status != 0) {
		snprintf(r->pending.detail, sizeof(r->pending.detail), "exit %d%s%.160s",
			 res.status, res.last_line[0] ? ": " : "", res.last_line);
		return;
	}
	/* exit 0 is not enough: every VF must be back */
	k = sysfs_virtfns(r->sysfs_root, parent, &after, &n_after);
	if (k < 0 && k != -ENOENT) {
		snprintf(r->pending.detail, sizeof(r->pending.detail),
			 "cannot read its virtfn links: %s", strerror(-k));
		return;
	}
	/* every VF sysfs showed before, and every registered one, is back */
	size_t missing = 0, expected = 0;
	const char *first = NULL;
	for (size_t i = 0; i < n_before + n_vfs; i++) {
		const char *vf = i < n_before ? before[i] : vfs[i - n_before];
		bool found = false;
		for (size_t j = 0; i >= n_before && j < n_before && !found; j++)
			found = strcmp(vf, before[j]) == 0;
		if (found)
			continue; /* counted among the ones sysfs showed */
		expected++;
		for (size_t j = 0; j < n_after && !found; j++)
			found = strcmp(vf, after[j]) == 0;
		if (!found) {
			missing++;
			first = first ? first : vf;
		}
	}
	if (missing) {
		r->pending.outcome = OUTCOME_VF_MISSING;
		snprintf(r->pending.detail, sizeof(r->pending.detail),
			 "VF %s did not come back (%zu of %zu missing)", first, missing, expected);
		return;
	}
	r->pending.ok = true;
	r->pending.outcome = OUTCOME_SUCCESS;
	snprintf(r->pending.detail, sizeof(r->pending.detail), "took %.1f s",
		 r->pending.duration_s);
}

/* GPUs an earlier vfhealthd left recovering become failed; false: the
 * store could not say (try again). */
static bool fail_interrupted(struct recovery *r)
{
	_cleanup_free_ char(*parents)[VF_ADDR_BUFSZ] = NULL;
	size_t n = 0;

	if (store_gpu_fail_interrupted(r->store, &parents, &n) < 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		struct log_fields f = { .parent = parents[i], .reason = "interrupted" };
		log_event(LOG_ERR, LOG_EVENT_RECOVERY_FAILED, &f,
			  "GPU %s: recovery failed (interrupted): vfhealthd stopped during its"
			  " cycle, which is not run again by itself; its VFs stay out of service."
			  " Check the GPU, its SR-IOV and the services the program stops (it"
			  " may not have started them again), then: echo cycle >"
			  " gpus/%s/recover, or echo 0 > gpus/%s/drain",
			  parents[i], parents[i], parents[i]);
		count_outcome(r, parents[i], OUTCOME_INTERRUPTED, -1);
	}
	return true;
}

/* What parent's history says to the policy; false: it could not be read. */
static bool gpu_history_facts(struct recovery *r, const char *parent, struct auto_history *ret)
{
	_cleanup_free_ struct store_gpu_event *h = NULL;
	size_t n = 0, dropped = 0;

	if (store_gpu_history(r->store, parent, HISTORY_SCAN, &h, &n, &dropped) < 0)
		return false;
	auto_history_read(h, n, ret);
	return true;
}

static bool observed_once(struct recovery *r, const char *parent)
{
	for (size_t i = 0; i < r->n_observed; i++)
		if (strcmp(r->observed[i], parent) == 0)
			return false;
	char(*grown)[VF_ADDR_BUFSZ] = reallocarray(r->observed, r->n_observed + 1, sizeof(*grown));
	if (!grown)
		return true;
	r->observed = grown;
	snprintf(r->observed[r->n_observed++], VF_ADDR_BUFSZ, "%s", parent);
	return true;
}

/* The end of parent's automatic drain at its deadline (g: as the policy
 * saw it); false when the store refused it (*retry: try again later). */
static bool auto_undrain(struct recovery *r, const struct auto_gpu *g, bool *retry)
{
	char detail[STORE_GPU_DETAIL_MAX + 1];
	const char *why =
		g->state == STORE_GPU_DRAINING ?
			"a VM still uses a VF of it" :
			"it was not cycled (observe mode, auto_recover off or another GPU's cycle)";
	struct log_fields f = { .parent = g->parent, .reason = detail };
	bool unchanged = false;
	double timeout_s = (double)r->drain_timeout_ns / NSEC_PER_SEC;
	int k;

	snprintf(detail, sizeof(detail), "auto: the drain timed out after %g s: %s", timeout_s,
		 why);
	k = store_gpu_drain(r->store, g->parent, false, -1, detail, &unchanged);
	if (k < 0) {
		log_warn("GPU %s: cannot end its automatic drain at its deadline: %s", g->parent,
			 strerror(-k));
		*retry = true;
		return false;
	}
	if (unchanged)
		return true;
	log_event(LOG_WARNING, LOG_EVENT_NONE, &f,
		  "GPU %s: its automatic drain timed out after %g s (%s): the GPU serves again,"
		  " its healthy VFs are allocatable, its quarantined VFs stay out of service;"
		  " auto_recover drains it again only for quarantines after now."
		  " Find what quarantined them (cat VF/failures) and cycle it by hand",
		  g->parent, timeout_s, why);
	count_drain_timeout(r, g->parent);
	return true;
}

/* The automatic policy's step: true when it changed something (look again);
 * *wait_ns: the nearest deadline of an automatic drain (-1: none), *retry:
 * the store refused a step (try again later). */
static bool auto_step(struct recovery *r, const struct store_gpu_info *gpus, size_t n_gpus,
		      int64_t *wait_ns, bool *retry)
{
	_cleanup_free_ struct store_vf_info *vfs = NULL;
	_cleanup_free_ struct auto_gpu *ag = NULL;
	size_t n_vfs = 0;
	int threshold = store_auto_recover_get(r->store);
	int mode = store_mode_get(r->store);
	int64_t now = realtime_ns();

	*wait_ns = -1;
	if (n_gpus == 0 || threshold < 0 || mode < 0)
		return false;
	if (!r->program)
		threshold = 0; /* no cycle: only a deadline is kept */
	if (store_vf_list(r->store, &vfs, &n_vfs) < 0 || !(ag = calloc(n_gpus, sizeof(*ag)))) {
		*retry = true; /* a deadline may be due */
		return false;
	}
	for (size_t i = 0; i < n_gpus; i++) {
		struct auto_history h;
		bool any = false;

		ag[i] = (struct auto_gpu){ .parent = gpus[i].parent, .state = gpus[i].state };
		for (size_t v = 0; v < n_vfs && !any && threshold > 0; v++)
			any = vfs[v].auto_quarantined && strcmp(vfs[v].parent, gpus[i].parent) == 0;
		bool drained = gpus[i].state == STORE_GPU_DRAINING ||
			       gpus[i].state == STORE_GPU_DRAINED;
		if ((!any && !drained) || !gpu_history_facts(r, gpus[i].parent, &h))
			continue; /* facts unknown: nothing is done to it */
		ag[i].auto_drained = h.auto_drain && drained;
		ag[i].drained_ns = h.drained_at_ns >= 0 ? now - h.drained_at_ns : 0;
		for (size_t v = 0; v < n_vfs; v++)
			ag[i].fresh_quarantines += vfs[v].auto_quarantined &&
						   strcmp(vfs[v].parent, gpus[i].parent) == 0 &&
						   auto_counts(&h, vfs[v].since);
	}
	bool observe = mode == STORE_MODE_OBSERVE;
	struct auto_policy policy = { .threshold = threshold,
				      .drain_timeout_ns = r->drain_timeout_ns,
				      .observe = observe };
	struct auto_step step = auto_next(ag, n_gpus, &policy);
	*wait_ns = step.wait_ns;
	if (step.action == AUTO_NOTHING)
		return false;
	const struct auto_gpu *g = &ag[step.index];
	char detail[STORE_GPU_DETAIL_MAX + 1];
	int k;

	if (step.action == AUTO_UNDRAIN)
		return auto_undrain(r, g, retry);
	if (step.action == AUTO_DRAIN) {
		if (observe) {
			if (observed_once(r, g->parent))
				log_notice(
					"GPU %s: observe mode: auto_recover would drain it (%zu VFs"
					" out of service by quarantine) and cycle it once drained",
					g->parent, g->fresh_quarantines);
			return false;
		}
		/* The drain covers every VF sysfs shows under a GPU (adopted
		 * first), as an operator's does; a device that is no NVIDIA
		 * GPU is drained by its stored VFs alone, and its cycle is
		 * refused by the thread's own check. */
		_cleanup_free_ char(*sysfs_vfs)[VF_ADDR_BUFSZ] = NULL;
		size_t n_sysfs_vfs = 0;
		const char *why = NULL;
		k = recovery_gpu_target(r->sysfs_root, r->store, g->parent, &sysfs_vfs,
					&n_sysfs_vfs, &why);
		if (k < 0 && k != -EPERM)
			log_warn("GPU %s: auto_recover drains it by its recorded VFs only: %s: %s",
				 g->parent, why ? why : "cannot read sysfs", strerror(-k));
		snprintf(detail, sizeof(detail), "auto: %zu VFs out of service by quarantine",
			 g->fresh_quarantines);
		k = store_gpu_drain(r->store, g->parent, true, -1, detail, NULL);
		if (k == 0 && r->drain_timeout_ns > 0)
			log_notice("GPU %s: auto_recover drains it (%zu VFs out of service by"
				   " quarantine, auto_recover %d); its cycle runs once no VM is"
				   " left, else the drain ends after %g s (--auto-drain-timeout)",
				   g->parent, g->fresh_quarantines, threshold,
				   (double)r->drain_timeout_ns / NSEC_PER_SEC);
		else if (k == 0)
			log_notice(
				"GPU %s: auto_recover drains it (%zu VFs out of service by"
				" quarantine, auto_recover %d); its cycle runs once no VM is left",
				g->parent, g->fresh_quarantines, threshold);
		return k == 0;
	}
	if (observe || last_cycle_lingers(r))
		return false;
	k = store_gpu_recover_begin(r->store, g->parent, -1, NULL);
	if (k < 0 && k != -EBUSY)
		log_warn("GPU %s: auto_recover cannot start its cycle: %s", g->parent,
			 strerror(-k));
	return k == 0;
}

/* One pass; true when it must run again at once, *retry when something
 * must be tried again later (the store was unavailable), *wait_ns when the
 * policy must look again in that long (-1: only on a change). */
static bool step(struct recovery *r, bool *retry, int64_t *wait_ns)
{
	_cleanup_free_ struct store_gpu_info *gpus = NULL;
	size_t n = 0;

	*retry = false;
	*wait_ns = -1;
	if (!r->interrupted_done && !(r->interrupted_done = fail_interrupted(r))) {
		*retry = true;
		return false;
	}
	if (r->pending.parent[0]) {
		*retry = !finish_pending(r);
		return !*retry;
	}
	int64_t rescan_wait_ns = -1;
	bool rescan_retry = false;
	if (r->register_sysfs)
		rescan_step(r, &rescan_retry, &rescan_wait_ns);
	if (store_gpu_list(r->store, &gpus, &n) < 0) {
		*retry = true;
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		if (gpus[i].state != STORE_GPU_RECOVERING)
			continue;
		if (!r->program) {
			snprintf(r->pending.parent, sizeof(r->pending.parent), "%s",
				 gpus[i].parent);
			r->pending.outcome = OUTCOME_FAILED;
			r->pending.duration_s = -1;
			snprintf(r->pending.detail, sizeof(r->pending.detail),
				 "no --recover-program");
			return true;
		}
		run_cycle(r, gpus[i].parent);
		return r->pending.parent[0] != '\0';
	}
	bool again = auto_step(r, gpus, n, wait_ns, retry);
	*retry |= rescan_retry;
	if (rescan_wait_ns >= 0 && (*wait_ns < 0 || rescan_wait_ns < *wait_ns))
		*wait_ns = rescan_wait_ns;
	return again;
}

static void *recovery_main(void *arg)
{
	struct recovery *r = arg;
	bool again = true, retry = false;
	int64_t wait_ns = -1;

	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		if (!again && !r->kicked) {
			int64_t wait = retry ? RETRY_NS : -1;
			if (wait_ns >= 0 && (wait < 0 || wait_ns < wait))
				wait = wait_ns;
			if (wait >= 0) {
				struct timespec until;
				clock_gettime(CLOCK_MONOTONIC, &until);
				int64_t ns = until.tv_nsec + wait % NSEC_PER_SEC;
				until.tv_sec += (time_t)(wait / NSEC_PER_SEC + ns / NSEC_PER_SEC);
				until.tv_nsec = (long)(ns % NSEC_PER_SEC);
				if (pthread_cond_timedwait(&r->cond, &r->lock, &until) == ETIMEDOUT)
					r->kicked = true;
			} else {
				pthread_cond_wait(&r->cond, &r->lock);
			}
			continue;
		}
		r->kicked = false;
		pthread_mutex_unlock(&r->lock);
		again = step(r, &retry, &wait_ns);
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* -- the public side ------------------------------------------------------------ */

int recovery_start(struct recovery *r, struct store *s)
{
	pthread_condattr_t attr;
	int k;

	if (!r || !s || atomic_load(&r->running))
		return -EINVAL;
	r->store = s;
	r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->stop_fd < 0)
		return -errno;
	/* the retry wait runs on the monotonic clock */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_destroy(&r->cond);
	pthread_cond_init(&r->cond, &attr);
	pthread_condattr_destroy(&attr);
	if (store_auto_recover_get(s) > 0 && !r->program)
		log_warn("auto_recover is %d but vfhealthd runs with no --recover-program:"
			 " nothing is recovered automatically",
			 store_auto_recover_get(s));
	if (r->register_sysfs) {
		bool again = false;

		/* before READY=1; the thread's first step looks again, once a
		 * GPU an earlier vfhealthd left recovering is failed */
		(void)register_scan(&r->reg, r->sysfs_root, s, &again);
		r->rescan = true;
		k = uevent_open(&r->uevent_fd);
		if (k < 0)
			log_warn("cannot hear the kernel's uevents: %s; sysfs is looked at every"
				 " %" PRId64 " s instead",
				 strerror(-k), REGISTER_RESCAN_NS / NSEC_PER_SEC);
	}
	k = -pthread_create(&r->thread, NULL, recovery_main, r);
	if (k < 0)
		return k;
	atomic_store(&r->running, true);
	if (r->uevent_fd >= 0) {
		k = -pthread_create(&r->uevent_thread, NULL, uevent_main, r);
		if (k < 0) {
			uevents_lost(r, "cannot start the uevent thread", k);
		} else {
			r->uevent_running = true;
		}
	}
	return 0;
}

void recovery_stop(struct recovery *r)
{
	if (!r || !atomic_load(&r->running))
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	if (eventfd_write(r->stop_fd, 1) < 0)
		log_warn("recovery: cannot signal the stop: %s", strerror(errno));
	pthread_join(r->thread, NULL);
	if (r->uevent_running)
		pthread_join(r->uevent_thread, NULL); /* it polls stop_fd too */
	r->uevent_running = false;
	atomic_store(&r->running, false);
}

void recovery_free(struct recovery *r)
{
	if (!r)
		return;
	recovery_stop(r);
	if (r->stop_fd >= 0)
		close(r->stop_fd);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r->counts);
	free(r->observed);
	if (r->program_fd >= 0)
		close(r->program_fd);
	if (r->linger_fd >= 0)
		close(r->linger_fd);
	if (r->uevent_fd >= 0)
		close(r->uevent_fd);
	free(r->program);
	free(r->record_path);
	free(r->sysfs_root);
	free(r);
}

int recovery_request(struct recovery *r, const char *parent, int64_t uid, const char **why)
{
	struct store_gpu_refusal refusal;
	int k;

	if (!recovery_configured(r)) {
		*why = "vfhealthd runs no cycle: it was started without --recover-program";
		return -EOPNOTSUPP;
	}
	/* The mount serves before the thread starts (and after it stopped):
	 * only a running thread's store may be read here. */
	if (!atomic_load(&r->running)) {
		*why = "vfhealthd is starting or stopping: no cycle can start now; try again";
		return -EAGAIN;
	}
	/* the device is what sysfs says, never what a writer stored */
	_cleanup_free_ char(*vfs)[VF_ADDR_BUFSZ] = NULL;
	size_t n_vfs = 0;
	k = recovery_gpu_target(r->sysfs_root, r->store, parent, &vfs, &n_vfs, why);
	if (k < 0)
		return k;
	k = store_mode_get(r->store);
	if (k < 0)
		return k;
	if (k == STORE_MODE_OBSERVE) {
		log_notice("GPU %s: observe mode: a cycle asked by uid %" PRId64
			   " would run %s; nothing was run",
			   parent, uid, r->program);
		*why = "observe mode: vfhealthd runs no cycle (the log says what it would run)";
		return -EPERM;
	}
	if (last_cycle_lingers(r)) {
		*why = "processes of the last cycle, which an earlier vfhealthd started, still run"
		       " (the log says which)";
		return -EBUSY;
	}
	k = store_gpu_recover_begin(r->store, parent, uid, &refusal);
	if (k == -EBUSY) {
		*why = refusal.recovering[0] ? "another GPU is recovering: one at a time" :
		       refusal.state == STORE_GPU_SERVING ?
					       "the GPU serves: drain it first (echo 1 > drain)" :
		       refusal.state == STORE_GPU_DRAINING ?
					       "the GPU is draining: a VF of it still has a claim" :
					       "a cycle of this GPU runs already";
		return k;
	}
	if (k < 0)
		return k;
	kick(r);
	return 0;
}

void recovery_store_changed(void *userdata, const struct store_change *change)
{
	struct recovery *r = userdata;
	unsigned bits = change->bits;
	/* a GPU's phase (a cycle asked for), the setting, the mode and the
	 * store's availability always; quarantines and claims only matter to
	 * the automatic policy, and a busy host has many */
	unsigned always = STORE_CHANGE_GPU | STORE_CHANGE_AUTO_RECOVER | STORE_CHANGE_MODE |
			  STORE_CHANGE_STATUS;
	unsigned policy = STORE_CHANGE_QUARANTINE | STORE_CHANGE_CLAIMS | STORE_CHANGE_RESERVATION;

	if (!r || !atomic_load(&r->running))
		return;
	/* a VF kept absent leaves once its claim ends or its record is
	 * cleared; a store that serves again (repaired, perhaps a new
	 * database) gets what sysfs shows */
	if (r->register_sysfs && (((bits & (STORE_CHANGE_CLAIMS | STORE_CHANGE_RESERVATION |
					    STORE_CHANGE_QUARANTINE | STORE_CHANGE_FAILURES)) &&
				   atomic_load(&r->keeps_absent)) ||
				  (bits & STORE_CHANGE_STATUS)))
		kick_rescan(r, false);
	if ((bits & always) ||
	    ((bits & policy) && r->program && store_auto_recover_get(r->store) > 0))
		kick(r);
}
