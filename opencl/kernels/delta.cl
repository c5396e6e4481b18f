/* delta.cl — the gated-delta (linear attention) layers of Qwen 3.5 / 3.6, FP32 throughout: the
 * causal depthwise conv with its per-sequence state (delta_conv, delta_conv_state), the delta-rule
 * recurrence token by token (delta_step) and by chunks (delta_chunk_prep + delta_chunk_scan), and
 * the SiLU-gated per-head RMS norm of its output (rmsnorm_gated). ops/delta.c launches them and
 * docs/KERNELS.md describes the work decomposition.
 *
 * Layouts (one forward of T token rows): x / y [T][Dc] with Dc = 2·Hk·dk + Hv·dv (q heads, k heads,
 * v heads); a, b, beta, g [T][Hv]; out [T][Hv][dv]. A state slot holds the conv state [Kc−1][Dc]
 * (oldest input first) at conv_off and the delta state S [Hv][dk][dv] at ssm_off. The run table
 * holds 5 ints per run (delta_run in ops.h): first token row, length, position of the first token,
 * source slot, destination slot; runs are sorted by first row and do not overlap. Value head h
 * reads q/k head h % Hk (tiled, the GGUF's order) or h / (Hv/Hk) (grouped, transformers'). */

#define DELTA_DK_MAX 128 /* key head dim at most: delta_step keeps a column of S in private memory */
#define DELTA_C_MAX 64   /* chunk length at most: a column's triangular solve keeps its rows privately */
#define DR_T0 0
#define DR_LEN 1
#define DR_POS 2
#define DR_SRC 3
#define DR_DST 4
#define DR_INTS 5

/* A batch's run table from its tokens' sequences and positions, as the host cuts it (models/qwen35.c): a
 * run per stretch of one sequence at consecutive positions, in place in the slot of its sequence. One item:
 * a forward holds at most a few thousand tokens, and the table saves the host a blocking upload. */
kernel void delta_runs(global const int *seq, global const int *pos, uint ntok, global int *runs)
{
    if (get_global_id(0) != 0) return;
    int k = -1;
    for (uint t = 0; t < ntok; t++) {
        if (k >= 0 && seq[t] == runs[k * DR_INTS + DR_SRC] && pos[t] == runs[k * DR_INTS + DR_POS] +
                                                                       runs[k * DR_INTS + DR_LEN]) {
            runs[k * DR_INTS + DR_LEN]++;
            continue;
        }
        global int *r = runs + ++k * DR_INTS;
        r[DR_T0] = (int)t;
        r[DR_LEN] = 1;
        r[DR_POS] = pos[t];
        r[DR_SRC] = r[DR_DST] = seq[t];
    }
}

inline float silu_f(float x) { return x / (1.0f + exp(-x)); }

/* the run holding token row t (runs sorted by first row), -1 if none */
inline int delta_find_run(global const int *runs, uint nruns, uint t)
{
    int lo = 0, hi = (int)nruns - 1, r = -1;
    while (lo <= hi) {
        int m = (lo + hi) / 2;
        if ((uint)runs[m * DR_INTS + DR_T0] <= t) { r = m; lo = m + 1; } else hi = m - 1;
    }
    if (r >= 0 && t >= (uint)(runs[r * DR_INTS + DR_T0] + runs[r * DR_INTS + DR_LEN])) r = -1;
    return r;
}

inline uint delta_khead(uint h, uint hk, uint hv, uint tiled) { return tiled ? h % hk : h / (hv / hk); }

/* One group per (head of q, k or v, token row): the Kc taps of each channel over the run's earlier
 * rows of x, or before the run's start the source slot's conv state, then SiLU; q and k heads are
 * L2-normalised (q also times qscale = dk^-1/2), and item 0 of value head h writes the token's
 * beta = sigmoid(b) and g = ssm_a · softplus(a + dt_bias) (ssm_a holds −exp(A_log)). Group size: a
 * power of two (wg_sum). */
kernel void delta_conv(global const float *x, global const float *cw, uint kc, global const int *runs, uint nruns,
                       global const float *state, ulong slot_floats, uint conv_off, uint hk, uint hv, uint dk,
                       uint dv, global const float *a, global const float *b, global const float *ssm_a,
                       global const float *dt_bias, float eps, float qscale, global float *y, global float *beta,
                       global float *g, local float *red)
{
    uint head = get_group_id(0), t = get_global_id(1), lid = get_local_id(0), L = get_local_size(0);
    int r = delta_find_run(runs, nruns, t);
    if (r < 0) return; /* the whole group: one token row */
    int t0 = runs[r * DR_INTS + DR_T0], i = (int)t - t0;
    uint dc = 2 * hk * dk + hv * dv, kind = head < hk ? 0 : head < 2 * hk ? 1 : 2;
    uint c0 = kind < 2 ? head * dk : 2 * hk * dk + (head - 2 * hk) * dv, n = kind < 2 ? dk : dv;
    global const float *st = state + (ulong)runs[r * DR_INTS + DR_SRC] * slot_floats + conv_off;
    global float *yr = y + (ulong)t * dc + c0;
    float ss = 0.0f;
    for (uint c = lid; c < n; c += L) {
        float acc = 0.0f;
        for (int j = 0; j < (int)kc; j++) {
            int m = i - ((int)kc - 1) + j; /* run-relative row of tap j; < 0: from the state */
            float xv = m >= 0 ? x[(ulong)(t0 + m) * dc + c0 + c] : st[(ulong)((int)kc - 1 + m) * dc + c0 + c];
            acc += cw[(ulong)(c0 + c) * kc + j] * xv;
        }
        float v = silu_f(acc);
        yr[c] = v;
        ss += v * v;
    }
    if (kind < 2) {
        float inv = rsqrt(wg_sum(ss, red) + eps) * (kind == 0 ? qscale : 1.0f);
        for (uint c = lid; c < n; c += L) yr[c] *= inv; /* the item's own writes */
    } else if (lid == 0) {
        uint h = head - 2 * hk;
        ulong at = (ulong)t * hv + h;
        float z = a[at] + dt_bias[h];
        beta[at] = 1.0f / (1.0f + exp(-b[at]));
        g[at] = ssm_a[h] * (z > 20.0f ? z : log1p(exp(z))); /* softplus, linear past 20 as torch's */
    }
}

/* One item per (channel, run): the destination slot's conv state becomes the run's last Kc−1 raw
 * inputs, taking source-state rows where the run is shorter. Rows go oldest first, and row q reads
 * source row q + len > q, so an in-place update never reads a row it already wrote. */
kernel void delta_conv_state(global const float *x, uint kc, global const int *runs, global float *state,
                             ulong slot_floats, uint conv_off, uint dc)
{
    uint c = get_global_id(0), r = get_global_id(1);
    if (c >= dc) return;
    global const int *rr = runs + r * DR_INTS;
    int t0 = rr[DR_T0], len = rr[DR_LEN];
    global float *src = state + (ulong)rr[DR_SRC] * slot_floats + conv_off;
    global float *dst = state + (ulong)rr[DR_DST] * slot_floats + conv_off;
    for (int q = 0; q < (int)kc - 1; q++) {
        int m = len - ((int)kc - 1) + q;
        dst[(ulong)q * dc + c] = m >= 0 ? x[(ulong)(t0 + m) * dc + c] : src[(ulong)(q + len) * dc + c];
    }
}

/* One group per (column slice, run, value head), an item per column j of S: S[:, j] is loaded once
 * from the source slot, the run's tokens applied in order (S ← e^g S; u = β(v − Sᵀk); S ← S + k uᵀ;
 * o = Sᵀq), and stored once to the destination slot. Runs of length outside [min_len, max_len)
 * belong to the chunked kernels. qk: 2·dk floats (the token's q and k, shared by the columns). */
kernel void delta_step(global const float *qkv, global const float *beta, global const float *g,
                       global const int *runs, uint hk, uint hv, uint dk, uint dv, uint tiled, uint min_len,
                       uint max_len, global float *state, ulong slot_floats, uint ssm_off, global float *out,
                       local float *qk)
{
    uint lid = get_local_id(0), L = get_local_size(0), j = get_group_id(0) * L + lid;
    uint r = get_group_id(1), h = get_group_id(2);
    global const int *rr = runs + r * DR_INTS;
    uint t0 = (uint)rr[DR_T0], len = (uint)rr[DR_LEN];
    if (len < min_len || len >= max_len) return; /* the whole group */
    uint dc = 2 * hk * dk + hv * dv, kh = delta_khead(h, hk, hv, tiled), live = j < dv;
    ulong hs = (ulong)h * dk * dv;
    global const float *S0 = state + (ulong)rr[DR_SRC] * slot_floats + ssm_off + hs;
    global float *S1 = state + (ulong)rr[DR_DST] * slot_floats + ssm_off + hs;
    float s[DELTA_DK_MAX];
    if (live)
        for (uint d = 0; d < dk; d++) s[d] = S0[(ulong)d * dv + j];
    for (uint i = 0; i < len; i++) {
        ulong t = t0 + i;
        global const float *row = qkv + t * dc;
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous token's q and k are no longer read */
        for (uint d = lid; d < dk; d += L) {
            qk[d] = row[kh * dk + d];
            qk[dk + d] = row[(hk + kh) * dk + d];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (!live) continue;
        float dec = exp(g[t * hv + h]), kv = 0.0f, o = 0.0f;
        for (uint d = 0; d < dk; d++) {
            s[d] *= dec;
            kv += s[d] * qk[dk + d];
        }
        float u = (row[2 * hk * dk + h * dv + j] - kv) * beta[t * hv + h];
        for (uint d = 0; d < dk; d++) {
            s[d] += qk[dk + d] * u;
            o += s[d] * qk[d];
        }
        out[(t * hv + h) * dv + j] = o;
    }
    if (live)
        for (uint d = 0; d < dk; d++) S1[(ulong)d * dv + j] = s[d];
}

/* chunk c of a run (chunks cut at absolute positions, multiples of C): its run-relative rows
 * [*a, *a + n), n = 0 past the run's end. A run starting mid-chunk starts with a short chunk, which
 * equals the full chunk with the missing rows zero-padded (β = 0, g = 0: they change nothing). */
inline uint delta_chunk_rows(uint pos, uint len, uint C, uint c, uint *a)
{
    uint cs = (pos / C + c) * C, lo = cs > pos ? cs - pos : 0, hi = cs + C - pos;
    if (hi > len) hi = len;
    *a = lo;
    return lo < hi ? hi - lo : 0;
}

/* One group per (chunk, run, value head) of the runs of length in [min_len, max_len): the chunk's
 * cumulative log decay γ, then by forward substitution on the unit lower-triangular (I + A),
 * A_ij = β_i (k_i·k_j) e^{γ_i−γ_j} (j < i), the rows of W = (I+A)^-1 (β e^γ ⊙ K) and
 * U = (I+A)^-1 (β ⊙ V), and P_ij = (q_i·k_j) e^{γ_i−γ_j} (j ≤ i). Per token row t and head h the
 * scratch gets wu [t][h][dk + dv] (W then U) and pg [t][h][C + 1] (P's row, then γ). Local: A (C·C),
 * γ and β (C each). */
kernel void delta_chunk_prep(global const float *qkv, global const float *beta, global const float *g,
                             global const int *runs, uint hk, uint hv, uint dk, uint dv, uint tiled, uint C,
                             uint min_len, uint max_len, global float *wu, global float *pg, local float *A,
                             local float *gam, local float *bet)
{
    uint lid = get_local_id(0), L = get_local_size(0), c = get_group_id(0), r = get_group_id(1), h = get_group_id(2);
    global const int *rr = runs + r * DR_INTS;
    uint t0 = (uint)rr[DR_T0], len = (uint)rr[DR_LEN], a;
    if (len < min_len || len >= max_len) return;
    uint n = delta_chunk_rows((uint)rr[DR_POS], len, C, c, &a);
    if (n == 0) return;
    uint dc = 2 * hk * dk + hv * dv, kh = delta_khead(h, hk, hv, tiled), wl = dk + dv;
    ulong tb = t0 + a; /* the chunk's first token row */
    if (lid == 0) {
        float acc = 0.0f;
        for (uint i = 0; i < n; i++) {
            acc += g[(tb + i) * hv + h];
            gam[i] = acc;
            bet[i] = beta[(tb + i) * hv + h];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint p = lid; p < n * n; p += L) {
        uint i = p / n, j = p % n;
        if (j > i) continue;
        global const float *qi = qkv + (tb + i) * dc + kh * dk, *ki = qi + hk * dk;
        global const float *kj = qkv + (tb + j) * dc + (hk + kh) * dk;
        float kk = 0.0f, qq = 0.0f;
        for (uint d = 0; d < dk; d++) {
            kk += ki[d] * kj[d];
            qq += qi[d] * kj[d];
        }
        float e = exp(gam[i] - gam[j]); /* <= 1: γ falls along the chunk */
        if (j < i) A[i * C + j] = bet[i] * e * kk;
        pg[((tb + i) * hv + h) * (C + 1) + j] = qq * e;
    }
    for (uint i = lid; i < n; i += L) pg[((tb + i) * hv + h) * (C + 1) + C] = gam[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    /* a column of W (cc < dk) or U per item: rows in order, each minus A times the rows before it */
    for (uint cc = lid; cc < wl; cc += L) {
        float xr[DELTA_C_MAX];
        for (uint i = 0; i < n; i++) {
            global const float *row = qkv + (tb + i) * dc;
            float v = cc < dk ? bet[i] * exp(gam[i]) * row[(hk + kh) * dk + cc] : bet[i] * row[2 * hk * dk + h * dv + cc - dk];
            for (uint j = 0; j < i; j++) v -= A[i * C + j] * xr[j];
            xr[i] = v;
            wu[((tb + i) * hv + h) * wl + cc] = v;
        }
    }
}

/* One group per (column slice of cs columns, run, value head) of the runs delta_chunk_prep took:
 * the slice of S stays in local memory across the run's chunks; per chunk of rows i (γ_i, last γ_l)
 *   Δ = U − W S;   O = (e^γ ⊙ Q) S + P Δ;   S ← e^{γ_l} S + (e^{γ_l−γ} ⊙ K)ᵀ Δ,
 * each a product parallel over (row, column) or (dk row, column). The columns of S are independent
 * in all three, so slices need no communication. Local: S (dk·cs), Δ (C·cs), e^γ and e^{γ_l−γ}
 * (C each). */
kernel void delta_chunk_scan(global const float *qkv, global const float *wu, global const float *pg,
                             global const int *runs, uint hk, uint hv, uint dk, uint dv, uint tiled, uint C,
                             uint cs, uint min_len, uint max_len, global float *state, ulong slot_floats,
                             uint ssm_off, global float *out, local float *S, local float *D, local float *eg,
                             local float *el)
{
    uint lid = get_local_id(0), L = get_local_size(0), r = get_group_id(1), h = get_group_id(2);
    global const int *rr = runs + r * DR_INTS;
    uint t0 = (uint)rr[DR_T0], len = (uint)rr[DR_LEN], pos = (uint)rr[DR_POS];
    if (len < min_len || len >= max_len) return;
    uint j0 = get_group_id(0) * cs, nc = dv - j0 < cs ? dv - j0 : cs;
    uint dc = 2 * hk * dk + hv * dv, kh = delta_khead(h, hk, hv, tiled), wl = dk + dv;
    ulong hs = (ulong)h * dk * dv;
    global const float *S0 = state + (ulong)rr[DR_SRC] * slot_floats + ssm_off + hs;
    global float *S1 = state + (ulong)rr[DR_DST] * slot_floats + ssm_off + hs;
    for (uint p = lid; p < dk * nc; p += L) S[(p / nc) * cs + p % nc] = S0[(ulong)(p / nc) * dv + j0 + p % nc];
    uint nch = (pos + len - 1) / C - pos / C + 1;
    for (uint c = 0; c < nch; c++) {
        uint a, n = delta_chunk_rows(pos, len, C, c, &a);
        ulong tb = t0 + a;
        barrier(CLK_LOCAL_MEM_FENCE); /* S loaded or updated; the last chunk's e^γ no longer read */
        for (uint i = lid; i < n; i += L) {
            float gi = pg[((tb + i) * hv + h) * (C + 1) + C], gl = pg[((tb + n - 1) * hv + h) * (C + 1) + C];
            eg[i] = exp(gi);
            el[i] = exp(gl - gi);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint p = lid; p < n * nc; p += L) { /* Δ and the inter-chunk part of O */
            uint i = p / nc, jj = p % nc;
            global const float *w = wu + ((tb + i) * hv + h) * wl, *q = qkv + (tb + i) * dc + kh * dk;
            float ws = 0.0f, qs = 0.0f;
            for (uint d = 0; d < dk; d++) {
                float sv = S[d * cs + jj];
                ws += w[d] * sv;
                qs += q[d] * sv;
            }
            D[i * cs + jj] = w[dk + j0 + jj] - ws;
            out[((tb + i) * hv + h) * dv + j0 + jj] = eg[i] * qs;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint p = lid; p < n * nc; p += L) { /* + P Δ: the same (row, column) as above, so the item's own write */
            uint i = p / nc, jj = p % nc;
            global const float *pr = pg + ((tb + i) * hv + h) * (C + 1);
            float acc = 0.0f;
            for (uint m = 0; m <= i; m++) acc += pr[m] * D[m * cs + jj];
            out[((tb + i) * hv + h) * dv + j0 + jj] += acc;
        }
        float dl = eg[n - 1];
        for (uint p = lid; p < dk * nc; p += L) { /* S's update reads Δ, never S of another item */
            uint d = p / nc, jj = p % nc;
            float acc = dl * S[d * cs + jj];
            for (uint i = 0; i < n; i++) acc += el[i] * qkv[(tb + i) * dc + (hk + kh) * dk + d] * D[i * cs + jj];
            S[d * cs + jj] = acc;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint p = lid; p < dk * nc; p += L) S1[(ulong)(p / nc) * dv + j0 + p % nc] = S[(p / nc) * cs + p % nc];
}

/* One group per row of n values (a token's value head): y = x · rsqrt(mean(x²) + eps) · w · silu(z),
 * the weight used as is (transformers' Qwen3_5RMSNormGated); y may be x. Group size: a power of two. */
kernel void rmsnorm_gated(global const float *x, global const float *z, global const float *w, global float *y,
                          uint n, float eps, local float *red)
{
    uint lid = get_local_id(0), L = get_local_size(0);
    ulong off = (ulong)get_group_id(0) * n;
    float ss = 0.0f;
    for (uint i = lid; i < n; i += L) ss += x[off + i] * x[off + i];
    float inv = rsqrt(wg_sum(ss, red) / (float)n + eps);
    for (uint i = lid; i < n; i += L) y[off + i] = x[off + i] * inv * w[i] * silu_f(z[off + i]);
}
