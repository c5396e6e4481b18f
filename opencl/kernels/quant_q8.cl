/* quant_q8.cl — activations to int8 per 32 values for the int8 products (NVIDIA): scale d = max|x|
 * / 127 per block, as llama.cpp's q8_1, and the sums of the int8 values that the q4_k mins and the
 * q5_0 offset need. q8_quant4 (8 lanes a block) and ld_x4 (X, or gelu(X) * U for a down product)
 * serve them all: the per-group staging of gemv_q8.cl's mvq_T (mvq_quant_x) and mvqn_T
 * (mvq_quant_chain: the norm chain first), and the kernels that quantize X once beforehand, mvq_xq
 * (gemv_q8.cl's mvqg_T layout) and q8x_quant (mma_q8.cl's). */

#ifdef CLG_NVIDIA

/* four values of a 32-value block held by 8 neighbouring lanes (all must call) to int8, packed in
 * a word: the block's scale d = max|x| / 127, and in s the sum of the int8 values of this lane's
 * 16-value half (lanes 0-3 or 4-7 of the 8) */
inline uint q8_quant4(float4 v, float *d, int *s)
{
    float am = fmax(fmax(fabs(v.x), fabs(v.y)), fmax(fabs(v.z), fabs(v.w)));
    am = fmax(am, shfl_xor_f(am, 1));
    am = fmax(am, shfl_xor_f(am, 2));
    am = fmax(am, shfl_xor_f(am, 4));
    float id = am > 0.0f ? 127.0f / am : 0.0f;
    *d = am / 127.0f;
    int4 q = convert_int4_rte(v * id);
    int h = q.x + q.y + q.z + q.w;
    h += shfl_xor_i(h, 1);
    *s = h + shfl_xor_i(h, 2);
    return (uint)(q.x & 255) | ((uint)(q.y & 255) << 8) | ((uint)(q.z & 255) << 16) | ((uint)q.w << 24);
}

/* float4 i4 of row tk of X, or of act(X) * U with geglu (rows ldx and ldu apart): geglu 1 GELU-tanh,
 * 2 SiLU (Qwen's SwiGLU) */
inline float4 ld_x4(global const float *X, uint ldx, global const float *U, uint ldu, uint geglu, uint tk, uint i4)
{
    float4 v = vload4(0, X + (size_t)tk * ldx + 4 * i4);
    if (!geglu) return v;
    float4 u = vload4(0, U + (size_t)tk * ldu + 4 * i4);
    if (geglu == 2) /* per lane, as the GELU below: the scalar exp is the one every compiler maps */
        return v / (1.0f + (float4)(exp(-v.x), exp(-v.y), exp(-v.z), exp(-v.w))) * u;
    return (float4)(gelu_tanh(v.x), gelu_tanh(v.y), gelu_tanh(v.z), gelu_tanh(v.w)) * u;
}

/* X (ntok rows, ldx apart) to int8 per 32 values in local memory: xq words [ntok][k/4], scales
 * xd [ntok][k/32], and xs [ntok][k/16] = d * (sum of each 16 quantized values), which the
 * q4_k min and q5_0 offset terms need. 8 lanes per 32-value block, 4 values each. geglu: the
 * product's input is gelu(X) * U (rows ldu apart), so the activation needs no launch of its own. */
inline void mvq_quant_x(global const float *X, uint ldx, global const float *U, uint ldu, uint ntok, uint k,
                        uint geglu, local uint *xq, local float *xd, local float *xs)
{
    int lid = get_local_id(0), warp = lid / 32, lane = lid % 32, sub = lane % 8;
    int nbk = (int)(k / 32), nb = (int)ntok * nbk;
    /* one pass's loads at a time: issuing 8 passes' loads together measured slower (registers) */
    for (int base = warp * 4; base < nb; base += 32) { /* uniform per warp: shuffles below */
        int bi = base + lane / 8, live = bi < nb;
        int tk = live ? bi / nbk : 0, b = live ? bi % nbk : 0;
        float4 v = live ? ld_x4(X, ldx, U, ldu, geglu, tk, 8 * b + sub) : (float4)(0.0f);
        float d;
        int s;
        uint w = q8_quant4(v, &d, &s); /* s: lanes 0-3 and 4-7 of the block, one 16-value half each */
        if (live) {
            xq[bi * 8 + sub] = w;
            if (sub % 4 == 0) xs[bi * 2 + sub / 4] = d * (float)s;
            if (sub == 0) xd[bi] = d;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

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

/* X (ntok rows, ldx apart; geglu: gelu(X) * U) to mvqg's int8 layout, that of mvq_quant_x: xq
 * words [ntok][k/4], then in xds the scales [ntok][k/32] and the scaled half sums [ntok][k/16]. 8
 * items per 32-value block; every item runs the shuffles. */
kernel void mvq_xq(global const float *X, uint ldx, global const float *U, uint u_off, uint ldu, uint geglu,
                   uint ntok, uint k, global uint *xq, global float *xds)
{
    size_t gid = get_global_id(0), nq = k / 4;
    int live = gid < ntok * nq, sub = (int)(gid % 8);
    uint tk = live ? (uint)(gid / nq) : 0, i4 = live ? (uint)(gid % nq) : 0;
    float4 v = live ? ld_x4(X, ldx, U + u_off, ldu, geglu, tk, i4) : (float4)(0.0f);
    float d;
    int s;
    uint w = q8_quant4(v, &d, &s);
    if (!live) return;
    size_t bi = gid / 8; /* = tk * (k / 32) + i4 / 8 */
    xq[gid] = w;
    if (sub % 4 == 0) xds[(size_t)ntok * (k / 32) + bi * 2 + sub / 4] = d * (float)s;
    if (sub == 0) xds[bi] = d;
}

/* X (ntok rows, ldx apart; geglu: gelu(X) * U, U's rows at U + u_off, ldu apart) to int8: Xq [tpad][k] bytes,
 * Xs [k/32][tpad] of (d, d * sum of the block's int8 values); tokens ntok..tpad-1 are zeros.
 * 8 items per 32-value block, 4 values each; every item runs the shuffles (no early return). */
kernel void q8x_quant(global const float *X, uint ldx, global const float *U, uint u_off, uint ldu, uint geglu,
                      uint ntok, uint tpad, uint k, global uint *Xq, global float2 *Xs)
{
    size_t gid = get_global_id(0);
    uint nq = k / 4;
    int live = gid < (size_t)tpad * nq;
    uint tk = live ? (uint)(gid / nq) : 0, i4 = live ? (uint)(gid % nq) : 0;
    float4 v = live && tk < ntok ? ld_x4(X, ldx, U + u_off, ldu, geglu, tk, i4) : (float4)(0.0f);
    float d;
    int s;
    uint w = q8_quant4(v, &d, &s);
    s += shfl_xor_i(s, 4); /* both halves */
    if (!live) return;
    Xq[gid] = w;
    if (i4 % 8 == 0) Xs[(size_t)(i4 / 8) * tpad + tk] = (float2)(d, d * (float)s);
}

#endif /* CLG_NVIDIA */
