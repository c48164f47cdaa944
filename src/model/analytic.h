/*
 * analytic: the planner's fast step-time model. It predicts what `loong sim`
 * predicts for a training step (scope step) from the config alone — no DAG
 * — using the same calibration table (calib.h) for every compute task and
 * the same α-β links as the platform (its platform_spec, the loong_spec
 * that `loong topo` records). Cost: O(P_s^2) block evaluations at worst, well
 * under 10 ms per layout at 256 GPUs.
 *
 * What it models (docs/plan.md), per layer, for each ring index s
 * (ranks of one head group are identical; ring ranks differ under the
 * contiguous partition):
 *   - compute stream: the GEMMs (QKV, output, SwiGLU x3; backward 2x FLOPs;
 *     recompute), each attention block, merge and dK/dV accumulation with
 *     the exact shapes ring.c emits, timed by calib_seconds();
 *   - head all-to-alls: exposed (the compute stream waits for them); every
 *     member sends bytes/(P_h-1) to each other member at once, NVLink and
 *     NIC traffic in parallel, a NIC shared by the GPUs of its rail;
 *   - the ring, as a critical-path recurrence over its steps with prefetch:
 *     step i's block and transfer start when block i-1 and transfer i-1 are
 *     done (the double buffer's hazard); each double-ring window's outer
 *     transfer overlaps its inner loop and shares the link with it when both
 *     use the same kind of link; in the backward the dK/dV accumulators
 *     travel on their own streams (fp32), sharing the link with the KV, and
 *     the compute stream waits for an arriving accumulator before adding to
 *     it; a transfer costs α + bytes/β of the slowest hop of its ring;
 *   - tensor parallelism: GEMMs with 1/tp of the weights, and the TP
 *     collectives build.c emits (sequence parallelism's all-gathers and
 *     reduce-scatters, or all-reduces) on TP group 0's real members
 *     through NCCL's model, exposed (the GEMMs wait for them);
 *   - the data-parallel stream (ZeRO 0-3 as build.c emits it), one
 *     collective over the gradient group (the mesh's CONFIG_GRAD_DIMS:
 *     dp*P ranks, members from the mesh), overlapping the compute stream
 *     where the DAG lets it.
 * The step is the slowest ring index's critical path; exposed communication
 * is step time minus that rank's busy compute time.
 * Not modelled: contention between different head groups' flows beyond
 * NIC sharing, compute/communication interference, the imbalanced ranks'
 * coupling through the ring (the slowest rank sets the pace).
 *
 * Layer: model (uses core only: no SimGrid, no executor, no measurements).
 */
#ifndef LOONG_ANALYTIC_H
#define LOONG_ANALYTIC_H

#include "calib.h"
#include "core/config.h"
#include "platform_spec.h"

typedef struct analytic_result {
    double step;      /* predicted step time, seconds */
    double busy;      /* compute-stream time of the critical rank */
    double exposed;   /* step - busy */
    double a2a;       /* all-to-all time per step (exposed) */
    double ring_wait; /* compute-stream wait on ring transfers per step */
    double dp_tail;   /* data-parallel communication not hidden */
    double tp;        /* tensor-parallel collectives per step (exposed) */
    double bubble;    /* pipeline: the largest share of the step a stage's passes leave it idle (0: none) */
    int worst_s;      /* ring index of the critical rank */
} analytic_result;

/* Predict the training step of validated config c (any scope is treated as
 * step) on net with compute times from cb; the ZeRO collectives span its
 * gradient group (c->dp * P ranks). Never fails. */
void analytic_step(const config *c, const calib *cb, const platform_spec *net, analytic_result *out);

#endif
