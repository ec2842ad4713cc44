/* SPDX-License-Identifier: MIT */
/*
 * claims.c - the assignment files (claims.h): staging, commit at FLUSH, the
 * bare claim at RELEASE, over the store's claim API.
 */
#include "fs/claims.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fs/vfiles.h"
#include "grammar/assignment.h"
#include "common/cleanup.h"
#include "common/endpoint.h"
#include "common/log.h"
#include "common/procfs.h"
#include "common/sockdir.h"
#include "store/rules.h"

enum claim_state claim_next(enum claim_state s, enum claim_event ev)
{
	if (s == CLAIM_POISONED || ev == CLAIM_EV_REFUSE)
		return CLAIM_POISONED;
	switch (ev) {
	case CLAIM_EV_STAGE:
		return s == CLAIM_RESERVED       ? CLAIM_RESERVED_STAGED :
		       s == CLAIM_MADE           ? CLAIM_MADE_STAGED :
		       s == CLAIM_OPEN           ? CLAIM_STAGED :
		       s == CLAIM_RELEASE_STAGED ? CLAIM_POISONED :
						   s;
	case CLAIM_EV_STAGE_RELEASE:
		return s == CLAIM_RESERVED || s == CLAIM_OPEN || s == CLAIM_MADE ||
				       s == CLAIM_RELEASE_STAGED ?
			       CLAIM_RELEASE_STAGED :
			       CLAIM_POISONED;
	case CLAIM_EV_COMMIT:
		return s == CLAIM_RESERVED_STAGED || s == CLAIM_MADE_STAGED ? CLAIM_MADE :
		       s == CLAIM_STAGED                                    ? CLAIM_OPEN :
									      s;
	case CLAIM_EV_INCOMPLETE:
		return s;
	case CLAIM_EV_RELEASED:
		return CLAIM_OPEN;
	case CLAIM_EV_REFUSE:
		break;
	}
	return CLAIM_POISONED;
}

/* Whether h made the reservation it names and has not committed it. */
static bool holds_reservation(const struct claim_handle *h)
{
	return h->state == CLAIM_RESERVED || h->state == CLAIM_RESERVED_STAGED;
}

/* Whether h made the claim it names, from its own reservation. */
static bool made_claim(const struct claim_handle *h)
{
	return h->state == CLAIM_MADE || h->state == CLAIM_MADE_STAGED;
}

/* Whether h has lines staged. */
static bool staged(const struct claim_handle *h)
{
	return h->state == CLAIM_RESERVED_STAGED || h->state == CLAIM_MADE_STAGED ||
	       h->state == CLAIM_STAGED;
}

/* -- the outcome (claims.h) ----------------------------------------------------------- */

static const char *errno_name(int r)
{
	switch (-r) {
	case EINVAL:
		return "EINVAL";
	case EBUSY:
		return "EBUSY";
	case EEXIST:
		return "EEXIST";
	case ENOENT:
		return "ENOENT";
	case ESTALE:
		return "ESTALE";
	case EIO:
		return "EIO";
	case EACCES:
		return "EACCES";
	case ENAMETOOLONG:
		return "ENAMETOOLONG";
	case ENOMEM:
		return "ENOMEM";
	default:
		return "error";
	}
}

static void set_outcome(struct claim_handle *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void set_outcome(struct claim_handle *h, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(h->outcome, sizeof(h->outcome), fmt, ap);
	va_end(ap);
}

static void set_refused(struct claim_handle *h, int r, const char *why)
{
	set_outcome(h, "refused %s: %s", errno_name(r), why ? why : strerror(-r));
}

int64_t claims_read_offset(struct claim_handle *h, uint64_t off)
{
	/* from offset 0 (pread) or from where the writes left the
	 * descriptor's offset (a shell's `cat <&3`): a fresh read */
	if (off == 0 || off == h->written)
		h->read_base = off;
	return off < h->read_base ? -1 : (int64_t)(off - h->read_base);
}

int claims_read_outcome(const struct claim_handle *h, uint64_t off, size_t size, char *buf,
			size_t *len)
{
	size_t n = strlen(h->outcome);

	*len = 0;
	/* the line and its newline */
	for (; off <= n && *len < size && off + *len <= n; (*len)++)
		buf[*len] = off + *len < n ? h->outcome[off + *len] : '\n';
	return 0;
}

/* -- the assignment file of a stored claim ------------------------------------------ */

/* The key=value lines of text applied to a copy of current (the grammar
 * checks every line); a written pid= records its start time (0 when /proc
 * cannot tell). */
int claim_parse_update(const struct store_claim *current, const char *text, bool may_set_claimed_at,
		       struct store_claim *ret)
{
	struct store_claim next = *current;
	unsigned written;
	int r;

	r = assignment_parse_update(&current->a, text, may_set_claimed_at, &next.a, &written);
	if (r < 0)
		return r;
	if ((written & (1u << ASSIGNMENT_PID)) && next.a.pid > 0 &&
	    proc_pid_starttime(NULL, next.a.pid, &next.a.pid_starttime) < 0)
		next.a.pid_starttime = 0;
	*ret = next;
	return 0;
}

int claims_render(const struct claims *c, const struct claim_handle *h, FILE *out)
{
	struct store_claim claim;
	/* By name: a reservation reads like the claim it will be.  Served from
	 * memory, also while the store is unavailable: the sentinel keeps
	 * polling the claims it lists, and a claim's content decides no
	 * placement (tests/fs/test-failclosed.sh). */
	int r = store_claim_get(c->store, h->vf, h->instance_id, STORE_READ_MEMORY, &claim);

	return r < 0 ? r : assignment_render(&claim.a, out);
}

/* -- the log ------------------------------------------------------------------------ */

static const char *claim_path(const char *vf, const char *instance, char *buf, size_t size)
{
	snprintf(buf, size, "%s/assignments/%s", vf, instance);
	return buf;
}

#define CLAIM_PATH_BUFSZ (VF_ADDR_BUFSZ + INSTANCE_ID_MAX + 16)

/* The audit line of a claim made, with its claimant (the open's: RELEASE
 * carries no credentials). */
static void log_claimed(const struct store_claim *c, uid_t uid, pid_t pid)
{
	char path[CLAIM_PATH_BUFSZ];
	struct log_fields f = { .vf = c->a.vf,
				.instance = c->a.instance_id,
				.claimed_at = c->a.claimed_at,
				.has_writer = true,
				.writer_uid = (uint32_t)uid,
				.writer_pid = (int32_t)pid };

	log_event(LOG_INFO, LOG_EVENT_CLAIMED, &f,
		  "claim %s accepted (uid %u, pid %d): claimed_at=%s",
		  claim_path(c->a.vf, c->a.instance_id, path, sizeof(path)), (unsigned)uid,
		  (int)pid, c->a.claimed_at);
}

/* Once, at notice, at the last close of the open file that made or
 * completed it: whether the claim it left is unwatched (a reservation
 * completed through the same open is not). */
static void log_unwatched(const struct store_claim *c)
{
	if (!c->reserved && !rule_claim_watched(c->a.agent))
		log_notice("%s: claim of instance %s is unwatched: it names no agent=, so it only "
			   "excludes the VF and no guest is polled for it",
			   c->a.vf, c->a.instance_id);
}

/* The audit line of what a writer wrote, as every file's: its text on one
 * line (control characters shown as spaces, the last newline dropped). */
static void log_written(const struct claim_handle *h, const char *text, uid_t uid, pid_t pid)
{
	char path[CLAIM_PATH_BUFSZ], shown[ASSIGNMENT_FILE_MAX + 1];
	size_t n = strnlen(text, sizeof(shown) - 1);

	if (n && text[n - 1] == '\n')
		n--;
	for (size_t i = 0; i < n; i++)
		shown[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? ' ' : text[i];
	shown[n] = '\0';
	log_info("write to %s accepted (uid %u, pid %d): %s",
		 claim_path(h->vf, h->instance_id, path, sizeof(path)), (unsigned)uid, (int)pid,
		 shown);
}

static void log_claim_refused(const struct claim_handle *h, uid_t uid, pid_t pid, const char *why)
{
	char path[CLAIM_PATH_BUFSZ];

	log_info("claim %s refused (uid %u, pid %d): %s",
		 claim_path(h->vf, h->instance_id, path, sizeof(path)), (unsigned)uid, (int)pid,
		 why);
}

/* Why the store refused a complete claim, for the log. */
static const char *commit_refusal(const struct store_claim *next, int r)
{
	if (r == -EINVAL &&
	    rule_claim_watch_refusal(next->a.agent, next->a.control, next->a.pid) < 0)
		return CLAIM_WATCH_RULE;
	if (r == -EINVAL)
		return "claimed_at is later than every earlier claim's of the VF";
	return strerror(-r);
}

/* -- making one --------------------------------------------------------------------- */

/* Why a claim of vf by instance is busy, as the VF is now: the instance
 * that holds it, the operator's hold, a quarantine (enforced), or its
 * GPU's drain or cycle. */
static void busy_reason(const struct claims *c, const struct store_vf_info *vf,
			const char *instance, char *buf, size_t size)
{
	_cleanup_free_ struct store_claim *holders = NULL;
	struct store_vf_info now;
	struct store_gpu_info gpu;
	size_t n = 0;

	if (store_vf_get(c->store, vf->vf, STORE_READ_MEMORY, &now) == 0)
		vf = &now;
	if (store_claim_list(c->store, vf->vf, &holders, &n) == 0 && n &&
	    strcmp(holders[0].a.instance_id, instance) != 0)
		snprintf(buf, size, "claimed by instance %s%s", holders[0].a.instance_id,
			 holders[0].reserved ? " (reserved)" : "");
	else if (vf->held)
		snprintf(buf, size, "the VF is held");
	else if (vf->quarantined && store_mode_get(c->store) != STORE_MODE_OBSERVE)
		snprintf(buf, size, "the VF is quarantined");
	else if (vf->parent[0] &&
		 store_gpu_get(c->store, vf->parent, STORE_READ_MEMORY, &gpu) == 0 &&
		 gpu.state != STORE_GPU_SERVING)
		snprintf(buf, size, "its GPU %s is %s", vf->parent,
			 store_gpu_state_name(gpu.state));
	else
		snprintf(buf, size, "out of service or claimed when it was asked");
}

int claims_make(const struct claims *c, const struct store_vf_info *vf, const char *instance,
		bool reserve, struct store_claim *ret)
{
	struct store_claim want = { 0 };
	int r;

	if (!instance_id_valid(instance))
		return -EINVAL;
	snprintf(want.a.vf, sizeof(want.a.vf), "%s", vf->vf);
	snprintf(want.a.instance_id, sizeof(want.a.instance_id), "%s", instance);
	/* liveness evidence recorded by the daemon, not the writer; unknown ("")
	 * when it cannot be read */
	if (proc_boot_id(NULL, want.a.boot_id) < 0)
		want.a.boot_id[0] = '\0';
	/* claimed_at "": the store stamps the current time. */
	r = reserve ? store_claim_reserve(c->store, &want, ret) : store_claim(c->store, &want, ret);
	if (r == -EBUSY || r == -EIO) {
		char why[128 + INSTANCE_ID_MAX];

		if (r == -EBUSY)
			busy_reason(c, vf, instance, why, sizeof(why));
		else
			snprintf(why, sizeof(why), "the store is unavailable");
		log_event(LOG_WARNING, LOG_EVENT_CLAIM_REFUSED,
			  &(struct log_fields){
				  .vf = want.a.vf, .instance = instance, .reason = why },
			  "%s: claim by instance %s refused (%s): %s", want.a.vf, instance,
			  strerror(-r), why);
	}
	return r;
}

void claim_handle_init(struct claim_handle *h, const struct store_claim *claim, uint64_t vf_id,
		       bool created, uid_t uid, pid_t pid)
{
	memset(h, 0, sizeof(*h));
	h->vf_id = vf_id;
	h->state = created ? CLAIM_RESERVED : CLAIM_OPEN;
	snprintf(h->vf, sizeof(h->vf), "%s", claim->a.vf);
	snprintf(h->instance_id, sizeof(h->instance_id), "%s", claim->a.instance_id);
	h->claim_id = claim->id;
	h->uid = uid;
	h->pid = pid;
}

void claim_handle_free(struct claim_handle *h)
{
	free(h->staged);
	h->staged = NULL;
	h->staged_len = 0;
}

/* The claim (or reservation) h was opened on; -ENOENT once it is gone. */
static int handle_claim(const struct claims *c, const struct claim_handle *h,
			struct store_claim *ret)
{
	return store_claim_get_by_id(c->store, h->vf_id, h->claim_id, ret);
}

/* A refusal: nothing from h is committed any more; a reservation it made
 * is cancelled at once (the VF is free again for the next placement), and a
 * claim it made (committed by an earlier close of a duplicate of the
 * descriptor) is released: what was sent was not a whole claim. */
static int poison(const struct claims *c, struct claim_handle *h, int r, const char *why)
{
	char path[CLAIM_PATH_BUFSZ];

	set_refused(h, r, why);
	h->refusal_told = false;
	if (holds_reservation(h))
		store_claim_cancel(c->store, h->vf, h->claim_id);
	if (made_claim(h) &&
	    store_release(c->store, h->vf, h->instance_id,
			  &(struct store_release_opts){ .claimed_at = h->made_at,
							.how = "refused",
							.uid = (int64_t)h->uid }) == 0)
		log_info("release of %s: a line written after it was made was refused",
			 claim_path(h->vf, h->instance_id, path, sizeof(path)));
	h->state = claim_next(h->state, CLAIM_EV_REFUSE);
	claim_handle_free(h);
	return r;
}

/* The confused deputy (docs/security.md): root's sentinel connects to and
 * stats what claims name, so a socket path a write sets must pass the claim
 * rule both programs apply (sockdirs_check_claim, common/sockdir.h).  Values
 * the write leaves as they were are not judged again. */
static int claim_write_confined(const struct claims *c, const struct claim_handle *h,
				const struct store_claim *current, const struct store_claim *next,
				uid_t uid, pid_t pid, const char **why)
{
	bool control = next->a.control[0] && strcmp(next->a.control, current->a.control) != 0;
	bool agent = next->a.agent[0] && strcmp(next->a.agent, current->a.agent) != 0;
	const char *key = NULL, *path = NULL;
	struct endpoint ep;
	int r;

	r = sockdirs_check_claim(c->socket_dirs, control ? next->a.control : NULL,
				 agent && endpoint_parse(next->a.agent, &ep) == 0 ? &ep : NULL,
				 &key, &path);
	if (r < 0) {
		const char *what = r == -EACCES ?
					   "outside the socket directories or through a symlink" :
					   "cannot check it";
		log_warn("%s: claim of instance %s: %s=%s refused (%s) for uid %u pid %d: %s",
			 h->vf, h->instance_id, key,
			 strcmp(key, "agent") == 0 ? next->a.agent : path, what, (unsigned)uid,
			 (int)pid, strerror(-r));
		if (why)
			*why = r == -EACCES ?
				       "a socket path (control= or agent=) is outside the "
				       "socket directories or reached through a symlink" :
				       "a socket path (control= or agent=) cannot be checked";
	}
	return r;
}

/* What text makes of h's claim: *current and *next, judged by the grammar
 * and by the socket-path rule; why (when not NULL) gets the refusal's
 * rule.  Both a write (staging) and a commit judge this way. */
static int judge_update(const struct claims *c, const struct claim_handle *h, const char *text,
			uid_t uid, pid_t pid, struct store_claim *current, struct store_claim *next,
			const char **why)
{
	int r = handle_claim(c, h, current);

	if (r < 0 && why)
		*why = "the claim is gone (released, or its reservation cancelled)";
	if (r == 0) {
		r = claim_parse_update(current, text, holds_reservation(h), next);
		if (r < 0 && why)
			*why = assignment_update_refusal(&current->a, text, holds_reservation(h));
	}
	if (r == 0)
		r = claim_write_confined(c, h, current, next, uid, pid, why);
	return r;
}

/* -- releasing ---------------------------------------------------------------------- */

/* The ended claim of h's instance with claimed_at, from the VF's history:
 * 0 with *ret, or -ENOENT. */
static int claim_ended(const struct claims *c, const struct claim_handle *h, const char *claimed_at,
		       struct store_history_entry *ret)
{
	_cleanup_free_ struct store_history_entry *past = NULL;
	size_t n = 0, dropped;
	int r = store_history_list(c->store, h->vf, HISTORY_MAX, &past, &n, &dropped);

	for (size_t i = 0; r == 0 && i < n; i++)
		if (past[i].kind == STORE_HISTORY_CLAIM && past[i].ended_at[0] &&
		    strcmp(past[i].instance_id, h->instance_id) == 0 &&
		    strcmp(past[i].at, claimed_at) == 0) {
			*ret = past[i];
			return 0;
		}
	return -ENOENT;
}

/* FLUSH of a staged release: the store's answer, or done already. */
static int commit_release(const struct claims *c, struct claim_handle *h)
{
	char line[2 * RFC3339_BUFSZ + 48], path[CLAIM_PATH_BUFSZ];
	struct assignment_release rel;
	struct store_history_entry past;
	bool suspect = false;
	int64_t after_ms = 0;
	int r;

	if (assignment_parse_release(h->staged, &rel) <= 0) /* checked when staged */
		return poison(c, h, -EINVAL, "not a release command");
	r = store_release(c->store, h->vf, h->instance_id,
			  &(struct store_release_opts){
				  .claimed_at = rel.claimed_at,
				  .how = rel.crashed ? "crashed" : "released-if",
				  .crashed = rel.crashed,
				  .died_at = rel.died_at[0] ? rel.died_at : NULL,
				  .uid = h->uid,
				  .suspect_began = &suspect,
				  .died_after_ms = &after_ms });
	/* a release repeated (a retry, or after the sentinel's): done */
	if ((r == -ENOENT || r == -ESTALE) && claim_ended(c, h, rel.claimed_at, &past) == 0) {
		struct store_claim live;
		bool newer = r == -ESTALE && store_claim_get(c->store, h->vf, h->instance_id,
							     STORE_READ_MEMORY, &live) == 0;

		set_outcome(h, "already released %s ended=%s%s%s", rel.claimed_at,
			    past.how[0] ? past.how : "-", newer ? " newer=" : "",
			    newer ? live.a.claimed_at : "");
		log_info("release of %s (uid %u, pid %d): already released (ended=%s)",
			 claim_path(h->vf, h->instance_id, path, sizeof(path)), (unsigned)h->uid,
			 (int)h->pid, past.how[0] ? past.how : "-");
		r = 0;
		goto done;
	}
	if (r < 0) {
		const char *why = r == -ENOENT ? "no claim of this instance with that claimed_at "
						 "is live or on record" :
				  r == -ESTALE ? "the live claim of this instance has another "
						 "claimed_at; the one named is not on record" :
				  r == -EINVAL ? "died_at= is before claimed_at or in the future" :
				  r == -EIO    ? "the store is unavailable (read status)" :
						 strerror(-r);
		log_claim_refused(h, h->uid, h->pid, why);
		return poison(c, h, r, why);
	}
	set_outcome(h, "released %s%s%s", rel.claimed_at, rel.crashed ? " ended=crash" : "",
		    suspect ? " suspect" : "");
	snprintf(line, sizeof(line), "release=%s%s%s%s", rel.claimed_at,
		 rel.crashed ? " ended=crash" : "", rel.died_at[0] ? " died_at=" : "", rel.died_at);
	if (suspect)
		log_notice("vf %s: suspect: the VMM of %s (claimed %s) died %" PRId64 ".%03" PRId64
			   " s after its claim, within the init window",
			   h->vf, h->instance_id, rel.claimed_at, after_ms / 1000, after_ms % 1000);
	/* the VF's story (journalctl VF=) ends each claim with this event, however released */
	log_event(LOG_INFO, LOG_EVENT_RELEASED,
		  &(struct log_fields){ .vf = h->vf,
					.instance = h->instance_id,
					.claimed_at = rel.claimed_at,
					.has_writer = true,
					.writer_uid = (uint32_t)h->uid,
					.writer_pid = (int32_t)h->pid },
		  "write to %s accepted (uid %u, pid %d): %s",
		  claim_path(h->vf, h->instance_id, path, sizeof(path)), (unsigned)h->uid,
		  (int)h->pid, line);
done:
	claim_handle_free(h);
	h->state = claim_next(h->state, CLAIM_EV_RELEASED);
	return r;
}

/* -- writing ------------------------------------------------------------------------ */

/* Stage text (the whole of what is staged from now on), size bytes more. */
static void stage(struct claim_handle *h, char *text, size_t len, uint64_t off, bool append,
		  size_t size, uid_t uid, pid_t pid, enum claim_state next)
{
	free(h->staged);
	h->staged = text;
	h->staged_len = len;
	h->written = (append ? h->written : off) + size;
	h->incomplete_told = false;
	h->state = next;
	h->uid = uid;
	h->pid = pid;
}

int claims_write(const struct claims *c, struct claim_handle *h, const char *buf, size_t size,
		 uint64_t off, bool append, uid_t uid, pid_t pid, const char **why)
{
	_cleanup_free_ char *text = NULL;
	struct assignment_release release;
	struct store_claim current, next;
	size_t len = h->staged_len;
	enum claim_state after;
	int r;

	if (h->state == CLAIM_POISONED) {
		*why = "a line written earlier through this open file was refused: nothing it "
		       "writes is committed";
		return -EINVAL;
	}
	/* in order: never before what was written (a read of the outcome
	 * through the descriptor may have moved its offset on) */
	if ((off < h->written && !append) || size == 0 || memchr(buf, '\0', size) ||
	    len + 1 + size > ASSIGNMENT_FILE_MAX) {
		*why = len + 1 + size > ASSIGNMENT_FILE_MAX ?
			       "a claim is at most " PARSE_STR(ASSIGNMENT_FILE_MAX) " bytes" :
		       size == 0 || memchr(buf, '\0', size) ?
			       "a claim is text without NUL bytes" :
			       "a claim's lines are written in order through one open file";
		return poison(c, h, -EINVAL, *why);
	}
	text = malloc(len + size + 2);
	if (!text)
		return -ENOMEM;
	if (len)
		memcpy(text, h->staged, len);
	if (len && text[len - 1] != '\n')
		text[len++] = '\n';
	memcpy(text + len, buf, size);
	len += size;
	text[len] = '\0';

	/* a release is staged whole too: bash's echo sends release= and
	 * ended=crash in two write(2)s */
	r = assignment_parse_release(text, &release);
	if (r > 0) {
		after = claim_next(h->state, CLAIM_EV_STAGE_RELEASE);
		if (after == CLAIM_POISONED) {
			*why = "release= is a command of its own, written alone";
			return poison(c, h, -EINVAL, *why);
		}
		/* the shell's O_CREAT reserved the VF for a claim that was gone:
		 * free it at once; the release finds its claim on record or not */
		if (holds_reservation(h))
			store_claim_cancel(c->store, h->vf, h->claim_id);
		stage(h, move_ptr(text), len, off, append, size, uid, pid, after);
		return 0;
	}
	if (h->state == CLAIM_RELEASE_STAGED) {
		*why = "a release is release=CLAIMED_AT with at most ended=crash and died_at=TIME";
		return poison(c, h, -EINVAL, *why);
	}
	/* anything else is judged as key=value lines (release= among them too) */
	r = judge_update(c, h, text, uid, pid, &current, &next, why);
	if (r < 0)
		return poison(c, h, r, *why);
	stage(h, move_ptr(text), len, off, append, size, uid, pid,
	      claim_next(h->state, CLAIM_EV_STAGE));
	return 0;
}

/* Commit what h staged: the claim from its reservation, or an update. */
static int commit_staged(const struct claims *c, struct claim_handle *h, bool final)
{
	struct store_claim current, next;
	const char *why = NULL;
	int r;

	r = judge_update(c, h, h->staged, h->uid, h->pid, &current, &next, &why);
	if (r < 0)
		return poison(c, h, r, why);
	if (!final && rule_claim_watch_refusal(next.a.agent, next.a.control, next.a.pid) < 0) {
		/* not whole yet: a close of a duplicate descriptor (a shell's
		 * `>&7`) flushes between lines; the last close decides */
		h->state = claim_next(h->state, CLAIM_EV_INCOMPLETE);
		set_refused(h, -EINVAL, "not whole yet: " CLAIM_WATCH_RULE);
		/* once for what is staged: later closes are a reader's */
		r = h->incomplete_told ? 0 : -EINVAL;
		h->incomplete_told = true;
		return r;
	}
	if (current.reserved) {
		r = store_claim_commit(c->store, &next);
		if (r == 0) {
			log_claimed(&next, h->uid, h->pid);
			h->committed = true;
			if (holds_reservation(h))
				memcpy(h->made_at, next.a.claimed_at, sizeof(h->made_at));
			goto done;
		}
		if (r != -EALREADY) {
			why = commit_refusal(&next, r);
			log_claim_refused(h, h->uid, h->pid, why);
			return poison(c, h, r, why);
		}
		/* committed by another open meanwhile: update that claim */
		if ((r = handle_claim(c, h, &current)) < 0 ||
		    (r = claim_parse_update(&current, h->staged, false, &next)) < 0)
			return poison(c, h, r, "the claim changed meanwhile");
	}
	r = store_claim_update(c->store, &next);
	if (r < 0) {
		why = commit_refusal(&next, r);
		log_claim_refused(h, h->uid, h->pid, why);
		return poison(c, h, r, why);
	}
done:
	log_written(h, h->staged, h->uid, h->pid);
	claim_handle_free(h);
	h->state = claim_next(h->state, CLAIM_EV_COMMIT);
	h->outcome[0] = '\0'; /* the claim reads again */
	return 0;
}

int claims_flush(const struct claims *c, struct claim_handle *h)
{
	int r = 0;

	if (h->state == CLAIM_POISONED) {
		/* once: later closes are a reader's (`cat <&3`) */
		r = h->refusal_told ? 0 : -EINVAL;
	} else if (h->state == CLAIM_RELEASE_STAGED)
		r = commit_release(c, h);
	else if (staged(h))
		r = commit_staged(c, h, false);
	if (h->state == CLAIM_POISONED)
		h->refusal_told = true;
	return r;
}

/* -- rm ----------------------------------------------------------------------------- */

/* Whether the kernel shows claim's VMM gone, now: 0, or -EBUSY with *why.
 * With pid=: the pid is gone, a zombie, or another process by its start
 * time or the host's boot id (the sentinel's rule, sentinel/verdict.h);
 * a pid whose start time was not recorded, or whose stat cannot be read,
 * may be the VMM.  control= alone never shows a VMM gone: a socket file may
 * be listened on (this process reads no VMM's socket table), and a missing
 * one may be bound later (a VMM still starting); the sentinel releases it
 * when it is dead.  Neither: a bare claim, nothing to keep. */
static int vmm_gone(const struct store_claim *claim, const char **why)
{
	char boot[PROC_BOOT_ID_LEN + 1];
	struct proc_stat st;
	int r;

	if (claim->a.pid > 0) {
		if (claim->a.boot_id[0] && proc_boot_id(NULL, boot) == 0 &&
		    strcmp(boot, claim->a.boot_id) != 0)
			return 0; /* the host rebooted since */
		r = proc_pid_stat(NULL, claim->a.pid, &st);
		if (r == -ENOENT || (r == 0 && proc_state_ended(st.state)) ||
		    (r == 0 && claim->a.pid_starttime && st.starttime != claim->a.pid_starttime))
			return 0;
		*why = r < 0                  ? "its pid's /proc/PID/stat cannot be read" :
		       claim->a.pid_starttime ? "its VMM (pid= with the recorded start time) runs" :
						"its pid= runs and its start time was not recorded";
		return -EBUSY;
	}
	if (claim->a.control[0]) {
		*why = "its VMM is named by control= alone, whose socket may listen or be "
		       "bound later";
		return -EBUSY;
	}
	return 0;
}

int claims_unlink(const struct claims *c, const char *vf, const char *instance, uid_t uid,
		  pid_t pid)
{
	char path[CLAIM_PATH_BUFSZ];
	struct store_claim claim;
	const char *why = NULL;
	int r;

	claim_path(vf, instance, path, sizeof(path));
	r = store_claim_get(c->store, vf, instance, STORE_READ_MEMORY, &claim);
	/* a reservation names no VMM yet: its writer's close fails (ENOENT) */
	if (r == 0 && !claim.reserved)
		r = vmm_gone(&claim, &why);
	if (r == 0)
		r = store_release(c->store, vf, instance,
				  &(struct store_release_opts){ .claimed_at = claim.a.claimed_at,
								.how = "released",
								.uid = uid,
								.if_vmm = &claim });
	if (r == -EBUSY)
		log_event(LOG_WARNING, LOG_EVENT_CLAIM_REFUSED,
			  &(struct log_fields){ .vf = vf,
						.instance = instance,
						.claimed_at = claim.a.claimed_at,
						.reason = why ? why : "its VMM changed meanwhile",
						.has_writer = true,
						.writer_uid = (uint32_t)uid,
						.writer_pid = (int32_t)pid },
			  "rm of %s refused (uid %u, pid %d): %s; release it once its VMM is gone: "
			  "echo release=%s > %s",
			  path, (unsigned)uid, (int)pid, why ? why : "its VMM changed meanwhile",
			  claim.a.claimed_at, path);
	else if (r == 0)
		log_event(LOG_INFO, LOG_EVENT_RELEASED,
			  &(struct log_fields){ .vf = vf,
						.instance = instance,
						.claimed_at = claim.a.claimed_at,
						.has_writer = true,
						.writer_uid = (uint32_t)uid,
						.writer_pid = (int32_t)pid },
			  "release of %s accepted (uid %u, pid %d)", path, (unsigned)uid, (int)pid);
	return r;
}

void claims_release(const struct claims *c, struct claim_handle *h)
{
	struct store_claim res;
	int r;

	switch (h->state) {
	case CLAIM_RESERVED:
		/* a bare claim: committed now, or kept until the store can */
		if (handle_claim(c, h, &res) < 0 || !res.reserved)
			break;
		bool kept;
		r = store_claim_abandon(c->store, &res, &kept);
		if (r == 0 && !kept) {
			log_claimed(&res, h->uid, h->pid);
			res.reserved = false;
			log_unwatched(&res);
		} else if (r == 0)
			log_warn("%s: claim by instance %s kept reserved: the store is unavailable; "
				 "it is committed once the store is available again",
				 res.a.vf, res.a.instance_id);
		else if (r != -EALREADY && r != -ENOENT) {
			log_claim_refused(h, h->uid, h->pid, commit_refusal(&res, r));
			store_claim_cancel(c->store, res.a.vf, res.id);
		}
		break;
	case CLAIM_RESERVED_STAGED:
	case CLAIM_MADE_STAGED:
	case CLAIM_STAGED:
		(void)commit_staged(c, h, true); /* no close(2) is left to answer: logged */
		break;
	case CLAIM_RELEASE_STAGED:
		(void)commit_release(c, h);
		break;
	case CLAIM_MADE:
	case CLAIM_OPEN:
	case CLAIM_POISONED:
		break;
	}
	if (h->committed && h->state != CLAIM_POISONED && handle_claim(c, h, &res) == 0)
		log_unwatched(&res);
	claim_handle_free(h);
}
