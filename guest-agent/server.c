/* SPDX-License-Identifier: MIT */
/*
 * server.c - vfhealth-agent's event loop.  Contract in server.h.
 *
 * Design notes
 *
 * Threads: one.  Everything happens in agent_run's poll() loop: a signalfd
 * (SIGCHLD for probe children, SIGTERM and SIGINT to stop), the listen
 * socket, the kernel log, and up to max_clients connections.  No locks:
 * nothing is shared.  The state (state.h) changes only in this loop, so an
 * answer is always a consistent snapshot.
 *
 * Waking up: poll's timeout is the earliest of a connection's deadline, the
 * probe's next attempt or kill time, and the kernel-log reopen time; with
 * none pending it is infinite, so an idle agent makes no wakeups (probe
 * attempts inside the window aside).  While every connection slot is busy
 * the listen socket is left out of the poll set: new clients wait in the
 * backlog for a slot (within their own deadline) rather than being accepted
 * and dropped, and a flood of connects cannot make us spin.
 *
 * Clients: one request per connection, answered then closed.  A connection
 * lives at most client_timeout_ns from accept (slow-loris, silent peers); a
 * frame header over FRAME_PAYLOAD_MAX closes it before any allocation.
 * Client trouble is logged at debug level only, so a hostile client cannot
 * flood the journal.  The kernel log is read in batches (KMSG_DRAIN_BATCH),
 * so a kernel message storm cannot starve clients either.
 *
 * Detection: the kernel log (kmsg.h: the rules) is the only source of FAILED;
 * a probe attempt (probe.h: the device nodes, nvidia-smi) the only source of
 * OK.  The UNKNOWN answer carries why (agent_reason): no NVIDIA device, no
 * probe at all, probing inside the window, backing off after it, stopped.
 * Once the kernel reported a failure and the window has passed, probing
 * stops: OK can still come from an attempt in the window (the success path
 * that lifts a quarantine), but a failed adapter is not re-opened forever.
 *
 * Shutdown: SIGTERM/SIGINT end the loop; a running probe child is killed
 * and reaped (never left behind), connections are closed, and a Unix listen
 * socket we created is unlinked.
 */
#include "guest-agent/server.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "guest-agent/kmsg.h"
#include "guest-agent/pci.h"
#include "guest-agent/probe.h"
#include "guest-agent/state.h"
#include "common/cleanup.h"
#include "proto/frame.h"
#include "common/log.h"
#include "common/parse.h"

enum {
	POLL_SIGNAL,
	POLL_LISTEN,
	POLL_KMSG,
	POLL_FIXED
};

/* How long to stop accepting after running out of descriptors or memory. */
#define ACCEPT_PAUSE_NS (100 * 1000000LL)

struct conn {
	int fd; /* -1: free slot */
	int64_t deadline_ns;
	struct frame_reader in;
	uint8_t *out;
	size_t out_len, out_sent;
};

struct agent {
	const struct agent_options *o;
	struct agent_state state;
	int signal_fd;
	int listen_fd;
	char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* to unlink */

	bool nvidia; /* an NVIDIA PCI device was found */
	struct kmsg_rules rules;
	bool kmsg_on;
	struct kmsg_reader kmsg;
	int64_t kmsg_reopen_ns; /* INT64_MAX: not waiting to reopen */

	bool probe_on;
	struct probe probe;

	struct conn *conns;
	unsigned n_conns;
	/* accept failed for lack of descriptors: the listen socket stays
	 * readable, so leave it out of the poll set until then (no spin) */
	int64_t accept_paused_until_ns;
	bool kmsg_open_failed; /* warn once per streak of failed opens */
	bool stop;
};

void agent_options_init(struct agent_options *o)
{
	memset(o, 0, sizeof(*o));
	endpoint_parse_listen(AGENT_DEFAULT_LISTEN, &o->listen);
	o->kmsg_path = AGENT_DEFAULT_KMSG;
	o->sysfs_root = AGENT_DEFAULT_SYSFS;
	o->probe_interval_ns = PROBE_DEFAULT_INTERVAL_NS;
	o->probe_window_ns = PROBE_DEFAULT_WINDOW_NS;
	o->probe_timeout_ns = PROBE_DEFAULT_TIMEOUT_NS;
	o->probe_backoff_max_ns = PROBE_DEFAULT_BACKOFF_MAX_NS;
	o->dev_dir = AGENT_DEFAULT_DEV_DIR;
	o->client_timeout_ns = AGENT_DEFAULT_CLIENT_TIMEOUT_NS;
	o->max_clients = AGENT_DEFAULT_MAX_CLIENTS;
}

/* ---- listening --------------------------------------------------------- */

/* A socket file left by an agent that died is in the way of bind; one that
 * still answers belongs to a running agent and is not ours to take. */
static int remove_stale_socket(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	/* non-blocking: a live agent with a full backlog must not stall us */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	strcpy(sun.sun_path, path);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0 || errno == EAGAIN)
		return -EADDRINUSE;
	if (errno != ECONNREFUSED)
		return negative_errno();
	return unlink(path) < 0 ? negative_errno() : 0;
}

static int listen_on(struct agent *a, const struct endpoint *ep)
{
	_cleanup_close_ int fd = -1;
	int k;

	if (ep->kind == ENDPOINT_VSOCK) {
		struct sockaddr_vm svm = {
			.svm_family = AF_VSOCK,
			.svm_cid = ep->cid,
			.svm_port = ep->port,
		};
		fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return negative_errno();
		if (bind(fd, (struct sockaddr *)&svm, sizeof(svm)) < 0)
			return negative_errno();
	} else if (ep->kind == ENDPOINT_UNIX) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };

		k = remove_stale_socket(ep->path);
		if (k < 0)
			return k;
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return negative_errno();
		strcpy(sun.sun_path, ep->path);
		if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0)
			return negative_errno();
		strcpy(a->unix_path, ep->path);
	} else
		return -EINVAL;
	if (listen(fd, (int)a->o->max_clients) < 0)
		return negative_errno();
	a->listen_fd = move_fd(fd);
	return 0;
}

/* ---- connections ------------------------------------------------------- */

static void conn_close(struct agent *a, struct conn *c)
{
	if (c->fd < 0)
		return;
	close(c->fd);
	frame_reader_free(&c->in);
	free(c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	a->n_conns--;
}

static void accept_clients(struct agent *a, int64_t now)
{
	for (unsigned i = 0; i < a->o->max_clients && a->n_conns < a->o->max_clients; i++) {
		struct conn *c = &a->conns[i];
		int fd;

		if (c->fd >= 0)
			continue;
		fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				log_warn("accept: %s; pausing for %lldms", strerror(errno),
					 (long long)(ACCEPT_PAUSE_NS / 1000000));
				a->accept_paused_until_ns = now + ACCEPT_PAUSE_NS;
			} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
				   errno != ECONNABORTED)
				log_debug("accept: %s", strerror(errno));
			return;
		}
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->deadline_ns = now + a->o->client_timeout_ns;
		frame_reader_init(&c->in);
		a->n_conns++;
	}
}

/* Why the answer is UNKNOWN right now. */
static enum agent_unknown_reason agent_reason(const struct agent *a)
{
	if (!a->nvidia)
		return AGENT_REASON_NO_DEVICE;
	if (!a->probe_on)
		return AGENT_REASON_NO_PROBE;
	if (a->probe.finished && !a->probe.succeeded)
		return AGENT_REASON_STOPPED;
	return a->probe.backing_off ? AGENT_REASON_BACKING_OFF : AGENT_REASON_PROBING;
}

/* How the agent itself fares, for the host's per-claim series. */
static void agent_telemetry(const struct agent *a, struct agent_telemetry *t)
{
	memset(t, 0, sizeof(*t));
	t->present = true;
	snprintf(t->version, sizeof(t->version), "%s", VFHEALTH_VERSION);
	if (a->kmsg_on) {
		t->kmsg_records_lost = a->kmsg.lost;
		t->kmsg_overruns = a->kmsg.overruns;
	}
	t->probe_last_exit_status = -1;
	if (a->probe_on) {
		t->probe_attempts = a->probe.attempts;
		t->probe_timeouts = a->probe.timeouts;
		t->probe_last_exit_status = a->probe.last_exit_status;
	}
}

/* Build the answer to the request in c->in. */
static int conn_answer(struct agent *a, struct conn *c)
{
	struct wire_request req;
	int k = wire_decode_request(c->in.payload, c->in.payload_len, &req);

	if (k < 0) {
		log_debug("client: malformed request (%s)", strerror(-k));
		k = wire_encode_error_response(WIRE_STATUS_ERROR, "malformed request", &c->out,
					       &c->out_len);
	} else if (strcmp(req.method, WIRE_METHOD_GET_GPU_INIT_STATUS) == 0) {
		agent_state_set_reason(&a->state, agent_reason(a));
		agent_telemetry(a, &a->state.status.telemetry);
		k = wire_encode_status_response(&a->state.status, &c->out, &c->out_len);
	} else {
		log_debug("client: unknown method '%s'",
			  req.method_too_long ? "(too long)" : req.method);
		k = wire_encode_error_response(WIRE_STATUS_UNIMPLEMENTED, "unknown method", &c->out,
					       &c->out_len);
	}
	frame_reader_free(&c->in);
	return k;
}

/* Send what is left; close when done or broken. */
static void conn_flush(struct agent *a, struct conn *c)
{
	while (c->out_sent < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return; /* poll for POLLOUT */
			log_debug("client: send: %s", strerror(errno));
			break;
		}
		c->out_sent += (size_t)n;
	}
	conn_close(a, c);
}

static void conn_event(struct agent *a, struct conn *c, short revents)
{
	int k;

	if (c->out) {
		conn_flush(a, c);
		return;
	}
	k = frame_reader_fill(&c->in, c->fd);
	if (k == 0)
		return;
	if (k < 0) {
		if (k != -EPIPE)
			log_debug("client: %s", strerror(-k));
		conn_close(a, c);
		return;
	}
	if (conn_answer(a, c) < 0) {
		conn_close(a, c);
		return;
	}
	conn_flush(a, c);
}

/* ---- the kernel log ---------------------------------------------------- */

/* After the window, a reported failure ends probing (server.c's notes). */
static void probe_maybe_halt(struct agent *a)
{
	if (a->probe_on && a->probe.backing_off && !a->probe.finished &&
	    a->state.status.state == GPU_INIT_FAILED) {
		probe_halt(&a->probe);
		log_info("probe: stopped: the kernel reported a failure and the window has passed");
	}
}

static void on_kmsg_record(void *userdata, const char *buf, size_t len)
{
	struct agent *a = userdata;
	const struct kmsg_rule *rule = NULL;
	struct kmsg_record rec;
	enum kmsg_verdict v = kmsg_classify_rules(&a->rules, buf, len, &rec, &rule);

	switch (v) {
	case KMSG_MATCH:
		log_debug("kmsg: seq=%llu pri=%u %s: %.*s", (unsigned long long)rec.seq,
			  rec.priority, kmsg_verdict_name(v), (int)MIN(rec.message_len, 200),
			  rec.message);
		if (agent_state_on_rule_failure(&a->state, rule->text, rec.message,
						rec.message_len))
			log_warn("state failed (rule '%s'): %s", rule->text,
				 a->state.status.message);
		else if (a->state.status.state == GPU_INIT_OK)
			log_info("ignored after ok: %.*s", (int)MIN(rec.message_len, 200),
				 rec.message);
		probe_maybe_halt(a);
		break;
	case KMSG_IGNORED:
		log_info("kmsg: ignored by rule '%s': %.*s", rule->text,
			 (int)MIN(rec.message_len, 200), rec.message);
		break;
	case KMSG_NO_MATCH:
	case KMSG_NOT_KERNEL:
		log_debug("kmsg: seq=%llu pri=%u %s: %.*s", (unsigned long long)rec.seq,
			  rec.priority, kmsg_verdict_name(v), (int)MIN(rec.message_len, 200),
			  rec.message);
		break;
	case KMSG_CONTINUATION:
		break;
	case KMSG_MALFORMED:
		log_debug("kmsg: malformed record skipped (%zu bytes)", len);
		break;
	}
}

static void kmsg_try_open(struct agent *a, int64_t now)
{
	int k = kmsg_reader_open(&a->kmsg);

	if (k < 0) {
		log_msg(a->kmsg_open_failed ? LOG_DEBUG : LOG_WARNING,
			"kmsg: cannot open %s: %s; retrying every %llds", a->kmsg.path,
			strerror(-k), (long long)(AGENT_KMSG_REOPEN_NS / NSEC_PER_SEC));
		a->kmsg_open_failed = true;
		a->kmsg_reopen_ns = now + AGENT_KMSG_REOPEN_NS;
		return;
	}
	if (a->kmsg_open_failed)
		log_info("kmsg: %s open again", a->kmsg.path);
	a->kmsg_open_failed = false;
	a->kmsg_reopen_ns = INT64_MAX;
	log_debug("kmsg: reading %s (%s)", a->kmsg.path, a->kmsg.lines ? "lines" : "records");
}

static void kmsg_event(struct agent *a, int64_t now)
{
	int k = kmsg_reader_drain(&a->kmsg, on_kmsg_record, a);

	if (k == 1) {
		log_info("kmsg: end of %s", a->kmsg.path);
		return;
	}
	if (k < 0) {
		log_warn("kmsg: reading %s: %s; reopening in %llds", a->kmsg.path, strerror(-k),
			 (long long)(AGENT_KMSG_REOPEN_NS / NSEC_PER_SEC));
		a->kmsg_reopen_ns = now + AGENT_KMSG_REOPEN_NS;
	}
}

/* ---- the probe --------------------------------------------------------- */

static void probe_event(struct agent *a, int64_t now)
{
	if (!a->probe_on)
		return;
	if (probe_step(&a->probe, now) == 1 && agent_state_on_probe_success(&a->state))
		log_info("state ok: probe attempt %u succeeded", a->probe.attempts);
	probe_maybe_halt(a);
	/* A just-reaped attempt may allow the next one right away. */
	if (!a->probe.finished && a->probe.pid == 0 && probe_next_wakeup(&a->probe) <= now)
		probe_step(&a->probe, now);
}

/* ---- setup and the loop -------------------------------------------------- */

static int signals_setup(struct agent *a, sigset_t *old)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	if (sigprocmask(SIG_BLOCK, &mask, old) < 0)
		return negative_errno();
	signal(SIGPIPE, SIG_IGN);
	a->signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	return a->signal_fd < 0 ? negative_errno() : 0;
}

static void signal_event(struct agent *a, int64_t now)
{
	struct signalfd_siginfo si;

	while (read(a->signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			probe_event(a, now);
		else {
			log_info("signal %u: shutting down", si.ssi_signo);
			a->stop = true;
		}
	}
}

static int watchers_setup(struct agent *a, int64_t now)
{
	const struct agent_options *o = a->o;
	_cleanup_free_ char *smi = NULL;
	bool nvidia = false;
	int k;

	k = pci_has_vendor(o->sysfs_root, PCI_VENDOR_NVIDIA, &nvidia);
	if (k < 0)
		log_warn("cannot scan %s/bus/pci/devices: %s; assuming no NVIDIA device",
			 o->sysfs_root, strerror(-k));
	a->nvidia = nvidia;
	if (!nvidia) {
		log_info("no NVIDIA PCI device under %s: answering unknown", o->sysfs_root);
		return 0;
	}

	k = kmsg_reader_init(&a->kmsg, o->kmsg_path);
	if (k < 0)
		return k;
	a->kmsg_on = true;
	kmsg_try_open(a, now);

	k = probe_find_nvidia_smi(o->nvidia_smi, &smi);
	if (k == -ENOMEM)
		return k;
	if (k < 0 && !o->dev_dir) {
		log_warn("nvidia-smi not found and the device probe is off: this agent cannot "
			 "report ok, only failed or unknown");
		return 0;
	}
	if (k < 0)
		log_info("nvidia-smi not found: probing by opening the device nodes under %s",
			 o->dev_dir);
	k = probe_init(&a->probe, smi, o->probe_interval_ns, o->probe_window_ns,
		       o->probe_timeout_ns, now);
	if (k < 0)
		return k;
	a->probe_on = true;
	probe_set_backoff(&a->probe, o->probe_backoff_max_ns);
	if (o->dev_dir)
		return probe_set_device_dir(&a->probe, o->dev_dir);
	return 0;
}

static int64_t next_wakeup(const struct agent *a)
{
	int64_t t = INT64_MAX;

	if (a->kmsg_on && a->kmsg.fd < 0 && !a->kmsg.finished)
		t = MIN(t, a->kmsg_reopen_ns);
	if (a->probe_on)
		t = MIN(t, probe_next_wakeup(&a->probe));
	if (a->accept_paused_until_ns > 0)
		t = MIN(t, a->accept_paused_until_ns);
	for (unsigned i = 0; i < a->o->max_clients; i++)
		if (a->conns[i].fd >= 0)
			t = MIN(t, a->conns[i].deadline_ns);
	return t;
}

static int poll_timeout_ms(int64_t wakeup_ns, int64_t now)
{
	int64_t ms;

	if (wakeup_ns == INT64_MAX)
		return -1;
	if (wakeup_ns <= now)
		return 0;
	ms = (wakeup_ns - now + 999999) / 1000000; /* round up: never wake early and spin */
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

static void agent_loop(struct agent *a, struct pollfd *pfd)
{
	const unsigned max = a->o->max_clients;

	while (!a->stop) {
		int64_t now = monotonic_ns();
		int n;

		pfd[POLL_SIGNAL] = (struct pollfd){ .fd = a->signal_fd, .events = POLLIN };
		if (a->accept_paused_until_ns > 0 && now >= a->accept_paused_until_ns)
			a->accept_paused_until_ns = 0;
		pfd[POLL_LISTEN] = (struct pollfd){
			.fd = (a->n_conns < max && !a->accept_paused_until_ns) ? a->listen_fd : -1,
			.events = POLLIN
		};
		pfd[POLL_KMSG] = (struct pollfd){ .fd = a->kmsg_on ? a->kmsg.fd : -1,
						  .events = POLLIN };
		for (unsigned i = 0; i < max; i++) {
			struct conn *c = &a->conns[i];
			pfd[POLL_FIXED + i] =
				(struct pollfd){ .fd = c->fd, .events = c->out ? POLLOUT : POLLIN };
		}

		n = poll(pfd, POLL_FIXED + max, poll_timeout_ms(next_wakeup(a), now));
		if (n < 0 && errno != EINTR) {
			log_err("poll: %s", strerror(errno));
			return;
		}
		now = monotonic_ns();

		if (n > 0 && pfd[POLL_SIGNAL].revents)
			signal_event(a, now);
		if (n > 0 && pfd[POLL_KMSG].fd >= 0 && pfd[POLL_KMSG].revents)
			kmsg_event(a, now);
		for (unsigned i = 0; n > 0 && i < max; i++)
			if (pfd[POLL_FIXED + i].fd >= 0 && pfd[POLL_FIXED + i].revents &&
			    a->conns[i].fd == pfd[POLL_FIXED + i].fd)
				conn_event(a, &a->conns[i], pfd[POLL_FIXED + i].revents);
		if (n > 0 && pfd[POLL_LISTEN].fd >= 0 && pfd[POLL_LISTEN].revents)
			accept_clients(a, now);

		/* timers */
		if (a->kmsg_on && a->kmsg.fd < 0 && !a->kmsg.finished && now >= a->kmsg_reopen_ns)
			kmsg_try_open(a, now);
		if (a->probe_on && probe_next_wakeup(&a->probe) <= now)
			probe_event(a, now);
		for (unsigned i = 0; i < max; i++)
			if (a->conns[i].fd >= 0 && now >= a->conns[i].deadline_ns) {
				log_debug("client: deadline passed; closing");
				conn_close(a, &a->conns[i]);
			}
	}
}

int agent_run(const struct agent_options *o)
{
	struct agent a = {
		.o = o,
		.signal_fd = -1,
		.listen_fd = -1,
		.kmsg_reopen_ns = INT64_MAX,
	};
	_cleanup_free_ struct pollfd *pfd = NULL;
	char where[ENDPOINT_STRING_MAX];
	sigset_t old_mask;
	int r;

	if (o->max_clients == 0 || o->client_timeout_ns <= 0)
		return -EINVAL;
	agent_state_init(&a.state);
	kmsg_rules_init(&a.rules);
	if (o->rules_path) {
		unsigned line;

		r = kmsg_rules_load(&a.rules, o->rules_path, &line);
		if (r < 0) {
			if (line)
				log_err("--rules %s:%u: %s", o->rules_path, line,
					kmsg_rules_strerror(r));
			else
				log_err("--rules %s: %s", o->rules_path, kmsg_rules_strerror(r));
			return r;
		}
		log_info("rules: %u from %s, then the built-in rule", a.rules.n - 1, o->rules_path);
	}
	if (o->nvidia_smi && access(o->nvidia_smi, X_OK) < 0) {
		r = negative_errno();
		log_err("--nvidia-smi %s: %s", o->nvidia_smi, strerror(-r));
		return r;
	}
	a.conns = calloc(o->max_clients, sizeof(*a.conns));
	pfd = calloc(POLL_FIXED + o->max_clients, sizeof(*pfd));
	if (!a.conns || !pfd) {
		free(a.conns);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < o->max_clients; i++)
		a.conns[i].fd = -1;

	sigprocmask(SIG_SETMASK, NULL, &old_mask);
	r = signals_setup(&a, &old_mask);
	if (r < 0) {
		log_err("signalfd: %s", strerror(-r));
		goto out_signals;
	}
	endpoint_format(&o->listen, where, sizeof(where));
	r = listen_on(&a, &o->listen);
	if (r < 0) {
		log_err("cannot listen on %s: %s", where, strerror(-r));
		goto out_signals;
	}
	log_info("listening on %s", where);
	r = watchers_setup(&a, monotonic_ns());
	if (r < 0) {
		log_err("setup: %s", strerror(-r));
		goto out_watchers;
	}
	if (a.probe_on)
		probe_event(&a, monotonic_ns()); /* the first attempt runs right away */

	agent_loop(&a, pfd);
	r = 0;

out_watchers:
	for (unsigned i = 0; i < o->max_clients; i++)
		conn_close(&a, &a.conns[i]);
	if (a.probe_on)
		probe_free(&a.probe);
	if (a.kmsg_on)
		kmsg_reader_free(&a.kmsg);
	close(a.listen_fd);
	if (a.unix_path[0])
		unlink(a.unix_path);
out_signals:
	if (a.signal_fd >= 0)
		close(a.signal_fd);
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	free(a.conns);
	return r;
}
