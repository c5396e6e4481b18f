/* 40_attention.cl — attention over the paged KV cache, split over key chunks ("flash-decoding"):
 * attn_partial computes, per (chunk, q head, token), the chunk's softmax statistics and weighted
 * V sum; attn_combine merges the chunks. Causal by position; a window w > 0 limits keys to
 * (pos - w, pos]. Softcap > 0 applies cap * tanh(s / cap) to scores. */

#define ATTN_MAX_CHUNK 256 /* keys per chunk at most (local score buffer); the host picks chunk <= this */

kernel void attn_partial(global const float *Q, uint t0, uint nh, uint nkv, uint hd,
                         global const half *Kc, global const half *Vc,
                         global const int *tok_pos, global const int *tok_seq,
                         global const int *block_table, uint max_blocks, uint block_size,
                         int window, float scale, float softcap, uint nchunk, uint chunk,
                         global float *part_acc, global float *part_ml,
                         local float *q, local float *s, local float *red, local uint *koff)
{
    uint c = get_group_id(0), h = get_group_id(1), tl = get_group_id(2), t = t0 + tl;
    int lid = get_local_id(0), L = get_local_size(0);
    int pos = tok_pos[t];
    int lo = window > 0 ? max(0, pos - window + 1) : 0;
    int c0 = lo + (int)(c * chunk);
    int c1 = min(pos + 1, c0 + (int)chunk);
    size_t pidx = ((size_t)tl * nh + h) * nchunk + c;
    global float *acc = part_acc + pidx * hd;
    if (c0 >= c1) { /* chunk past this token's keys: contributes nothing */
        if (lid == 0) { part_ml[2 * pidx] = -INFINITY; part_ml[2 * pidx + 1] = 0.0f; }
        for (uint d = lid; d < hd; d += L) acc[d] = 0.0f;
        return;
    }
    uint kh = h / (nh / nkv);
    global const float *qr = Q + ((size_t)t * nh + h) * hd;
    for (uint d = lid; d < hd; d += L) q[d] = qr[d];
    barrier(CLK_LOCAL_MEM_FENCE);
    global const int *bt = block_table + (size_t)tok_seq[t] * max_blocks;
    int n = c1 - c0;
    /* where each key of the chunk sits in the paged cache (halves), looked up once: the key and
     * value loops below then issue independent loads instead of table-then-row chains */
    for (int j = lid; j < n; j += L) {
        int p = c0 + j;
        koff[j] = (((uint)bt[p / block_size] * nkv + kh) * block_size + p % block_size) * hd;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* scores: P adjacent items share one key, each summing every P-th group of 4 dims, so a
     * key row is read by consecutive items (coalesced) and small chunks still use the group */
    int P = (int)chunk < L ? L / (int)chunk : 1;
    if (P < 8 && L >= 64 && hd >= 128) P = 8; /* 8 items x 8 bytes: one 64-byte K segment per read */
    int kpi = L / P;
    for (int j0 = 0; j0 < n; j0 += kpi) {
        int j = j0 + lid / P, p = lid % P;
        float part = 0.0f;
        if (j < n) {
            global const half *k = Kc + koff[j];
            for (uint d = 4 * p; d < hd; d += 4 * P) {
                float4 kv = vload_half4(0, k + d);
                part += q[d] * kv.x + q[d + 1] * kv.y + q[d + 2] * kv.z + q[d + 3] * kv.w;
            }
        }
        red[lid] = part;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (p == 0 && j < n) {
            float dot = 0.0f;
            for (int i = 0; i < P; i++) dot += red[lid + i];
            dot *= scale;
            if (softcap > 0.0f) dot = softcap * tanh(dot / softcap);
            s[j] = dot;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float m = -INFINITY;
    for (int j = lid; j < n; j += L) m = fmax(m, s[j]);
    m = wg_max(m, red);
    float l = 0.0f;
    for (int j = lid; j < n; j += L) {
        float e = exp(s[j] - m);
        s[j] = e;
        l += e;
    }
    l = wg_sum(l, red); /* also a barrier: s[] is complete */
    for (uint d = lid; d < hd; d += L) {
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        int j = 0;
        for (; j + 4 <= n; j += 4) { /* four loads in flight per item */
            a0 += s[j] * vload_half(d, Vc + koff[j]);
            a1 += s[j + 1] * vload_half(d, Vc + koff[j + 1]);
            a2 += s[j + 2] * vload_half(d, Vc + koff[j + 2]);
            a3 += s[j + 3] * vload_half(d, Vc + koff[j + 3]);
        }
        for (; j < n; j++) a0 += s[j] * vload_half(d, Vc + koff[j]);
        acc[d] = (a0 + a1) + (a2 + a3);
    }
    if (lid == 0) { part_ml[2 * pidx] = m; part_ml[2 * pidx + 1] = l; }
}

/* out[t][h*hd + d] = sum_c acc_c[d] e^(m_c - M) / sum_c l_c e^(m_c - M) */
kernel void attn_combine(global const float *part_acc, global const float *part_ml, uint t0, uint nh, uint hd,
                         uint nchunk, global float *out)
{
    uint h = get_group_id(0), tl = get_group_id(1), t = t0 + tl;
    int lid = get_local_id(0), L = get_local_size(0);
    size_t base = ((size_t)tl * nh + h) * nchunk;
    float M = -INFINITY;
    for (uint c = 0; c < nchunk; c++) M = fmax(M, part_ml[2 * (base + c)]);
    float den = 0.0f;
    for (uint c = 0; c < nchunk; c++) {
        float mc = part_ml[2 * (base + c)];
        if (mc > -INFINITY) den += part_ml[2 * (base + c) + 1] * exp(mc - M);
    }
    global float *o = out + ((size_t)t * nh + h) * hd;
    for (uint d = lid; d < hd; d += L) {
        float a = 0.0f;
        for (uint c = 0; c < nchunk; c++) {
            float mc = part_ml[2 * (base + c)];
            if (mc > -INFINITY) a += part_acc[(base + c) * hd + d] * exp(mc - M);
        }
        o[d] = a / den;
    }
}
