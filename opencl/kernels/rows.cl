/* rows.cl — elementwise ops over rows: activations (geglu, the per-layer-embedding gate), gathers,
 * residual adds, scales and logit softcapping. */

/* out[i] = gelu_tanh(g[i]) * u[i] */
kernel void geglu(global const float *g, global const float *u, global float *out, uint n)
{
    size_t i = get_global_id(0);
    if (i < n) out[i] = gelu_tanh(g[i]) * u[i];
}

/* out[i] = silu(g[i]) * u[i] (Qwen's SwiGLU) */
kernel void swiglu(global const float *g, global const float *u, global float *out, uint n)
{
    size_t i = get_global_id(0);
    if (i < n) out[i] = g[i] / (1.0f + exp(-g[i])) * u[i];
}

/* x[i] *= sigmoid(g[i]) (Qwen's attention output gate) */
kernel void mul_sigmoid(global float *x, global const float *g, uint n)
{
    size_t i = get_global_id(0);
    if (i < n) x[i] *= 1.0f / (1.0f + exp(-g[i]));
}

/* x[r][i] += sigmoid(s[r]) * y[r][i] (Qwen's gated shared expert) */
kernel void add_gated(global float *x, global const float *y, global const float *s, uint n)
{
    size_t i = get_global_id(0), r = get_global_id(1);
    if (i < n) x[r * n + i] += 1.0f / (1.0f + exp(-s[r])) * y[r * n + i];
}

/* dst[r][:] = src[idx[r]][:] */
kernel void gather_rows(global const float *src, global const int *idx, global float *dst, uint n)
{
    size_t i = get_global_id(0), r = get_global_id(1);
    if (i < n) dst[r * n + i] = src[(size_t)idx[r] * n + i];
}

kernel void add_rows(global float *x, global const float *y, uint n)
{
    size_t i = get_global_id(0);
    if (i < n) x[i] += y[i];
}

kernel void scale_rows(global float *x, float s, uint n)
{
    size_t i = get_global_id(0);
    if (i < n) x[i] *= s;
}

kernel void softcap(global float *x, float cap, uint n)
{
    size_t i = get_global_id(0);
    if (i < n) x[i] = cap * tanh(x[i] / cap);
}

/* g[t][i] = gelu(g[t][i]) * ple[t][il*p + i]; ple rows hold n_layer*p values */
kernel void g4_ple_gate(global float *g, global const float *ple, uint p, uint row, uint il, uint ntok)
{
    uint i = get_global_id(0), t = get_global_id(1);
    if (i >= p || t >= ntok) return;
    size_t gi = (size_t)t * p + i;
    g[gi] = gelu_tanh(g[gi]) * ple[(size_t)t * row + (size_t)il * p + i];
}
