/* ringgeo: ring indices, windows, lanes and blocks. See ringgeo.h. */
#include "ringgeo.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

int ringgeo_lanes(const config *c) { return c->ring == RING_DUAL ? 2 : 1; }

unsigned ringgeo_parts(const config *c) { return config_parts(c) == 2 ? 3u : 1u; }

unsigned ringgeo_lane_parts(const config *c, int lane)
{
    if (ringgeo_lanes(c) == 1) return ringgeo_parts(c);
    return lane == 0 ? 1u : 2u;
}

uint64_t ringgeo_lane_tokens(const config *c, int lane)
{
    return (uint64_t)ringgeo_count(ringgeo_lane_parts(c, lane)) * config_chunk_tokens(c);
}

int ringgeo_src_at(const config *c, int s, int o, int i)
{
    int w = c->window, p = s % w;
    return mod(s - p + mod(p - i, w) - o * w, c->p_seq);
}

int ringgeo_next(const config *c, int s, bool outer)
{
    int w = c->window, p = s % w;
    return outer ? mod(s + w, c->p_seq) : s - p + (p + 1) % w;
}

int ringgeo_prev(const config *c, int s, bool outer)
{
    int w = c->window, p = s % w;
    return outer ? mod(s - w, c->p_seq) : s - p + mod(p - 1, w);
}

ringgeo_block ringgeo_block_of(const config *c, int s, int src, unsigned kv_parts)
{
    ringgeo_block bl = {0, 0, false, 0};
    int parts = config_parts(c);
    for (int a = 0; a < parts; a++) {
        int qc = config_chunk_of(c, s, a);
        for (int k = 0; k < parts; k++) {
            if (!(kv_parts >> k & 1)) continue;
            int kc = config_chunk_of(c, src, k);
            if (kc > qc) continue;
            bl.q_sel |= (uint8_t)(1 << a);
            bl.kv_sel |= (uint8_t)(1 << k);
            bl.causal |= kc == qc;
            bl.pairs2 += kc == qc ? 1 : 2;
        }
    }
    return bl;
}
