/* mesh: the device mesh (see mesh.h). */
#include "mesh.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char *const names[MESH_NDIMS] = {"tp", "head", "seq", "pp", "dp"};

const char *mesh_dim_name(mesh_dim d) { return d < MESH_NDIMS ? names[d] : "?"; }

/* Every dimension's name, seed order, joined by ", " ("tp, head, seq,
 * pp, dp"): the messages list them from the table, never by hand. */
static const char *all_names(char buf[64])
{
    size_t n = 0;
    buf[0] = '\0';
    for (int d = 0; d < MESH_NDIMS; d++)
        n += (size_t)snprintf(buf + n, 64 - n, "%s%s", d ? ", " : "", names[d]);
    return buf;
}

void mesh_describe(const mesh *m, mesh_dims dims, const char *fmt, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int d = MESH_NDIMS - 1; d >= 0 && n < len; d--)
        if ((dims & MESH_BIT(d)) && mesh_on(m, (mesh_dim)d))
            n += (size_t)snprintf(buf + n, len - n, fmt, names[d], m->degree[d]);
}

mesh mesh_make(const int degree[MESH_NDIMS])
{
    mesh m;
    for (int d = 0; d < MESH_NDIMS; d++) {
        m.degree[d] = degree[d];
        m.order[d] = (mesh_dim)d;
    }
    return m;
}

int mesh_set_order(mesh *m, const char *order, char err[LOONG_ERRLEN])
{
    mesh_dim o[MESH_NDIMS];
    int n = 0;
    unsigned seen = 0;
    for (const char *p = order;;) {
        size_t len = strcspn(p, "-,");
        /* Megatron-Core's names (RankGenerator, "tp-cp-ep-dp-pp"): cp is
         * head then seq (its hierarchical CP's first, all-to-all level is
         * the inner one); ep, expert parallelism, has degree 1 here */
        bool cp = len == 2 && !strncmp(p, "cp", 2), ep = len == 2 && !strncmp(p, "ep", 2);
        unsigned cpbits = MESH_DIMS_CP;
        if (cp && (seen & cpbits)) {
            snprintf(err, LOONG_ERRLEN, "mesh order '%s' names cp (head and seq) and head or seq: name them once",
                     order);
            return -1;
        }
        if (cp || ep) {
            if (cp) o[n++] = MESH_HEAD, o[n++] = MESH_SEQ, seen |= cpbits;
            if (!p[len]) break;
            p += len + 1;
            continue;
        }
        int d = 0;
        while (d < MESH_NDIMS && !(strlen(names[d]) == len && !strncmp(p, names[d], len)))
            d++;
        if (d == MESH_NDIMS) {
            char all[64];
            snprintf(err, LOONG_ERRLEN, "mesh order '%s': '%.*s' is not a dimension (%s; Megatron's cp, ep)", order,
                     (int)len, p, all_names(all));
            return -1;
        }
        if (seen & MESH_BIT(d)) {
            snprintf(err, LOONG_ERRLEN, "mesh order '%s' names %s twice: name each dimension once", order, names[d]);
            return -1;
        }
        seen |= MESH_BIT(d);
        o[n++] = (mesh_dim)d;
        if (!p[len]) break;
        p += len + 1;
    }
    for (int d = 0; d < MESH_NDIMS; d++)
        if (!(seen & MESH_BIT(d))) {
            char all[64];
            snprintf(err, LOONG_ERRLEN, "mesh order '%s' lacks %s: name all of %s, fastest first", order, names[d],
                     all_names(all));
            return -1;
        }
    memcpy(m->order, o, sizeof o);
    return 0;
}

void mesh_order_text(const mesh *m, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < MESH_NDIMS && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "-" : "", mesh_dim_name(m->order[i]));
}

int mesh_validate(const mesh *m, char err[LOONG_ERRLEN])
{
    unsigned seen = 0;
    for (int i = 0; i < MESH_NDIMS; i++) {
        if ((unsigned)m->order[i] >= MESH_NDIMS || (seen & MESH_BIT(m->order[i]))) {
            char all[64];
            snprintf(err, LOONG_ERRLEN, "the mesh order is not a permutation of %s", all_names(all));
            return -1;
        }
        seen |= MESH_BIT(m->order[i]);
    }
    long long p = 1;
    for (int d = 0; d < MESH_NDIMS; d++) {
        if (m->degree[d] < 1) {
            snprintf(err, LOONG_ERRLEN, "mesh dimension %s has degree %d: give 1 or more (1: absent)", names[d],
                     m->degree[d]);
            return -1;
        }
        p *= m->degree[d];
        if (p > INT_MAX) {
            snprintf(err, LOONG_ERRLEN, "the mesh has more than %d ranks: give smaller degrees", INT_MAX);
            return -1;
        }
    }
    return 0;
}

int mesh_size(const mesh *m)
{
    int p = 1;
    for (int d = 0; d < MESH_NDIMS; d++)
        p *= m->degree[d];
    return p;
}

/* The stride of each dimension in the rank: 1 for the fastest. */
static void strides(const mesh *m, int stride[MESH_NDIMS])
{
    int s = 1;
    for (int i = 0; i < MESH_NDIMS; i++) {
        stride[m->order[i]] = s;
        s *= m->degree[m->order[i]];
    }
}

int mesh_stride(const mesh *m, mesh_dim d)
{
    int stride[MESH_NDIMS];
    strides(m, stride);
    return stride[d];
}

void mesh_coords(const mesh *m, int rank, int coord[MESH_NDIMS])
{
    int stride[MESH_NDIMS];
    strides(m, stride);
    for (int d = 0; d < MESH_NDIMS; d++)
        coord[d] = rank / stride[d] % m->degree[d];
}

int mesh_rank(const mesh *m, const int coord[MESH_NDIMS])
{
    int stride[MESH_NDIMS], r = 0;
    strides(m, stride);
    for (int d = 0; d < MESH_NDIMS; d++)
        r += coord[d] * stride[d];
    return r;
}

int mesh_shift(const mesh *m, int rank, mesh_dim d, int k)
{
    int c[MESH_NDIMS];
    mesh_coords(m, rank, c);
    int n = m->degree[d];
    c[d] = ((c[d] + k) % n + n) % n;
    return mesh_rank(m, c);
}

/* The mixed-radix number of coord over the dimensions in `in` (in the
 * mesh's order, the first fastest). */
static int digits_of(const mesh *m, mesh_dims in, const int coord[MESH_NDIMS])
{
    int v = 0, radix = 1;
    for (int i = 0; i < MESH_NDIMS; i++) {
        mesh_dim d = m->order[i];
        if (!(in & MESH_BIT(d))) continue;
        v += coord[d] * radix;
        radix *= m->degree[d];
    }
    return v;
}

/* The inverse: set coord's dimensions in `in` from the number v. */
static void set_digits(const mesh *m, mesh_dims in, int v, int coord[MESH_NDIMS])
{
    for (int i = 0; i < MESH_NDIMS; i++) {
        mesh_dim d = m->order[i];
        if (!(in & MESH_BIT(d))) continue;
        coord[d] = v % m->degree[d];
        v /= m->degree[d];
    }
}

int mesh_group_size(const mesh *m, mesh_dims dims)
{
    int n = 1;
    for (int d = 0; d < MESH_NDIMS; d++)
        if (dims & MESH_BIT(d)) n *= m->degree[d];
    return n;
}

int mesh_group_count(const mesh *m, mesh_dims dims) { return mesh_size(m) / mesh_group_size(m, dims); }

int mesh_group_id(const mesh *m, mesh_dims dims, int rank)
{
    int c[MESH_NDIMS];
    mesh_coords(m, rank, c);
    return digits_of(m, MESH_DIMS_ALL & ~dims, c);
}

int mesh_group_index(const mesh *m, mesh_dims dims, int rank)
{
    int c[MESH_NDIMS];
    mesh_coords(m, rank, c);
    return digits_of(m, dims, c);
}

void mesh_group_members(const mesh *m, mesh_dims dims, int id, int *out)
{
    int c[MESH_NDIMS] = {0};
    set_digits(m, MESH_DIMS_ALL & ~dims, id, c);
    int n = mesh_group_size(m, dims);
    for (int k = 0; k < n; k++) {
        set_digits(m, dims, k, c);
        out[k] = mesh_rank(m, c);
    }
}

int mesh_fold(const mesh *m, mesh_dims folded, int rank)
{
    int c[MESH_NDIMS];
    mesh_coords(m, rank, c);
    set_digits(m, folded, 0, c);
    return mesh_rank(m, c);
}

int mesh_unfold(const mesh *m, mesh_dims folded, int rep, int replica)
{
    int c[MESH_NDIMS];
    mesh_coords(m, rep, c);
    set_digits(m, folded, replica, c);
    return mesh_rank(m, c);
}

/* Degrees for dims[i..] of the product n, onto a prefix in deg. */
static int factor_from(int n, const mesh_dim *dims, int i, int ndims, int deg[MESH_NDIMS], int (*out)[MESH_NDIMS],
                       int count)
{
    if (i == ndims - 1) {
        deg[dims[i]] = n;
        if (out) memcpy(out[count], deg, sizeof out[count]);
        return count + 1;
    }
    for (int k = 1; k <= n; k++)
        if (n % k == 0) {
            deg[dims[i]] = k;
            count = factor_from(n / k, dims, i + 1, ndims, deg, out, count);
        }
    return count;
}

int mesh_factorisations(int n, const mesh_dim *dims, int ndims, int (*out)[MESH_NDIMS])
{
    int deg[MESH_NDIMS];
    for (int d = 0; d < MESH_NDIMS; d++)
        deg[d] = 1;
    if (n < 1 || ndims < 1) return 0;
    return factor_from(n, dims, 0, ndims, deg, out, 0);
}
