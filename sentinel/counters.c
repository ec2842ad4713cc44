/* SPDX-License-Identifier: MIT */
/*
 * counters.c - the sentinel's shared counter table (counters.h): its stamp
 * and the checks of it, the memfd that carries it to the child, and its
 * rendering as Prometheus text.  Everything read from the table is checked
 * as if it came from a stranger: the memory is shared with another process.
 */
#include "sentinel/counters.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grammar/vf.h"
#include "common/cleanup.h"
#include "proto/status.h"
#include "common/parse.h"
#include "common/prometheus.h"

static const char *const check_result_names[CHECK_RESULT_COUNT] = {
	[CHECK_OK] = "ok",
	[CHECK_FAILED] = "failed",
	[CHECK_UNKNOWN] = "unknown",
	[CHECK_RPC_ERROR] = "rpc_error",
	[CHECK_UNSUPPORTED_AGENT] = "unsupported_agent",
};

const char *check_result_name(enum check_result r)
{
	if ((unsigned)r >= CHECK_RESULT_COUNT)
		return "invalid";
	return check_result_names[r];
}

const char *sentinel_watch_name(enum sentinel_watch w)
{
#define SENTINEL_WATCH_NAME(id, name) [SENTINEL_WATCH_##id] = name,
	static const char *const names[SENTINEL_WATCH_COUNT] = { SENTINEL_WATCHES(
		SENTINEL_WATCH_NAME) };
#undef SENTINEL_WATCH_NAME

	if ((unsigned)w >= SENTINEL_WATCH_COUNT)
		return "invalid";
	return names[w];
}

/* ---- the stamp ------------------------------------------------------------------ */

static uint64_t fnv1a(uint64_t h, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		h ^= (v >> (8 * i)) & 0xff;
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

uint64_t sentinel_counters_layout(void)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

#define FIELD(type, f) h = fnv1a(fnv1a(h, offsetof(type, f)), sizeof(((type *)0)->f));
#define COUNTERS_FIELD(f) FIELD(struct sentinel_counters, f)
	COUNTERS_FIELD(magic)
	COUNTERS_FIELD(version)
	COUNTERS_FIELD(layout)
	COUNTERS_FIELD(checks)
	COUNTERS_FIELD(unknown)
#define SCALAR_FIELD(field, name, help) COUNTERS_FIELD(field)
	SENTINEL_SCALAR_COUNTERS(SCALAR_FIELD)
#undef SCALAR_FIELD
	COUNTERS_FIELD(last_poll_duration_ns)
	COUNTERS_FIELD(claims_watched)
	COUNTERS_FIELD(latency)
	COUNTERS_FIELD(poll_interval_ns)
	COUNTERS_FIELD(poll_timeout_ns)
	COUNTERS_FIELD(concurrency)
	COUNTERS_FIELD(agents_seq)
	COUNTERS_FIELD(agents_count)
	COUNTERS_FIELD(agents)
#undef COUNTERS_FIELD
	FIELD(struct sentinel_agent_slot, vf)
	FIELD(struct sentinel_agent_slot, instance_id)
	FIELD(struct sentinel_agent_slot, claimed_at)
	FIELD(struct sentinel_agent_slot, result)
	FIELD(struct sentinel_agent_slot, telemetry.present)
	FIELD(struct sentinel_agent_slot, telemetry.version)
	FIELD(struct sentinel_agent_slot, telemetry.kmsg_records_lost)
	FIELD(struct sentinel_agent_slot, telemetry.kmsg_overruns)
	FIELD(struct sentinel_agent_slot, telemetry.probe_attempts)
	FIELD(struct sentinel_agent_slot, telemetry.probe_timeouts)
	FIELD(struct sentinel_agent_slot, telemetry.probe_last_exit_status)
#undef FIELD
	h = fnv1a(h, sizeof(struct sentinel_agent_slot));
	return fnv1a(h, sizeof(struct sentinel_counters));
}

void sentinel_counters_init(struct sentinel_counters *c)
{
	c->magic = SENTINEL_COUNTERS_MAGIC;
	c->version = SENTINEL_COUNTERS_VERSION;
	c->layout = sentinel_counters_layout();
}

int sentinel_counters_check(const struct sentinel_counters *c)
{
	if (c->magic != SENTINEL_COUNTERS_MAGIC || c->version != SENTINEL_COUNTERS_VERSION ||
	    c->layout != sentinel_counters_layout())
		return -EPROTO;
	return 0;
}

int sentinel_counters_create(int *ret_fd, struct sentinel_counters **ret)
{
	_cleanup_close_ int fd = memfd_create("vfhealth-sentinel-counters",
					      MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *map;

	if (fd < 0)
		return negative_errno();
	if (ftruncate(fd, sizeof(struct sentinel_counters)) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return negative_errno();
	map = mmap(NULL, sizeof(struct sentinel_counters), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   0);
	if (map == MAP_FAILED)
		return negative_errno();
	sentinel_counters_init(map);
	*ret = map;
	*ret_fd = move_fd(fd);
	return 0;
}

int sentinel_counters_map(int fd, struct sentinel_counters **ret)
{
	struct stat st;
	void *map;

	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode) || st.st_size != (off_t)sizeof(struct sentinel_counters))
		return -EINVAL;
	map = mmap(NULL, sizeof(struct sentinel_counters), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   0);
	if (map == MAP_FAILED)
		return negative_errno();
	if (sentinel_counters_check(map) < 0) {
		munmap(map, sizeof(struct sentinel_counters));
		return -EPROTO;
	}
	*ret = map;
	return 0;
}

void sentinel_counters_unmap(struct sentinel_counters *c)
{
	if (c)
		munmap(c, sizeof(*c));
}

void sentinel_counters_get(const struct sentinel_counters *c, struct sentinel_stats *ret)
{
	for (int r = 0; r < CHECK_RESULT_COUNT; r++)
		ret->checks[r] = atomic_load(&c->checks[r]);
	for (int r = 0; r < AGENT_REASON_COUNT; r++)
		ret->unknown[r] = atomic_load(&c->unknown[r]);
#define LOAD_COUNTER(field, name, help) ret->field = atomic_load(&c->field);
	SENTINEL_SCALAR_COUNTERS(LOAD_COUNTER)
#undef LOAD_COUNTER
	ret->last_poll_duration_ns = atomic_load(&c->last_poll_duration_ns);
	for (int w = 0; w < SENTINEL_WATCH_COUNT; w++)
		ret->claims_watched[w] = atomic_load(&c->claims_watched[w]);
	for (int k = 0; k < SENTINEL_LATENCY_KINDS; k++) {
		for (size_t b = 0; b <= SENTINEL_LATENCY_BUCKET_COUNT; b++)
			ret->latency[k].buckets[b] = atomic_load(&c->latency[k].buckets[b]);
		ret->latency[k].sum_ns = atomic_load(&c->latency[k].sum_ns);
		ret->latency[k].count = atomic_load(&c->latency[k].count);
	}
	ret->poll_interval_ns = atomic_load(&c->poll_interval_ns);
	ret->poll_timeout_ns = atomic_load(&c->poll_timeout_ns);
	ret->concurrency = atomic_load(&c->concurrency);
}

/* ---- rendering ------------------------------------------------------------------ */

/* Seconds with up to nine decimals, no trailing zeros: "5", "0.2". */
static void format_seconds(int64_t ns, char *buf, size_t size)
{
	int len = snprintf(buf, size, "%" PRId64 ".%09" PRId64, ns / NSEC_PER_SEC,
			   ns % NSEC_PER_SEC);

	while (len > 0 && (size_t)len < size && buf[len - 1] == '0')
		buf[--len] = '\0';
	if (len > 0 && (size_t)len < size && buf[len - 1] == '.')
		buf[--len] = '\0';
}

static void render_latency(const struct sentinel_stats *st, FILE *out)
{
#define LATENCY_LE(le) #le,
	static const char *const le[] = { SENTINEL_LATENCY_BUCKETS(LATENCY_LE) "+Inf" };
#undef LATENCY_LE
	static const char *const kinds[SENTINEL_LATENCY_KINDS] = {
		[SENTINEL_LATENCY_FAILED] = "failed", [SENTINEL_LATENCY_OK] = "ok"
	};
	char sum[32];

	prom_family(out, "vfhealth_detection_latency_seconds", "histogram",
		    "Time from a claim to the first failed (kind=failed) and the first ok (kind=ok) "
		    "answer the sentinel saw for it.");
	for (int k = 0; k < SENTINEL_LATENCY_KINDS; k++) {
		uint64_t cumulative = 0;
		for (size_t b = 0; b <= SENTINEL_LATENCY_BUCKET_COUNT; b++) {
			cumulative += st->latency[k].buckets[b];
			prom_sample_u64(out, "vfhealth_detection_latency_seconds_bucket",
					PROM_LABELS({ "kind", kinds[k] }, { "le", le[b] }),
					cumulative);
		}
		format_seconds((int64_t)st->latency[k].sum_ns, sum, sizeof(sum));
		prom_sample(out, "vfhealth_detection_latency_seconds_sum",
			    PROM_LABELS({ "kind", kinds[k] }), sum);
		prom_sample_u64(out, "vfhealth_detection_latency_seconds_count",
				PROM_LABELS({ "kind", kinds[k] }), st->latency[k].count);
	}
}

static int agent_slot_cmp(const void *a_, const void *b_)
{
	const struct sentinel_agent_slot *a = a_, *b = b_;
	int r = strcmp(a->vf, b->vf);

	return r ? r : strcmp(a->instance_id, b->instance_id);
}

/* A consistent copy of the published slots (sequence lock), each checked as
 * if from a stranger: the memory is shared with another process.  Sorted,
 * without duplicates (a duplicate series would spoil the whole scrape).
 * *ret NULL and 0 when none or no consistent copy could be had. */
static size_t agents_snapshot(const struct sentinel_counters *c, struct sentinel_agent_slot **ret)
{
	struct sentinel_agent_slot *copy = NULL;
	size_t n = 0;

	*ret = NULL;
	for (int tries = 0; tries < 16; tries++) {
		uint64_t seq = atomic_load(&c->agents_seq);
		if (seq & 1) {
			sched_yield(); /* the scheduler is rewriting: a memcpy's while */
			continue;
		}
		n = MIN((size_t)atomic_load(&c->agents_count), (size_t)SENTINEL_MAX_TARGETS);
		free(copy);
		copy = malloc(MAX(n, (size_t)1) * sizeof(*copy));
		if (!copy)
			return 0;
		memcpy(copy, (const void *)c->agents, n * sizeof(*copy));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load(&c->agents_seq) == seq)
			goto consistent;
	}
	free(copy);
	return 0;
consistent:;
	size_t kept = 0;
	for (size_t i = 0; i < n; i++) {
		struct sentinel_agent_slot *a = &copy[i];
		char version[AGENT_VERSION_MAX + 1];

		a->vf[sizeof(a->vf) - 1] = '\0';
		a->instance_id[sizeof(a->instance_id) - 1] = '\0';
		a->claimed_at[sizeof(a->claimed_at) - 1] = '\0';
		a->telemetry.version[sizeof(a->telemetry.version) - 1] = '\0';
		if (!vf_address_valid(a->vf) || !instance_id_valid(a->instance_id) ||
		    a->result >= CHECK_RESULT_COUNT)
			continue;
		wire_sanitize_version(a->telemetry.version, version);
		memcpy(a->telemetry.version, version, sizeof(version));
		copy[kept++] = *a;
	}
	qsort(copy, kept, sizeof(*copy), agent_slot_cmp);
	n = 0;
	for (size_t i = 0; i < kept; i++)
		if (n == 0 || agent_slot_cmp(&copy[n - 1], &copy[i]) != 0)
			copy[n++] = copy[i];
	*ret = copy;
	return n;
}

size_t sentinel_counters_last_checks(const struct sentinel_counters *c,
				     struct sentinel_last_check **ret)
{
	_cleanup_free_ struct sentinel_agent_slot *slots = NULL;
	size_t n = agents_snapshot(c, &slots);
	struct sentinel_last_check *checks;

	*ret = NULL;
	if (n == 0 || !(checks = calloc(n, sizeof(*checks))))
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct claim_ref *claim = &checks[i].claim;

		memcpy(claim->vf, slots[i].vf, sizeof(claim->vf));
		memcpy(claim->instance_id, slots[i].instance_id, sizeof(claim->instance_id));
		memcpy(claim->claimed_at, slots[i].claimed_at, sizeof(claim->claimed_at));
		checks[i].result = (enum check_result)slots[i].result;
	}
	*ret = checks;
	return n;
}

/* Per claim whose agent answered with telemetry in the last poll: labels
 * vf, instance_id (not "instance": Prometheus gives that label the scrape
 * target). */
static void render_agents(const struct sentinel_counters *c, FILE *out)
{
	_cleanup_free_ struct sentinel_agent_slot *agents = NULL;
	size_t n = agents_snapshot(c, &agents), kept = 0;

	for (size_t i = 0; i < n; i++)
		if (agents[i].telemetry.present)
			agents[kept++] = agents[i];
	n = kept;

#define AGENT_LABELS(a) { "vf", (a).vf }, { "instance_id", (a).instance_id }
#define AGENT_COUNTER(field, name, help)                                         \
	prom_family(out, name, "counter", help);                                 \
	for (size_t i = 0; i < n; i++)                                           \
		prom_sample_u64(out, name, PROM_LABELS(AGENT_LABELS(agents[i])), \
				agents[i].telemetry.field);
	prom_family(out, "vfhealth_sentinel_agent_info", "gauge",
		    "The guest agent of each polled claim that answered with telemetry, and its "
		    "version.");
	for (size_t i = 0; i < n; i++)
		prom_sample(out, "vfhealth_sentinel_agent_info",
			    PROM_LABELS(AGENT_LABELS(agents[i]),
					{ "version", agents[i].telemetry.version }),
			    "1");
	AGENT_COUNTER(kmsg_records_lost, "vfhealth_sentinel_agent_kmsg_records_lost_total",
		      "Kernel log records the agent never read (sequence gaps), as it last said.")
	AGENT_COUNTER(kmsg_overruns, "vfhealth_sentinel_agent_kmsg_overruns_total",
		      "Reads of the agent that found the kernel log overwritten under them.")
	AGENT_COUNTER(probe_attempts, "vfhealth_sentinel_agent_probe_attempts_total",
		      "Probe attempts the agent started.")
	AGENT_COUNTER(probe_timeouts, "vfhealth_sentinel_agent_probe_timeouts_total",
		      "Probe attempts the agent killed at their deadline.")
#undef AGENT_COUNTER
	prom_family(
		out, "vfhealth_sentinel_agent_probe_last_exit_status", "gauge",
		"Exit status of the agent's last ended probe attempt (128+N: signal N), once one "
		"has ended.");
	for (size_t i = 0; i < n; i++)
		if (agents[i].telemetry.probe_last_exit_status >= 0)
			prom_sample_i64(out, "vfhealth_sentinel_agent_probe_last_exit_status",
					PROM_LABELS(AGENT_LABELS(agents[i])),
					(int)agents[i].telemetry.probe_last_exit_status);
#undef AGENT_LABELS
}

static void render_config(const struct sentinel_stats *st, FILE *out)
{
	char interval[32], timeout[32], concurrency[24];

	if (st->concurrency == 0)
		return; /* not started */
	format_seconds(st->poll_interval_ns, interval, sizeof(interval));
	format_seconds(st->poll_timeout_ns, timeout, sizeof(timeout));
	snprintf(concurrency, sizeof(concurrency), "%" PRIu64, st->concurrency);
	prom_family(out, "vfhealth_sentinel_config_info", "gauge",
		    "The sentinel's options in force.");
	prom_sample(out, "vfhealth_sentinel_config_info",
		    PROM_LABELS({ "poll_interval_seconds", interval },
				{ "poll_timeout_seconds", timeout },
				{ "concurrency", concurrency }),
		    "1");
}

void sentinel_counters_render(void *counters, FILE *out)
{
	struct sentinel_stats st;
	char duration[48];

	if (!counters)
		return;
	if (sentinel_counters_check(counters) < 0) {
		/* A sentinel of another build: its numbers would be misread. */
		fputs("# vfhealth-sentinel: counter table of another layout (magic, version or "
		      "fields differ): its series are not shown\n",
		      out);
		return;
	}
	sentinel_counters_get(counters, &st);
	prom_family(out, "vfhealth_sentinel_checks_total", "counter",
		    "Guest agent checks by result.");
	for (int r = 0; r < CHECK_RESULT_COUNT; r++)
		prom_sample_u64(out, "vfhealth_sentinel_checks_total",
				PROM_LABELS({ "result", check_result_name((enum check_result)r) }),
				st.checks[r]);
	prom_family(out, "vfhealth_sentinel_unknown_total", "counter",
		    "Unknown answers by the agent's reason (unspecified: an agent older than "
		    "reasons).");
	for (int r = 0; r < AGENT_REASON_COUNT; r++)
		prom_sample_u64(out, "vfhealth_sentinel_unknown_total",
				PROM_LABELS({ "reason", agent_unknown_reason_name(
								(enum agent_unknown_reason)r) }),
				st.unknown[r]);
#define RENDER_COUNTER(field, name, help) prom_scalar_u64(out, name, "counter", help, st.field);
	SENTINEL_SCALAR_COUNTERS(RENDER_COUNTER)
#undef RENDER_COUNTER
	snprintf(duration, sizeof(duration), "%" PRId64 ".%09" PRId64,
		 st.last_poll_duration_ns / NSEC_PER_SEC, st.last_poll_duration_ns % NSEC_PER_SEC);
	prom_family(out, "vfhealth_sentinel_last_poll_duration_seconds", "gauge",
		    "Duration of the last completed poll.");
	prom_sample(out, "vfhealth_sentinel_last_poll_duration_seconds", NULL, duration);
	prom_family(
		out, "vfhealth_sentinel_claims", "gauge",
		"Live claims at the last poll, by how the sentinel watches them (polled: its "
		"agent is asked; uncertain: asked and kept, its VMM's liveness unknown; "
		"starting: its control socket not listening yet, kept, not asked yet; dead: no "
		"longer asked, to be released; no_agent, no_evidence, unconfined: never asked).");
	for (int w = 0; w < SENTINEL_WATCH_COUNT; w++)
		prom_sample_u64(out, "vfhealth_sentinel_claims",
				PROM_LABELS(
					{ "watch", sentinel_watch_name((enum sentinel_watch)w) }),
				st.claims_watched[w]);
	render_latency(&st, out);
	render_config(&st, out);
	render_agents(counters, out);
}
