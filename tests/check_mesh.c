/* The device mesh (core/mesh.h) against closed forms: coordinates and
 * ranks, Megatron-Core's documented groups, the configuration's own
 * geometry (config_rank_of / config_coords), groups that partition the
 * ranks, shifts, fold/unfold, and the order strings it refuses. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "core/mesh.h"
#include "dag_util.h"

static mesh make(int tp, int head, int seq, int pp, int dp)
{
    int deg[MESH_NDIMS] = {tp, head, seq, pp, dp};
    return mesh_make(deg);
}

/* Megatron-Core's initialize_model_parallel docstring: 8 GPUs, tensor
 * parallel 2, pipeline parallel 4 (order tp-dp-pp): tensor groups
 * [0,1] [2,3] [4,5] [6,7], pipeline groups [0,2,4,6] [1,3,5,7]. And its 16-GPU
 * example with data parallel 2: tensor [0,1]..., data [0,2] [1,3] [4,6] ...,
 * pipeline [0,4,8,12] [1,5,9,13] [2,6,10,14] [3,7,11,15]. */
START_TEST(megatron_groups)
{
    char err[LOONG_ERRLEN];
    mesh m = make(2, 1, 1, 4, 1);
    ck_assert_int_eq(mesh_set_order(&m, "tp-dp-pp-head-seq", err), 0);
    ck_assert_int_eq(mesh_size(&m), 8);
    int g[8];
    ck_assert_int_eq(mesh_group_count(&m, MESH_BIT(MESH_TP)), 4);
    for (int id = 0; id < 4; id++) {
        mesh_group_members(&m, MESH_BIT(MESH_TP), id, g);
        ck_assert(g[0] == 2 * id && g[1] == 2 * id + 1);
    }
    ck_assert_int_eq(mesh_group_count(&m, MESH_BIT(MESH_PP)), 2);
    for (int id = 0; id < 2; id++) {
        mesh_group_members(&m, MESH_BIT(MESH_PP), id, g);
        for (int k = 0; k < 4; k++)
            ck_assert_int_eq(g[k], id + 2 * k);
    }
    m = make(2, 1, 1, 4, 2);
    ck_assert_int_eq(mesh_set_order(&m, "tp,dp,pp,head,seq", err), 0);
    static const int data[8][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}};
    for (int id = 0; id < 8; id++) {
        mesh_group_members(&m, MESH_BIT(MESH_DP), id, g);
        ck_assert(g[0] == data[id][0] && g[1] == data[id][1]);
    }
    for (int id = 0; id < 4; id++) {
        mesh_group_members(&m, MESH_BIT(MESH_PP), id, g);
        for (int k = 0; k < 4; k++)
            ck_assert_int_eq(g[k], id + 4 * k);
    }
}
END_TEST

/* The configuration's rank layout is the mesh (tp, head, seq, pp, dp)
 * under head-first placement and (tp, seq, head, pp, dp) under
 * context-first. */
START_TEST(config_geometry_is_the_mesh)
{
    static const int meshes[][2] = {{8, 8}, {2, 4}, {4, 2}, {1, 8}, {8, 1}, {4, 16}};
    for (size_t i = 0; i < sizeof meshes / sizeof meshes[0]; i++)
        for (int cf = 0; cf < 2; cf++) {
            int ph = meshes[i][0], ps = meshes[i][1];
            config c = tcfg("llama3-8b", 131072,
                            ph > 1 && ps > 1 ? "usp"
                            : ph > 1         ? "ulysses"
                                             : "zigzag",
                            ph, ps, ps, SCOPE_ATTN);
            config_set_placement(&c, cf ? PLACE_CONTEXT_FIRST : PLACE_HEAD_FIRST);
            mesh m = make(1, ph, ps, 1, 1);
            char err[LOONG_ERRLEN];
            ck_assert_int_eq(mesh_set_order(&m, cf ? "tp-seq-head-pp-dp" : "tp-head-seq-pp-dp", err), 0);
            for (int r = 0; r < ph * ps; r++) {
                int h, s, co[MESH_NDIMS];
                config_coords(&c, r, &h, &s);
                mesh_coords(&m, r, co);
                ck_assert(co[MESH_HEAD] == h && co[MESH_SEQ] == s && co[MESH_TP] == 0 && co[MESH_DP] == 0);
                ck_assert_int_eq(mesh_rank(&m, co), config_rank_of(&c, h, s));
                /* the ring's next rank and the head group */
                ck_assert_int_eq(mesh_shift(&m, r, MESH_SEQ, 1), config_rank_of(&c, h, (s + 1) % ps));
                ck_assert_int_eq(mesh_group_index(&m, MESH_BIT(MESH_HEAD), r), h);
                ck_assert_int_eq(mesh_group_index(&m, MESH_BIT(MESH_SEQ), r), s);
            }
        }
}
END_TEST

/* For every mesh of a small family and every set of dimensions: each rank
 * is in exactly one group, at its index; size x count = P; ids and
 * indices are in range; the members share every coordinate outside dims. */
START_TEST(groups_partition_the_ranks)
{
    static const char *orders[] = {"tp-head-seq-pp-dp", "dp-pp-seq-head-tp", "seq-tp-dp-head-pp"};
    mesh m = make(2, 3, 2, 2, 2);
    int P = mesh_size(&m), *members = malloc((size_t)P * sizeof *members), *seen = malloc((size_t)P * sizeof *seen);
    char err[LOONG_ERRLEN];
    for (int o = 0; o < 3; o++) {
        ck_assert_int_eq(mesh_set_order(&m, orders[o], err), 0);
        ck_assert_int_eq(mesh_validate(&m, err), 0);
        for (mesh_dims dims = 0; dims < MESH_BIT(MESH_NDIMS); dims++) {
            int size = mesh_group_size(&m, dims), count = mesh_group_count(&m, dims);
            ck_assert_int_eq(size * count, P);
            memset(seen, 0, (size_t)P * sizeof *seen);
            for (int id = 0; id < count; id++) {
                mesh_group_members(&m, dims, id, members);
                int c0[MESH_NDIMS];
                mesh_coords(&m, members[0], c0);
                for (int k = 0; k < size; k++) {
                    int r = members[k], c[MESH_NDIMS];
                    ck_assert(r >= 0 && r < P);
                    seen[r]++;
                    ck_assert_int_eq(mesh_group_id(&m, dims, r), id);
                    ck_assert_int_eq(mesh_group_index(&m, dims, r), k);
                    mesh_coords(&m, r, c);
                    for (int d = 0; d < MESH_NDIMS; d++)
                        if (!(dims & MESH_BIT(d))) ck_assert_int_eq(c[d], c0[d]);
                    /* fold/unfold over the same dimensions */
                    ck_assert_int_eq(mesh_fold(&m, dims, r), members[0]);
                    ck_assert_int_eq(mesh_unfold(&m, dims, members[0], k), r);
                }
                if (id > 0) { /* groups are numbered by their smallest rank */
                    int prev[64];
                    mesh_group_members(&m, dims, id - 1, prev);
                    ck_assert_int_lt(prev[0], members[0]);
                }
            }
            for (int r = 0; r < P; r++)
                ck_assert_int_eq(seen[r], 1);
        }
        /* rank <-> coordinates, and shifts by a whole degree are the identity */
        for (int r = 0; r < P; r++) {
            int c[MESH_NDIMS];
            mesh_coords(&m, r, c);
            ck_assert_int_eq(mesh_rank(&m, c), r);
            for (int d = 0; d < MESH_NDIMS; d++) {
                ck_assert_int_eq(mesh_shift(&m, r, (mesh_dim)d, m.degree[d]), r);
                ck_assert_int_eq(mesh_shift(&m, mesh_shift(&m, r, (mesh_dim)d, 1), (mesh_dim)d, -1), r);
            }
        }
    }
    /* the first dimension of the order is the fastest: ranks 0 and 1 differ there */
    ck_assert_int_eq(mesh_set_order(&m, "seq-tp-dp-head-pp", err), 0);
    int c[MESH_NDIMS];
    mesh_coords(&m, 1, c);
    ck_assert(c[MESH_SEQ] == 1 && c[MESH_TP] == 0);
    free(members);
    free(seen);
}
END_TEST

START_TEST(orders_refused)
{
    static const struct {
        const char *order, *want;
    } bad[] = {
        {"tp-head-seq-pp", "lacks dp"},
        {"tp-head-seq-pp-dp-tp", "names tp twice"},
        {"tp-cp-seq-pp-dp", "names seq twice"}, /* cp is Megatron's head then seq */
        {"tp-xx-seq-pp-dp", "'xx' is not a dimension (tp, head, seq, pp, dp; Megatron's cp, ep)"},
        {"tp-head-seq-dp", "lacks pp: name all of tp, head, seq, pp, dp, fastest first"},
        {"", "'' is not a dimension"},
    };
    mesh m = make(1, 1, 1, 1, 1);
    char err[LOONG_ERRLEN], text[64];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(mesh_set_order(&m, bad[i].order, err), -1);
        ck_assert_msg(strstr(err, bad[i].want) != NULL, "%s: %s", bad[i].order, err);
    }
    mesh_order_text(&m, text, sizeof text); /* unchanged by a refusal */
    ck_assert_str_eq(text, "tp-head-seq-pp-dp");
    m.degree[MESH_PP] = 0;
    ck_assert_int_eq(mesh_validate(&m, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "pp has degree 0"));
    m = make(65536, 65536, 1, 1, 1);
    ck_assert_int_eq(mesh_validate(&m, err), -1);
}
END_TEST

/* mesh_on and mesh_describe against the degrees; the named sets against
 * the groups they stand for. */
START_TEST(dimensions_described)
{
    mesh m = make(2, 4, 8, 1, 3);
    ck_assert(mesh_on(&m, MESH_TP) && mesh_on(&m, MESH_SEQ) && mesh_on(&m, MESH_DP));
    ck_assert(!mesh_on(&m, MESH_PP));
    char buf[64];
    mesh_describe(&m, MESH_DIMS_ALL, "%s%d*", buf, sizeof buf); /* slowest first, pp absent */
    ck_assert_str_eq(buf, "dp3*seq8*head4*tp2*");
    mesh_describe(&m, MESH_DIMS_ALL & ~MESH_DIMS_CP, " %s %d", buf, sizeof buf);
    ck_assert_str_eq(buf, " dp 3 tp 2");
    mesh_describe(&m, MESH_BIT(MESH_PP), "%s%d*", buf, sizeof buf);
    ck_assert_str_eq(buf, "");
    mesh_describe(&m, MESH_DIMS_ALL, "%s%d*", buf, 6); /* truncated, terminated */
    ck_assert_str_eq(buf, "dp3*s");
    ck_assert_int_eq(mesh_group_size(&m, MESH_DIMS_CP), 4 * 8);
    ck_assert_int_eq(mesh_group_size(&m, MESH_DIMS_GRAD), 4 * 8 * 3);
    ck_assert_int_eq(mesh_group_size(&m, MESH_DIMS_TP), 2);
    ck_assert_int_eq(mesh_group_size(&m, MESH_DIMS_ALL), mesh_size(&m));
    ck_assert_int_eq(MESH_DIMS_ALL & ~MESH_DIMS_DP & ~MESH_DIMS_GRAD, MESH_BIT(MESH_TP) | MESH_BIT(MESH_PP));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mesh");
    TCase *tc = tcase_create("mesh");
    tcase_add_test(tc, megatron_groups);
    tcase_add_test(tc, config_geometry_is_the_mesh);
    tcase_add_test(tc, groups_partition_the_ranks);
    tcase_add_test(tc, orders_refused);
    tcase_add_test(tc, dimensions_described);
    suite_add_tcase(s, tc);
    return check_run(s);
}
