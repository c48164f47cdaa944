/* Placement (core/placement.h) against its invariants and closed forms:
 * every rank maps to exactly one (node, GPU) and back; NICs serve equal
 * runs of GPUs; the nodes a group spans equal a brute-force count and the
 * closed forms of mesh groups; NVLink-domain membership is node
 * membership, including a GB200 NVL72 domain of 72 GPUs; and the shapes
 * placement_validate refuses. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "core/mesh.h"
#include "core/placement.h"
#include "model/platform_spec.h"

/* Shapes: DGX H100 (8 GPUs, 8 NICs), a node of 8 GPUs sharing 2 NICs, a
 * 4-GPU node with one NIC, and an NVL72 domain (72 GPUs, 72 NICs). */
static const int shapes[][3] = {{8, 8, 4}, {8, 2, 3}, {4, 1, 5}, {72, 72, 2}, {1, 1, 6}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

START_TEST(every_rank_has_one_gpu)
{
    char err[LOONG_ERRLEN];
    for (size_t k = 0; k < NSHAPES; k++) {
        placement p = placement_make(shapes[k][0], shapes[k][1], shapes[k][2]);
        ck_assert_msg(placement_validate(&p, err) == 0, "%s", err);
        int gpus = placement_gpus(&p), gpn = shapes[k][0], nics = shapes[k][1];
        ck_assert_int_eq(gpus, shapes[k][0] * shapes[k][2]);
        int *seen = calloc((size_t)gpus, sizeof *seen), *nic_users = calloc((size_t)(shapes[k][2] * nics), sizeof(int));
        for (int r = 0; r < gpus; r++) {
            int node = placement_node(&p, r), gpu = placement_gpu(&p, r), nic = placement_nic(&p, r);
            ck_assert(node >= 0 && node < shapes[k][2]);
            ck_assert(gpu >= 0 && gpu < gpn);
            ck_assert(nic >= 0 && nic < nics);
            ck_assert_int_eq(placement_rank(&p, node, gpu), r);
            seen[node * gpn + gpu]++;
            nic_users[node * nics + nic]++;
            /* a NIC serves consecutive slots: its first GPU is nic x (gpn / nics) */
            ck_assert(gpu / (gpn / nics) == nic);
        }
        for (int i = 0; i < gpus; i++)
            ck_assert_int_eq(seen[i], 1); /* a bijection ranks <-> (node, GPU) */
        for (int i = 0; i < shapes[k][2] * nics; i++)
            ck_assert_int_eq(nic_users[i], gpn / nics); /* each NIC serves as many GPUs */
        free(seen);
        free(nic_users);
    }
}
END_TEST

/* Brute force: distinct nodes of a set of ranks. */
static int distinct_nodes(const placement *p, const int *r, int n)
{
    int count = 0;
    for (int i = 0; i < n; i++) {
        bool first = true;
        for (int j = 0; j < i && first; j++)
            first = placement_node(p, r[j]) != placement_node(p, r[i]);
        count += first;
    }
    return count;
}

static mesh make(int tp, int head, int seq, int pp, int dp)
{
    int deg[MESH_NDIMS] = {tp, head, seq, pp, dp};
    return mesh_make(deg);
}

START_TEST(group_spans)
{
    placement p = placement_make(8, 8, 0);
    /* tp 2 x head 2 x seq 2 fill a node of 8; pp 2 and dp 4 leave it */
    mesh m = make(2, 2, 2, 2, 4);
    int P = mesh_size(&m), g[64];
    ck_assert_int_eq(P, 64);
    struct {
        mesh_dims dims;
        int nodes; /* closed form: dimensions inside the node span 1, each outer one its degree */
    } want[] = {
        {MESH_BIT(MESH_TP), 1},
        {MESH_BIT(MESH_TP) | MESH_BIT(MESH_HEAD) | MESH_BIT(MESH_SEQ), 1},
        {MESH_BIT(MESH_PP), 2},
        {MESH_BIT(MESH_DP), 4},
        {MESH_BIT(MESH_HEAD) | MESH_BIT(MESH_SEQ) | MESH_BIT(MESH_DP), 4}, /* the gradient group */
        {MESH_BIT(MESH_SEQ) | MESH_BIT(MESH_PP) | MESH_BIT(MESH_DP), 8},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int n = mesh_group_size(&m, want[k].dims);
        for (int id = 0; id < mesh_group_count(&m, want[k].dims); id++) {
            mesh_group_members(&m, want[k].dims, id, g);
            ck_assert_int_eq(placement_group_nodes(&p, g, n), want[k].nodes);
            ck_assert_int_eq(placement_group_nodes(&p, g, n), distinct_nodes(&p, g, n));
            /* order does not matter: reversed, the same nodes */
            for (int i = 0; i < n / 2; i++) {
                int t = g[i];
                g[i] = g[n - 1 - i];
                g[n - 1 - i] = t;
            }
            ck_assert_int_eq(placement_group_nodes(&p, g, n), want[k].nodes);
        }
    }
    ck_assert_int_eq(placement_group_nodes(&p, g, 0), 0);
    int rep[] = {3, 3, 11, 3, 11};
    ck_assert_int_eq(placement_group_nodes(&p, rep, 5), 2);
}
END_TEST

START_TEST(strided_is_the_group)
{
    for (size_t k = 0; k < NSHAPES; k++) {
        placement p = placement_make(shapes[k][0], shapes[k][1], 0);
        int r[40];
        for (int start = 0; start < 20; start += 3)
            for (int stride = 1; stride < 20; stride += 2)
                for (int n = 0; n <= 40; n += 5) {
                    for (int i = 0; i < n; i++)
                        r[i] = start + i * stride;
                    ck_assert_int_eq(placement_strided_nodes(&p, start, stride, n), distinct_nodes(&p, r, n));
                }
        /* ranks past INT_MAX (a trace's arguments), each further than a
         * node from the last: one node per rank */
        ck_assert_int_eq(placement_strided_nodes(&p, 2000000000, 2000000000, 3), 3);
    }
}
END_TEST

START_TEST(domain_membership)
{
    placement p = placement_make(8, 8, 2);
    for (int a = 0; a < 16; a++)
        for (int b = 0; b < 16; b++) {
            ck_assert(placement_same_domain(&p, a, b) == (a / 8 == b / 8));
            ck_assert(placement_same_domain(&p, a, b) == placement_same_domain(&p, b, a));
        }
    /* GB200 NVL72: `loong topo --gpu gb200 --nodes 36` is two domains of 72
     * GPUs over 18 trays of 4; the domain is the placement's node */
    platform_spec sp;
    char err[LOONG_ERRLEN];
    ck_assert_int_eq(platform_spec_defaults("gb200", &sp, err), 0);
    sp.nodes = 2;
    placement nvl = platform_spec_placement(&sp);
    ck_assert_int_eq(placement_validate(&nvl, err), 0);
    ck_assert_int_eq(nvl.gpus_per_node, 72);
    ck_assert(placement_same_domain(&nvl, 0, 71));   /* tray 0 and tray 17 of one rack */
    ck_assert(!placement_same_domain(&nvl, 71, 72)); /* the next rack */
    ck_assert_int_eq(placement_nic(&nvl, 77), 5);    /* one rail NIC per GPU */
    int tp8[8] = {64, 65, 66, 67, 68, 69, 70, 71}, cross[2] = {71, 72};
    ck_assert_int_eq(placement_group_nodes(&nvl, tp8, 8), 1); /* a TP group across trays stays on NVLink */
    ck_assert_int_eq(placement_group_nodes(&nvl, cross, 2), 2);
    /* an H100 spec: its nodes are hosts of 8 */
    ck_assert_int_eq(platform_spec_defaults("h100", &sp, err), 0);
    sp.nodes = 4;
    placement h = platform_spec_placement(&sp);
    ck_assert_int_eq(placement_gpus(&h), 32);
    ck_assert(!placement_same_domain(&h, 7, 8));
}
END_TEST

START_TEST(shapes_refused)
{
    const struct {
        int gpn, nics, nodes;
        const char *want;
    } bad[] = {
        {0, 1, 1, "at least one GPU"}, {8, 3, 1, "must divide"},          {8, 0, 1, "must divide"},
        {8, 8, -1, "at least 0"},      {65536, 1, 65536, "does not fit"},
    };
    char err[LOONG_ERRLEN];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        placement p = placement_make(bad[i].gpn, bad[i].nics, bad[i].nodes);
        ck_assert_int_eq(placement_validate(&p, err), -1);
        ck_assert_msg(strstr(err, bad[i].want) != NULL, "%d %d %d: %s", bad[i].gpn, bad[i].nics, bad[i].nodes, err);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("placement");
    TCase *tc = tcase_create("placement");
    tcase_add_test(tc, every_rank_has_one_gpu);
    tcase_add_test(tc, group_spans);
    tcase_add_test(tc, strided_is_the_group);
    tcase_add_test(tc, domain_membership);
    tcase_add_test(tc, shapes_refused);
    suite_add_tcase(s, tc);
    return check_run(s);
}
