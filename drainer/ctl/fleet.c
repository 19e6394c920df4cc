/* The fleet runner (fleet.h): owns one engine and one announcer per running run, the
 * informers the runs share (-l), the schedule (at most max_parallel at once, in the
 * order given), maintain's stages (drain every run, the command, restore every run)
 * and the command's process. Waits are timers of the time source; it never runs the
 * loop, never prints and knows no argv or exit code. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "drainer/base/log.h"
#include "drainer/base/timesrc.h"
#include "drainer/ctl/announcer.h"
#include "drainer/ctl/fleet.h"
#include "drainer/dra/nodeview.h"
#include "drainer/drain/engine.h"
#include "drainer/kube/client.h"

enum member_state {
        MEMBER_WAITING,  /* not started in this stage */
        MEMBER_RUNNING,  /* its engine runs */
        MEMBER_SETTLING, /* ended or interrupted: its engine and Events finishing */
        MEMBER_DONE,     /* reported for this stage */
};

enum fleet_stage {
        STAGE_IDLE,
        STAGE_DRAIN,
        STAGE_COMMAND,
        STAGE_UNCORDON,
        STAGE_CLOSING,
        STAGE_FINISHED,
};

struct fleet_member {
        struct fleet_node pub;
        struct drain_fleet *fleet;
        enum member_state state;
        struct engine *engine;       /* owned: the current goal's */
        struct announcer *announcer; /* owned: this run's Events */
        char *message, *needs_flag, *progress_message;
};

struct drain_fleet {
        struct kube_client *client;  /* borrowed */
        struct transport *transport; /* borrowed */
        struct timesrc *ts;          /* borrowed */
        struct uv_loop_s *loop;      /* borrowed */
        struct drain_fleet_options o;
        char *instance;
        struct drain_fleet_callbacks cb;
        void *userdata;

        struct fleet_member *members;
        size_t n;
        enum fleet_stage stage;
        size_t next;    /* the next member to start in this stage */
        size_t running; /* members running or settling */
        bool interrupted;
        bool command_running;
        struct dtimer step;   /* schedules from the loop */
        struct dtimer settle; /* looks at settling members, once something of them ended */
        bool timers_ready;
        struct cluster_view *cluster; /* owned: -l's shared informers */
};

static void schedule_nodes(struct drain_fleet *f);

static void step_soon(struct drain_fleet *f) {
        if (!f->step.armed)
                dtimer_start(&f->step, 0);
}

/* A run ended, or its engine went idle, or its last Event answered: the settling
 * members are looked at on the next turn (never from inside their callbacks, which
 * must not see their engine freed). Nothing wakes while they wait. */
static void settle_soon(struct drain_fleet *f) {
        if (!f->settle.armed)
                dtimer_start(&f->settle, 0);
}

/* ---- one run's engine ---- */

static void sync_pub(struct fleet_member *m) {
        m->pub.message = m->message;
        m->pub.needs_flag = m->needs_flag;
        m->pub.progress_message = m->progress_message;
        m->pub.summary.message = m->message;
        m->pub.summary.needs_flag = m->needs_flag;
}

static int set_string(char **p, const char *s) {
        char *c = NULL;

        if (s && !(c = strdup(s)))
                return -ENOMEM;
        free(*p);
        *p = c;
        return 0;
}

static void on_engine_progress(struct engine *e, const struct engine_progress *p, void *userdata) {
        struct fleet_member *m = userdata;
        struct drain_fleet *f = m->fleet;

        m->pub.has_phase = p->has_phase;
        m->pub.phase = p->phase;
        m->pub.progress_seen = true;
        m->pub.node_seen = p->node_seen;
        m->pub.node_not_ready = p->node_not_ready;
        m->pub.out_of_service = p->out_of_service;
        if (p->message && !streq_ptr(p->message, m->progress_message))
                (void)set_string(&m->progress_message, p->message);
        sync_pub(m);
        if (f->cb.on_progress)
                f->cb.on_progress(f, &m->pub, p, f->userdata);
}

static void on_engine_trail(struct engine *e, const struct engine_trail *t, void *userdata) {
        struct fleet_member *m = userdata;
        struct drain_fleet *f = m->fleet;

        if (f->cb.on_trail)
                f->cb.on_trail(f, &m->pub, t, f->userdata);
}

static void on_engine_notice(struct engine *e, const struct engine_notice *n, void *userdata) {
        struct fleet_member *m = userdata;

        announcer_notice(m->announcer, n);
}

/* "ns/name" once in the run's list. */
static void add_ns_terminating(struct fleet_member *m, const struct engine_held *h) {
        char *k, **v;

        if (asprintf(&k, "%s/%s", h->ns, h->name) < 0)
                return;
        for (size_t i = 0; i < m->pub.n_ns_terminating; i++)
                if (streq(m->pub.ns_terminating[i], k)) {
                        free(k);
                        return;
                }
        v = realloc(m->pub.ns_terminating, (m->pub.n_ns_terminating + 1) * sizeof(*v));
        if (!v) {
                free(k);
                return;
        }
        v[m->pub.n_ns_terminating++] = k;
        m->pub.ns_terminating = v;
}

static void on_engine_idle(struct engine *e, void *userdata) {
        struct fleet_member *m = userdata;

        if (m->state == MEMBER_SETTLING)
                settle_soon(m->fleet);
}

static void on_announcer_idle(void *userdata) {
        struct fleet_member *m = userdata;

        if (m->state == MEMBER_SETTLING)
                settle_soon(m->fleet);
}

static void on_engine_finished(struct engine *e, const struct engine_summary *s, void *userdata) {
        struct fleet_member *m = userdata;
        struct engine_summary *t = &m->pub.total;

        m->pub.result = s->result;
        for (int p = 0; p < _DRAIN_PHASE_MAX; p++) {
                t->phase_usec[p] += s->phase_usec[p];
                t->phase_seen[p] |= s->phase_seen[p];
        }
        t->pods_evicted += s->pods_evicted;
        t->claims_waited += s->claims_waited;
        t->changed |= s->changed;
        for (size_t i = 0; i < s->n_ns_terminating; i++)
                add_ns_terminating(m, &s->ns_terminating[i]);
        (void)set_string(&m->needs_flag, s->needs_flag);
        (void)set_string(&m->message, s->message);
        m->pub.summary = *s;
        m->pub.summary_valid = true;
        sync_pub(m);
        if (m->state == MEMBER_RUNNING) {
                m->state = MEMBER_SETTLING;
                settle_soon(m->fleet);
        }
}

/* The run could not start: it ends with r and what says why. */
static void member_failed(struct fleet_member *m, int r, const char *what) {
        char *msg = NULL;

        if (asprintf(&msg, "%s: %s", what, strerror(-r)) >= 0) {
                free(m->message);
                m->message = msg;
        }
        m->pub.result = r;
        sync_pub(m);
        m->state = MEMBER_SETTLING;
        settle_soon(m->fleet);
}

static void start_member(struct drain_fleet *f, struct fleet_member *m, enum engine_goal goal) {
        static const struct engine_callbacks cb = {
                .on_progress = on_engine_progress,
                .on_notice = on_engine_notice,
                .on_trail = on_engine_trail,
                .on_finished = on_engine_finished,
                .on_idle = on_engine_idle,
        };
        struct engine_options eo;
        uint64_t now = timesrc_now(f->ts);
        int r;

        m->pub.goal = goal;
        m->pub.started = true;
        m->pub.result = 0;
        m->pub.summary = (struct engine_summary){};
        m->pub.summary_valid = false;
        if (!m->pub.started_usec)
                m->pub.started_usec = now;
        m->pub.run_started_usec = now;
        m->state = MEMBER_RUNNING;
        f->running++;
        if (f->cb.on_node_start)
                f->cb.on_node_start(f, &m->pub, f->userdata);

        if (!m->announcer) {
                r = announcer_new(f->client, f->ts, f->instance, &m->announcer);
                if (r < 0) {
                        member_failed(m, r, "Cannot set up the node's Events");
                        return;
                }
                announcer_set_idle_fn(m->announcer, on_announcer_idle, m);
        }
        drain_profile_engine_options(m->pub.profile, m->pub.node, goal, &eo);
        eo.timeout_usec = m->pub.profile->timeout_usec;
        eo.units = f->o.units;
        eo.shared = f->cluster;
        eo.out_of_service = f->o.out_of_service;
        eo.out_of_service_after_usec = f->o.out_of_service_after_usec;
        eo.unread_timeout_usec = f->o.bound_unread ? kube_client_request_timeout(f->client) : 0;
        r = engine_new(f->client, f->transport, f->ts, &eo, &cb, m, &m->engine);
        if (r < 0) {
                member_failed(m, r, "Cannot set up the drain engine");
                return;
        }
        r = engine_start(m->engine);
        if (r < 0) {
                /* its informers may have started: stopped as any ended engine */
                engine_stop(m->engine);
                member_failed(m, r, "Cannot start watching the node");
        }
}

/* Members whose engine ended: reported once the engine is idle and the Events posted.
 * One still busy is looked at again when its engine's on_idle or its announcer's last
 * answer says so. */
static void on_settle(struct dtimer *t) {
        struct drain_fleet *f = container_of(t, struct drain_fleet, settle);

        for (size_t i = 0; i < f->n; i++) {
                struct fleet_member *m = &f->members[i];
                enum drain_phase ph;

                if (m->state != MEMBER_SETTLING)
                        continue;
                if (m->engine)
                        engine_stop(m->engine); /* a finished engine is stopped: a no-op */
                if ((m->engine && !engine_idle(m->engine)) ||
                    (m->announcer && !announcer_idle(m->announcer)))
                        continue;
                /* interrupted: the phase the Node shows, even one written after the last progress */
                if (m->pub.result == -EINTR && m->engine && engine_node_phase(m->engine, &ph)) {
                        m->pub.phase = ph;
                        m->pub.has_phase = true;
                }
                m->state = MEMBER_DONE;
                f->running--;
                if (f->cb.on_node_done)
                        f->cb.on_node_done(f, &m->pub, f->userdata);
                /* its node view: the next run's memory */
                engine_free(m->engine);
                m->engine = NULL;
                m->pub.summary.plan = NULL;
        }
        schedule_nodes(f);
}

/* ---- the stages ---- */

static void on_cluster_closed(void *userdata) {
        struct drain_fleet *f = userdata;

        f->cluster = NULL;
        f->stage = STAGE_FINISHED;
        if (f->cb.on_finished)
                f->cb.on_finished(f, f->userdata);
}

static void finish(struct drain_fleet *f) {
        f->stage = STAGE_CLOSING;
        if (f->cluster) {
                /* the engines' node views are closed: the shared informers go */
                cluster_view_close(f->cluster, on_cluster_closed, f);
                return;
        }
        on_cluster_closed(f);
}

static void begin_goal_stage(struct drain_fleet *f, enum fleet_stage stage) {
        f->stage = stage;
        f->next = 0;
        for (size_t i = 0; i < f->n; i++) {
                f->members[i].state = MEMBER_WAITING;
                f->members[i].pub.started = false;
        }
}

static void on_command_exit(int status, int error, void *userdata) {
        struct drain_fleet *f = userdata;

        f->command_running = false;
        for (size_t i = 0; i < f->n; i++)
                f->members[i].pub.command_status = status;
        if (f->cb.on_command_done)
                f->cb.on_command_done(f, status, error, f->userdata);
        if (status == 0 || f->o.restore_on_failure) {
                begin_goal_stage(f, STAGE_UNCORDON);
                step_soon(f);
        } else
                finish(f);
}

static void run_command(struct drain_fleet *f) {
        int r;

        f->stage = STAGE_COMMAND;
        if (f->cb.on_command)
                f->cb.on_command(f, f->o.command, f->userdata);
        r = fleet_command_spawn(f->loop, f->o.command, on_command_exit, f);
        if (r < 0) {
                on_command_exit(127, r, f);
                return;
        }
        f->command_running = true;
}

/* The stage's runs all ended (or an interrupt left some unstarted): those are reported
 * as never started, then the next stage. */
static void end_goal_stage(struct drain_fleet *f) {
        bool all_done = true;

        for (size_t i = 0; i < f->n; i++) {
                struct fleet_member *m = &f->members[i];

                if (m->state == MEMBER_WAITING) {
                        m->state = MEMBER_DONE;
                        m->pub.started = false;
                        m->pub.result = -EINTR;
                        if (f->cb.on_node_done)
                                f->cb.on_node_done(f, &m->pub, f->userdata);
                }
                all_done = all_done && m->pub.started && m->pub.result == 0;
        }
        if (f->stage == STAGE_DRAIN && f->o.goal == FLEET_GOAL_MAINTAIN && all_done && !f->interrupted)
                run_command(f);
        else
                finish(f);
}

static enum engine_goal stage_goal(enum fleet_stage stage) {
        return stage == STAGE_UNCORDON ? ENGINE_GOAL_UNCORDON : ENGINE_GOAL_DRAIN;
}

/* Starts runs while there is room, in the order given; ends the stage when none is left. */
static void schedule_nodes(struct drain_fleet *f) {
        unsigned max = f->o.max_parallel ? f->o.max_parallel : 1;

        if (f->stage != STAGE_DRAIN && f->stage != STAGE_UNCORDON)
                return;
        while (!f->interrupted && f->running < max && f->next < f->n)
                start_member(f, &f->members[f->next++], stage_goal(f->stage));
        if (f->running == 0 && (f->interrupted || f->next >= f->n))
                end_goal_stage(f);
}

static void on_step(struct dtimer *t) {
        schedule_nodes(container_of(t, struct drain_fleet, step));
}

/* ---- the object ---- */

int drain_fleet_new(struct kube_client *client, struct transport *transport, struct timesrc *ts,
                    struct uv_loop_s *loop, const struct drain_fleet_options *o,
                    const struct drain_fleet_callbacks *cb, void *userdata, struct drain_fleet **ret) {
        _cleanup_(drain_fleet_freep) struct drain_fleet *f = NULL;

        if (!o || o->n_runs == 0 || (unsigned)o->goal >= _FLEET_GOAL_MAX ||
            (o->goal == FLEET_GOAL_MAINTAIN && (!o->command || !o->command[0] || !loop)))
                return -EINVAL;
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->client = client;
        f->transport = transport;
        f->ts = ts;
        f->loop = loop;
        f->o = *o;
        f->o.runs = NULL;
        f->cb = cb ? *cb : (struct drain_fleet_callbacks){};
        f->userdata = userdata;
        if (o->instance && !(f->instance = strdup(o->instance)))
                return -ENOMEM;
        f->o.instance = f->instance;
        f->members = calloc(o->n_runs, sizeof(*f->members));
        if (!f->members)
                return -ENOMEM;
        f->n = o->n_runs;
        for (size_t i = 0; i < f->n; i++) {
                struct fleet_member *m = &f->members[i];

                if (!o->runs[i].node || !o->runs[i].profile)
                        return -EINVAL;
                m->fleet = f;
                m->pub = (struct fleet_node){ .index = i,
                                              .node = o->runs[i].node,
                                              .profile = o->runs[i].profile,
                                              .command_status = -1 };
        }
        if (dtimer_init(&f->step, ts, on_step) < 0)
                return -ENOMEM;
        if (dtimer_init(&f->settle, ts, on_settle) < 0) {
                dtimer_done(&f->step);
                return -ENOMEM;
        }
        f->timers_ready = true;
        *ret = TAKE_PTR(f);
        return 0;
}

int drain_fleet_start(struct drain_fleet *f) {
        int r;

        if (f->stage != STAGE_IDLE)
                return -EBUSY;
        if (f->o.share_informers) {
                r = cluster_view_new(f->client, f->ts,
                                     &(const struct cluster_view_options){ .linger_usec = f->o.linger_usec },
                                     &f->cluster);
                if (r >= 0)
                        r = cluster_view_start(f->cluster);
                if (r < 0) {
                        if (f->cluster)
                                cluster_view_close(f->cluster, NULL, NULL);
                        f->cluster = NULL;
                        return r;
                }
        }
        begin_goal_stage(f, f->o.goal == FLEET_GOAL_UNCORDON ? STAGE_UNCORDON : STAGE_DRAIN);
        step_soon(f);
        return 0;
}

void drain_fleet_stop(struct drain_fleet *f) {
        if (!f || f->interrupted)
                return;
        f->interrupted = true;
        for (size_t i = 0; i < f->n; i++) {
                struct fleet_member *m = &f->members[i];

                if (m->state != MEMBER_RUNNING)
                        continue;
                m->pub.result = -EINTR;
                m->state = MEMBER_SETTLING;
                if (m->engine)
                        engine_stop(m->engine);
        }
        if (f->stage == STAGE_DRAIN || f->stage == STAGE_UNCORDON) {
                settle_soon(f);
                step_soon(f);
        }
}

bool drain_fleet_interrupted(const struct drain_fleet *f) {
        return f->interrupted;
}

size_t drain_fleet_size(const struct drain_fleet *f) {
        return f->n;
}

const struct fleet_node *drain_fleet_node(const struct drain_fleet *f, size_t i) {
        return i < f->n ? &f->members[i].pub : NULL;
}

void drain_fleet_free(struct drain_fleet *f) {
        if (!f)
                return;
        if (f->timers_ready) {
                dtimer_done(&f->step);
                dtimer_done(&f->settle);
        }
        for (size_t i = 0; f->members && i < f->n; i++) {
                struct fleet_member *m = &f->members[i];

                engine_free(m->engine);
                announcer_free(m->announcer); /* Events in flight finish into nothing */
                free(m->message);
                free(m->needs_flag);
                free(m->progress_message);
                for (size_t k = 0; k < m->pub.n_ns_terminating; k++)
                        free(m->pub.ns_terminating[k]);
                free(m->pub.ns_terminating);
        }
        if (f->cluster)
                cluster_view_close(f->cluster, NULL, NULL);
        free(f->members);
        free(f->instance);
        free(f);
}

/* ---- the command ---- */

struct fleet_command {
        uv_process_t proc;
        fleet_command_fn done;
        void *userdata;
        int status, error;
};

static void on_command_closed(uv_handle_t *h) {
        struct fleet_command *c = container_of((uv_process_t *)h, struct fleet_command, proc);

        c->done(c->status, c->error, c->userdata);
        free(c);
}

static void on_process_exit(uv_process_t *p, int64_t status, int signum) {
        struct fleet_command *c = container_of(p, struct fleet_command, proc);

        c->status = signum ? 128 + signum : (int)status;
        uv_close((uv_handle_t *)p, on_command_closed);
}

int fleet_command_spawn(struct uv_loop_s *loop, char *const *argv, fleet_command_fn done, void *userdata) {
        uv_stdio_container_t stdio[3] = {
                { .flags = UV_INHERIT_FD, .data.fd = 0 },
                { .flags = UV_INHERIT_FD, .data.fd = 1 },
                { .flags = UV_INHERIT_FD, .data.fd = 2 },
        };
        uv_process_options_t po = {
                .exit_cb = on_process_exit,
                .file = argv[0],
                .args = (char **)argv,
                .stdio_count = 3,
                .stdio = stdio,
        };
        struct fleet_command *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        c->done = done;
        c->userdata = userdata;
        r = uv_spawn(loop, &c->proc, &po);
        if (r < 0) {
                /* the handle is initialized even so: closed, and the failure said from the loop */
                c->status = 127;
                c->error = r;
                uv_close((uv_handle_t *)&c->proc, on_command_closed);
        }
        return 0;
}
