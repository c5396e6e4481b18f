/* 45_flash.cl — prefill attention on NVIDIA tensor cores ("flash attention"): one work-group takes
 * a tile of consecutive tokens of one sequence and every query head of one KV head, walks the
 * keys one KV block (32 keys) at a time, and keeps the softmax online, so scores never leave
 * registers and each K/V block is read once per tile instead of once per (token, head).
 *
 * Rows: the tile's 64 query rows are (token, head-of-group) pairs, token-major, 16 per warp. With
 * G = nh / nkv heads per KV head a tile holds 64 / G tokens. Per warp and block:
 *   S = Q K^T    mma m16n8k16 with A = Q (f32 from global, rounded to f16), B = K straight from
 *                the cache (the B fragment is 2 consecutive halves of one key row);
 *   softmax      row max/sum across the 4 lanes holding a row (shuffles), exp2 domain;
 *   O += P V     A = P from the S accumulators (the C layout of two 8-key tiles is the A layout
 *                of one 16-key step), B = V^T staged through local memory (vt).
 * A group covers FLASH_DV output dims (grid dim 2 splits larger heads): the O accumulators stay
 * in registers. Keys outside the tile's span are zeroed in vt, since unwritten cache slots may
 * hold NaN and 0 x NaN is NaN. */

#ifdef CLG_NVIDIA

#define FLASH_ROWS 64  /* query rows per group: 4 warps x 16 */
#define FLASH_DV 128   /* output dims per group (OPS_FLASH_DV) */
#define FLASH_VT 20    /* words per vt row: 16 key pairs + 4 pad (conflict-free fragment reads) */

kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void attn_flash(global const float *Q, uint t0, uint ntok, uint nh, uint nkv, uint hd,
                global const half *Kc, global const half *Vc, global const int *tok_pos,
                global const int *tok_seq, global const int *block_table, uint max_blocks, int window,
                float scale, float softcap, global float *out, local uint *vt)
{
    int lid = get_local_id(0), warp = lid / 32, lane = lid % 32, g = lane / 4, t = lane % 4;
    uint G = nh / nkv, tq = FLASH_ROWS / G;
    uint kh = get_group_id(1), dv0 = get_group_id(2) * FLASH_DV;
    uint ta = get_group_id(0) * tq, tb = min(ntok, ta + tq); /* tokens [ta, tb) of the run */
    uint dv = min((uint)FLASH_DV, hd - dv0);

    /* this lane's two rows (g and g + 8 of its warp) */
    uint r0 = warp * 16 + g, r1 = r0 + 8;
    uint tk0 = ta + r0 / G, tk1 = ta + r1 / G;
    uint h0 = kh * G + r0 % G, h1 = kh * G + r1 % G;
    int ok0 = tk0 < tb, ok1 = tk1 < tb;
    int p0 = ok0 ? tok_pos[t0 + tk0] : -1, p1 = ok1 ? tok_pos[t0 + tk1] : -1;
    int lo0 = window > 0 ? max(0, p0 - window + 1) : 0, lo1 = window > 0 ? max(0, p1 - window + 1) : 0;
    global const float *q0 = Q + ((size_t)(t0 + (ok0 ? tk0 : ta)) * nh + h0) * hd + 2 * t;
    global const float *q1 = Q + ((size_t)(t0 + (ok1 ? tk1 : ta)) * nh + h1) * hd + 2 * t;

    /* keys of the tile: positions run consecutively within one sequence's run */
    int pa = tok_pos[t0 + ta], pb = tok_pos[t0 + tb - 1];
    int kmin = window > 0 ? max(0, pa - window + 1) : 0, kmax = pb;
    global const int *bt = block_table + (size_t)tok_seq[t0 + ta] * max_blocks;

    float4 o[FLASH_DV / 8];
    for (int n = 0; n < FLASH_DV / 8; n++) o[n] = (float4)(0.0f);
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    const float sl2 = scale * M_LOG2E_F, cap = softcap > 0.0f ? softcap : 1.0f;

    for (int kb = kmin / 32 * 32; kb <= kmax; kb += 32) {
        size_t blk = ((size_t)bt[kb / 32] * nkv + kh) * 32 * hd;
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous block's vt reads are done */
        global const ushort *vs = (global const ushort *)(Vc + blk + dv0);
        for (int i = lid; i < 16 * (int)dv; i += 128) {
            int d = i % dv, pr = i / dv, ka = kb + 2 * pr;
            uint a = ka >= kmin && ka <= kmax ? vs[(size_t)(2 * pr) * hd + d] : 0;
            uint b = ka + 1 >= kmin && ka + 1 <= kmax ? vs[(size_t)(2 * pr + 1) * hd + d] : 0;
            vt[d * FLASH_VT + pr] = a | (b << 16);
        }

        /* S: 16 rows x 32 keys of this warp, key 8j + g in B fragments, columns 8j + 2t(+1) in C */
        float4 s[4];
        for (int j = 0; j < 4; j++) s[j] = (float4)(0.0f);
        global const uint *ku = (global const uint *)(Kc + blk) + t;
        uint kstride = hd / 2; /* words per key row */
        for (uint d = 0; d < hd; d += 16) {
            float2 x00 = vload2(0, q0 + d), x01 = vload2(0, q0 + d + 8);
            float2 x10 = vload2(0, q1 + d), x11 = vload2(0, q1 + d + 8);
            uint a0 = pack_h2(x00.x, x00.y), a1 = pack_h2(x10.x, x10.y);
            uint a2 = pack_h2(x01.x, x01.y), a3 = pack_h2(x11.x, x11.y);
            for (int j = 0; j < 4; j++) {
                global const uint *kr = ku + (size_t)(8 * j + g) * kstride + d / 2;
                s[j] = mma_16816(s[j], a0, a1, a2, a3, kr[0], kr[4]);
            }
        }

        /* scale, cap, mask; new row maxima (log2 domain) */
        float mx0 = m0, mx1 = m1;
        for (int j = 0; j < 4; j++) {
            int key = kb + 8 * j + 2 * t;
            float v[4] = { s[j].x, s[j].y, s[j].z, s[j].w };
            for (int e = 0; e < 4; e++) {
                float x = softcap > 0.0f ? cap * tanh(v[e] * scale / cap) * M_LOG2E_F : v[e] * sl2;
                int kp = key + (e & 1), lo = e < 2 ? lo0 : lo1, hi = e < 2 ? p0 : p1;
                v[e] = kp >= lo && kp <= hi ? x : -INFINITY;
            }
            s[j] = (float4)(v[0], v[1], v[2], v[3]);
            mx0 = fmax(mx0, fmax(v[0], v[1]));
            mx1 = fmax(mx1, fmax(v[2], v[3]));
        }
        mx0 = fmax(mx0, shfl_xor_f(mx0, 1));
        mx0 = fmax(mx0, shfl_xor_f(mx0, 2));
        mx1 = fmax(mx1, shfl_xor_f(mx1, 1));
        mx1 = fmax(mx1, shfl_xor_f(mx1, 2));
        /* a row with no key yet keeps max -inf: its p are 0 and nothing rescales */
        float b0 = mx0 == -INFINITY ? 0.0f : mx0, b1 = mx1 == -INFINITY ? 0.0f : mx1;
        float c0 = native_exp2(m0 - b0), c1 = native_exp2(m1 - b1);
        m0 = mx0;
        m1 = mx1;
        for (int j = 0; j < 4; j++) {
            s[j] = (float4)(native_exp2(s[j].x - b0), native_exp2(s[j].y - b0), native_exp2(s[j].z - b1),
                            native_exp2(s[j].w - b1));
            l0 = l0 * (j ? 1.0f : c0) + s[j].x + s[j].y;
            l1 = l1 * (j ? 1.0f : c1) + s[j].z + s[j].w;
        }
        for (int n = 0; n < FLASH_DV / 8; n++) o[n] *= (float4)(c0, c0, c1, c1);

        barrier(CLK_LOCAL_MEM_FENCE); /* vt complete */
        for (int kk = 0; kk < 2; kk++) {
            uint a0 = pack_h2(s[2 * kk].x, s[2 * kk].y), a1 = pack_h2(s[2 * kk].z, s[2 * kk].w);
            uint a2 = pack_h2(s[2 * kk + 1].x, s[2 * kk + 1].y), a3 = pack_h2(s[2 * kk + 1].z, s[2 * kk + 1].w);
            local const uint *vr = vt + g * FLASH_VT + kk * 8 + t;
            for (int n = 0; n < FLASH_DV / 8; n++)
                if (8 * n < (int)dv)
                    o[n] = mma_16816(o[n], a0, a1, a2, a3, vr[8 * n * FLASH_VT], vr[8 * n * FLASH_VT + 4]);
        }
    }

    l0 += shfl_xor_f(l0, 1);
    l0 += shfl_xor_f(l0, 2);
    l1 += shfl_xor_f(l1, 1);
    l1 += shfl_xor_f(l1, 2);
    global float *y0 = out + ((size_t)(t0 + tk0) * nh + h0) * hd + dv0 + 2 * t;
    global float *y1 = out + ((size_t)(t0 + tk1) * nh + h1) * hd + dv0 + 2 * t;
    for (int n = 0; n < FLASH_DV / 8; n++) {
        if (8 * n >= (int)dv) break;
        if (ok0) vstore2((float2)(o[n].x, o[n].y) / l0, 0, y0 + 8 * n);
        if (ok1) vstore2((float2)(o[n].z, o[n].w) / l1, 0, y1 + 8 * n);
    }
}

#endif
