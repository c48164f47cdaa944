/*
 * sim_s4u: the SimGrid state changes that SimGrid 3.32's C API lacks, as C
 * functions over its C++ S4U API (sim_s4u.cpp, the backend's only C++):
 * a link turned off, a host's speed scaled by a profile, a transfer
 * between two hosts that no actor of the transfer runs on (Comm::sendto),
 * and an execution with a priority on a host other than the caller's.
 *
 * Layer: sim (SimGrid only).
 */
#ifndef LOONG_SIM_S4U_H
#define LOONG_SIM_S4U_H

#include <simgrid/forward.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Turn link l off: a transfer whose route crosses it fails. */
void sim_s4u_link_off(sg_link_t l);

/* From the simulation's start, h computes at `scale` (0 < scale) times its
 * peak: a speed profile, applied by SimGrid to every execution on h.
 * Once per host. */
void sim_s4u_host_scale(sg_host_t h, double scale);

/* Start a transfer of `bytes` from host `from` to host `to` over their
 * route, issued by the calling actor (wait for it with sg_comm_wait*). */
sg_comm_t sim_s4u_sendto_async(sg_host_t from, sg_host_t to, uint64_t bytes);

/* Run `flops` on host h (not necessarily the caller's) at weight
 * `priority` against the executions sharing h, and wait for it. */
void sim_s4u_execute_on(sg_host_t h, double flops, double priority);

#ifdef __cplusplus
}
#endif

#endif
