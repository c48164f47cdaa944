/*
 * sim_event: cross-stream dependencies as CUDA-style events. A stream's
 * progress is the count of its completed tasks (tasks complete in stream
 * order, and a grouped send/recv completes as a whole, like an event
 * recorded after an NCCL group). A dependency on task d is "d's stream has
 * completed pos(d)+1 tasks". A waiter parks on its own semaphore, registered
 * with the stream it waits on, which releases it when due. Only blocking
 * waits cost a SimGrid call.
 *
 * The compute stream may fix the end times of a run of ready kernels at
 * once (sim_actor.c) and sleep through them in one call; `sched` then runs
 * ahead of `done`, and a waiter on a kernel of that run sleeps until the
 * kernel's known end instead of parking.
 */
#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <simgrid/semaphore.h>
#include <xbt/log.h>

#include "sim_internal.h"
#include "core/xalloc.h"

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(loong_sim_event, loong, "loong sim: cross-stream events");

void sim_event_resolve(sim_stream *st)
{
    sim_state *S = st->S;
    uint32_t total = 0;
    for (uint32_t i = 0; i < st->n; i++)
        total += dag_task_get(S->g, st->ids[i])->ndeps;
    st->dep_at = xmalloc_array((size_t)st->n + 1, sizeof *st->dep_at, "the simulation's dependencies");
    st->deps = xmalloc_array(total ? total : 1, sizeof *st->deps, "the simulation's dependencies");
    uint32_t k = 0;
    for (uint32_t i = 0; i < st->n; i++) {
        const dag_task *t = dag_task_get(S->g, st->ids[i]);
        const uint32_t *deps = dag_deps(S->g, t);
        st->dep_at[i] = k;
        for (int j = 0; j < t->ndeps; j++) {
            const dag_task *d = dag_task_get(S->g, deps[j]);
            int mate = sim_rank_of(S, d->rank, st->rep) * STREAM_COUNT + d->stream;
            st->deps[k++] = (sim_dep){(uint32_t)mate, S->pos[deps[j]] + 1};
        }
    }
    st->dep_at[st->n] = k;
}

void sim_event_wait_deps(sim_stream *me, uint32_t i)
{
    sim_state *S = me->S;
    for (uint32_t j = me->dep_at[i]; j < me->dep_at[i + 1]; j++) {
        const sim_dep *d = &me->deps[j];
        sim_stream *other = &S->streams[d->mate];
        while (other->done < d->need) {
            if (other->sched >= d->need) { /* end time known: sleep until then */
                uint32_t id = other->ids[d->need - 1];
                double end = S->start[me->off + id] + S->dur[me->off + id];
                if (end - simgrid_get_clock() >= SIM_MIN_SLEEP) sg_actor_sleep_until(end);
                break;
            }
            /* each actor waits on one thing at a time, so a stream has at
             * most STREAM_COUNT - 1 waiters */
            other->waiters[other->nwaiters++] = (sim_waiter){d->need, me->sem};
            XBT_DEBUG("rank %d %s: task %u waits for task %u", me->rank, stream_name(me->stream), me->ids[i],
                      other->ids[d->need - 1]);
            sg_sem_acquire(me->sem);
        }
    }
}

bool sim_event_ready_by(const sim_stream *me, uint32_t i, double at)
{
    const sim_state *S = me->S;
    for (uint32_t j = me->dep_at[i]; j < me->dep_at[i + 1]; j++) {
        const sim_dep *d = &me->deps[j];
        const sim_stream *other = &S->streams[d->mate];
        if (other->done >= d->need) continue;
        if (other->sched < d->need) return false;
        uint32_t id = other->ids[d->need - 1];
        if (S->start[me->off + id] + S->dur[me->off + id] <= at) continue;
        return false;
    }
    return true;
}

void sim_event_scheduled(sim_stream *st, uint32_t sched)
{
    st->sched = sched;
    int keep = 0;
    for (int i = 0; i < st->nwaiters; i++) {
        if (st->waiters[i].need <= sched)
            sg_sem_release(st->waiters[i].sem); /* it re-checks and sleeps until its task's end */
        else
            st->waiters[keep++] = st->waiters[i];
    }
    st->nwaiters = keep;
}

void sim_event_done(sim_stream *st, uint32_t count)
{
    st->done += count;
    if (st->sched < st->done) st->sched = st->done;
    int keep = 0;
    for (int i = 0; i < st->nwaiters; i++) {
        if (st->waiters[i].need <= st->done)
            sg_sem_release(st->waiters[i].sem);
        else
            st->waiters[keep++] = st->waiters[i];
    }
    st->nwaiters = keep;
}
