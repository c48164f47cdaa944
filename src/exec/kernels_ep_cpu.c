/*
 * kernels_ep_cpu: a mixture of experts' CPU kernels beside its GEMMs (see
 * kernels.h): the row moves of the permute and unpermute, and the router's
 * gates. fp32 storage and accumulation; reentrant, no scratch.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

void moe_move_rows(float *dst, const int32_t *dst_idx, const float *src, const int32_t *src_idx, const float *scale,
                   size_t rows, size_t width, int add)
{
    for (size_t r = 0; r < rows; r++) {
        float *d = dst + (size_t)(dst_idx ? dst_idx[r] : (int32_t)r) * width;
        const float *s = src + (size_t)(src_idx ? src_idx[r] : (int32_t)r) * width;
        float a = scale ? scale[r] : 1.0f;
        if (add)
            for (size_t j = 0; j < width; j++)
                d[j] += a * s[j];
        else
            for (size_t j = 0; j < width; j++)
                d[j] = a * s[j];
    }
}

void moe_route_fwd(float *gates, const float *logits, const int32_t *sel, size_t n, int experts, int k)
{
    for (size_t i = 0; i < n; i++) {
        const float *z = logits + i * (size_t)experts;
        const int32_t *e = sel + i * (size_t)k;
        float *g = gates + i * (size_t)k, most = -INFINITY, sum = 0.0f;
        for (int j = 0; j < k; j++)
            most = fmaxf(most, z[e[j]]);
        for (int j = 0; j < k; j++)
            sum += g[j] = expf(z[e[j]] - most);
        for (int j = 0; j < k; j++)
            g[j] /= sum;
    }
}

void moe_route_bwd(float *dlogits, const float *gates, const float *dgates, const int32_t *dg_idx, const int32_t *sel,
                   size_t n, int experts, int k)
{
    for (size_t i = 0; i < n; i++) {
        const float *g = gates + i * (size_t)k;
        float *dz = dlogits + i * (size_t)experts, dot = 0.0f;
        memset(dz, 0, (size_t)experts * sizeof *dz);
        for (int j = 0; j < k; j++)
            dot += g[j] * dgates[dg_idx ? dg_idx[i * (size_t)k + (size_t)j] : (int32_t)(i * (size_t)k) + j];
        for (int j = 0; j < k; j++) {
            size_t at = i * (size_t)k + (size_t)j;
            dz[sel[at]] = g[j] * (dgates[dg_idx ? dg_idx[at] : (int32_t)at] - dot);
        }
    }
}
