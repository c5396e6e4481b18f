/* attn_split.cl — attention over the paged KV cache, split over key chunks ("flash-decoding"):
 * attn_partial computes, per (chunk, q head, token), the chunk's softmax statistics and weighted
 * V sum; the group that finishes a (token, head) last merges its chunks into the output (a
 * counter per (token, head), reset by that group), so no second launch. Causal by position; a
 * window w > 0 limits keys to (pos - w, pos]. tok_hi (NULL: none) raises a token's last key above its
 * position (an image's tokens see the whole image). Softcap > 0 applies cap * tanh(s / cap) to scores. */

#define ATTN_MAX_CHUNK 256 /* keys per chunk at most (local score buffer); the host picks chunk <= this */

/* one chunk [c0, c1) of token t's keys for q head h: acc[hd] = sum_j e^(s_j - m) V_j, ml = (m, l) */
inline void attn_chunk(global const float *Q, uint t, uint nh, uint nkv, uint hd, uint h, global const kv_t *Kc,
                       global const kv_t *Vc, global const int *tok_seq, global const int *block_table,
                       uint max_blocks, uint block_size, float scale, float softcap, int c0, int c1, uint chunk,
                       global float *acc, global float *ml, local float *q, local float *s, local float *red,
                       local uint *koff)
{
    int lid = get_local_id(0), L = get_local_size(0);
    uint kh = h / (nh / nkv);
    global const float *qr = Q + ((size_t)t * nh + h) * hd;
    for (uint d = lid; d < hd; d += L) q[d] = qr[d];
    barrier(CLK_LOCAL_MEM_FENCE);
    global const int *bt = block_table + (size_t)tok_seq[t] * max_blocks;
    int n = c1 - c0;
    /* where each key of the chunk sits in the paged cache (kv_t), looked up once: the key and
     * value loops below then issue independent loads instead of table-then-row chains */
    for (int j = lid; j < n; j += L) {
        int p = c0 + j;
        koff[j] = (((uint)bt[p / block_size] * nkv + kh) * block_size + p % block_size) * KV_ROW(hd);
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
            global const kv_t *k = Kc + koff[j];
            for (uint d = 4 * p; d < hd; d += 4 * P) {
                float4 kv = kv_load4(k, d, hd);
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
            a0 += s[j] * kv_load1(Vc + koff[j], d, hd);
            a1 += s[j + 1] * kv_load1(Vc + koff[j + 1], d, hd);
            a2 += s[j + 2] * kv_load1(Vc + koff[j + 2], d, hd);
            a3 += s[j + 3] * kv_load1(Vc + koff[j + 3], d, hd);
        }
        for (; j < n; j++) a0 += s[j] * kv_load1(Vc + koff[j], d, hd);
        acc[d] = (a0 + a1) + (a2 + a3);
    }
    if (lid == 0) { ml[0] = m; ml[1] = l; }
}

/* a value another work-group wrote during this launch: from L2, not this compute unit's L1 */
inline float ld_shared(global const float *p)
{
#ifdef CLG_NVIDIA
    float r;
    asm("ld.global.cg.f32 %0, [%1];" : "=f"(r) : "l"(p));
    return r;
#else
    return *p;
#endif
}

/* o[d] = sum_c acc_c[d] e^(m_c - M) / sum_c l_c e^(m_c - M) over the nchunk partials from base:
 * chunk statistics reduced across the group, the chunks' weights staged in local memory
 * (sc, ATTN_MAX_CHUNK at a time), independent loads per output dim */
inline void attn_merge(global const float *part_acc, global const float *part_ml, size_t base, uint hd, uint nchunk,
                       global float *o, local float *sc, local float *red)
{
    int lid = get_local_id(0), L = get_local_size(0);
    global const float *pm = part_ml + 2 * base, *pa = part_acc + base * hd;
    float M = -INFINITY;
    for (uint c = lid; c < nchunk; c += L) M = fmax(M, ld_shared(pm + 2 * c));
    M = wg_max(M, red);
    float den = 0.0f;
    for (uint c = lid; c < nchunk; c += L) {
        float mc = ld_shared(pm + 2 * c);
        if (mc > -INFINITY) den += ld_shared(pm + 2 * c + 1) * exp(mc - M);
    }
    float inv = 1.0f / wg_sum(den, red);
    for (uint c0 = 0; c0 < nchunk; c0 += ATTN_MAX_CHUNK) {
        uint n = min((uint)ATTN_MAX_CHUNK, nchunk - c0);
        for (uint c = lid; c < n; c += L) {
            float mc = ld_shared(pm + 2 * (c0 + c));
            sc[c] = mc > -INFINITY ? exp(mc - M) * inv : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint d = lid; d < hd; d += L) {
            global const float *col = pa + (size_t)c0 * hd + d;
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            uint c = 0;
            for (; c + 4 <= n; c += 4) {
                a0 += sc[c] * ld_shared(col + (size_t)c * hd);
                a1 += sc[c + 1] * ld_shared(col + (size_t)(c + 1) * hd);
                a2 += sc[c + 2] * ld_shared(col + (size_t)(c + 2) * hd);
                a3 += sc[c + 3] * ld_shared(col + (size_t)(c + 3) * hd);
            }
            for (; c < n; c++) a0 += sc[c] * ld_shared(col + (size_t)c * hd);
            float a = (a0 + a1) + (a2 + a3);
            o[d] = c0 ? o[d] + a : a;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

kernel void attn_partial(global const float *Q, uint t0, uint nh, uint nkv, uint hd,
                         global const kv_t *Kc, global const kv_t *Vc,
                         global const int *tok_pos, global const int *tok_hi, global const int *tok_seq,
                         global const int *block_table, uint max_blocks, uint block_size,
                         int window, float scale, float softcap, uint nchunk, uint chunk,
                         global float *part_acc, global float *part_ml, global uint *cnt, global float *out,
                         local float *q, local float *s, local float *red, local uint *koff)
{
    local int is_last;
    uint c = get_group_id(0), h = get_group_id(1), tl = get_group_id(2), t = t0 + tl;
    int lid = get_local_id(0), L = get_local_size(0);
    int pos = tok_pos[t];
    int lo = window > 0 ? max(0, pos - window + 1) : 0;
    int c0 = lo + (int)(c * chunk);
    int hi = tok_hi ? tok_hi[t] : pos;
    int c1 = min(hi + 1, c0 + (int)chunk);
    size_t pidx = ((size_t)tl * nh + h) * nchunk + c;
    global float *acc = part_acc + pidx * hd;
    if (c0 >= c1) { /* chunk past this token's keys: contributes nothing */
        if (lid == 0) { part_ml[2 * pidx] = -INFINITY; part_ml[2 * pidx + 1] = 0.0f; }
        for (uint d = lid; d < hd; d += L) acc[d] = 0.0f;
    } else {
        attn_chunk(Q, t, nh, nkv, hd, h, Kc, Vc, tok_seq, block_table, max_blocks, block_size, scale, softcap,
                   c0, c1, chunk, acc, part_ml + 2 * pidx, q, s, red, koff);
    }
    /* count this chunk in once the group's writes are visible device-wide; the last one merges */
    barrier(CLK_GLOBAL_MEM_FENCE);
    size_t th = (size_t)tl * nh + h;
    if (lid == 0) {
        fence_device();
        is_last = atomic_inc(cnt + th) == nchunk - 1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!is_last) return;
    fence_device();
    attn_merge(part_acc, part_ml, th * nchunk, hd, nchunk, out + ((size_t)t * nh + h) * hd, s, red);
    if (lid == 0) cnt[th] = 0;
}
