/* 31_mvqn.cl — a decode product that runs the RMSNorm chain before it itself (NVIDIA): mvq_T
 * (27_mvq.cl) whose X staging computes r = (res + norm(x)·wx)·scale and y = norm(r)·w0 (or y = r
 * with raw) for its up to 4 token rows instead of loading y, so the chain needs no launch of its own. Every group
 * recomputes the two sums (rows of a few thousand values, from L2); group 0 writes r to res_out,
 * which must not be res (the other groups are still reading it). For host-bound decode steps:
 * one launch fewer per fused chain. */

#ifdef CLG_NVIDIA

/* the chain's output y as mvq_quant_x leaves X: int8 words xq [ntok][k/4], scales xd, half sums xs */
inline void mvq_quant_chain(global const float *x, global const float *wx, global const float *res,
                            global float *res_out, float scale, global const float *w0, uint raw, float eps,
                            uint ntok, uint k, local uint *xq, local float *xd, local float *xs, local float2 *red)
{
    int lid = get_local_id(0), L = get_local_size(0), warp = lid / 32, lane = lid % 32, sub = lane % 8;
    uint k4 = k / 4;
    int nbk = (int)(k / 32), writer = get_group_id(0) == 0;
    global const float4 *wx4 = (global const float4 *)wx, *w04 = (global const float4 *)w0;
    for (uint t = 0; t < ntok; t++) {
        global const float4 *xr = (global const float4 *)x + (size_t)t * k4;
        global const float4 *rr = (global const float4 *)res + (size_t)t * k4;
        global float4 *ro = (global float4 *)res_out + (size_t)t * k4;
        float2 s = (float2)(0.0f);
        for (uint i = lid; i < k4; i += L) s.x += dot(xr[i], xr[i]);
        s = wg_sum2(s, red);
        float ix = rsqrt(s.x / (float)k + eps);
        float2 s2 = (float2)(0.0f);
        for (uint i = lid; i < k4; i += L) {
            float4 r = (rr[i] + xr[i] * ix * wx4[i]) * scale;
            s2.x += dot(r, r);
            if (writer) ro[i] = r;
        }
        float ir = 1.0f;
        if (!raw) { /* raw: y = r itself (the PLE input of Gemma 4 E-models) */
            s2 = wg_sum2(s2, red);
            ir = rsqrt(s2.x / (float)k + eps);
        }
        /* 8 lanes per 32-value block, 4 blocks per warp pass (uniform per warp: shuffles) */
        for (int base = warp * 4; base < nbk; base += 4 * (L / 32)) {
            int b = base + lane / 8, live = b < nbk;
            float4 v = (float4)(0.0f);
            if (live) {
                uint i = 8 * b + sub;
                float4 r = (rr[i] + xr[i] * ix * wx4[i]) * scale;
                v = raw ? r : r * ir * w04[i];
            }
            float d;
            int sm;
            uint w = q8_quant4(v, &d, &sm);
            if (live) {
                int bi = (int)t * nbk + b;
                xq[bi * 8 + sub] = w;
                if (sub % 4 == 0) xs[bi * 2 + sub / 4] = d * (float)sm;
                if (sub == 0) xd[bi] = d;
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

#define DEFINE_MVQN(T)                                                                            \
kernel __attribute__((reqd_work_group_size(256, 1, 1)))                                          \
void mvqn_##T(MVQ_MATS, uint k, uint ntok, uint rpg, global const float *x, global const float *wx,  \
              global const float *res, global float *res_out, float scale, global const float *w0, uint raw, \
              float eps, local uint *xq, local float *xd, local float *xs, local float2 *red)      \
{                                                                                                 \
    mvq_quant_chain(x, wx, res, res_out, scale, w0, raw, eps, ntok, k, xq, xd, xs, red);          \
    MVQ_ROWS(T, 2, _l, 4, 0)                                                                      \
}

DEFINE_MVQN(q4_k)
DEFINE_MVQN(q8_0)
DEFINE_MVQN(q5_0)

#endif /* CLG_NVIDIA */
