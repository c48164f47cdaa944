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

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(loong_sim_event, loong, "loong sim: cross-stream events");

void sim_event_wait_deps(sim_stream *me, const dag_task *t)
{
    sim_state *S = me->S;
    const uint32_t *deps = dag_deps(S->g, t);
    for (int i = 0; i < t->ndeps; i++) {
        const dag_task *d = dag_task_get(S->g, deps[i]);
        sim_stream *other = sim_stream_mate(me, d->rank, d->stream);
        uint32_t need = S->pos[deps[i]] + 1;
        while (other->done < need) {
            if (other->sched >= need) { /* end time known: sleep until then */
                double end = S->start[me->off + deps[i]] + S->dur[me->off + deps[i]];
                if (end - simgrid_get_clock() >= SIM_MIN_SLEEP) sg_actor_sleep_until(end);
                break;
            }
            /* each actor waits on one thing at a time, so a stream has at
             * most STREAM_COUNT - 1 waiters */
            other->waiters[other->nwaiters++] = (sim_waiter){need, me->sem};
            XBT_DEBUG("rank %d %s: task %u waits for task %u", me->rank, stream_name(me->stream), t->id, deps[i]);
            sg_sem_acquire(me->sem);
        }
    }
}

bool sim_event_ready_by(const sim_stream *me, const dag_task *t, double at)
{
    const sim_state *S = me->S;
    const uint32_t *deps = dag_deps(S->g, t);
    for (int i = 0; i < t->ndeps; i++) {
        const dag_task *d = dag_task_get(S->g, deps[i]);
        const sim_stream *other = sim_stream_mate(me, d->rank, d->stream);
        uint32_t need = S->pos[deps[i]] + 1;
        if (other->done >= need) continue;
        if (other->sched >= need && S->start[me->off + deps[i]] + S->dur[me->off + deps[i]] <= at) continue;
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
