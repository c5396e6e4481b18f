/* synth.cl — random weights made on the device for synthetic benchmark models (bench
 * --synthetic). Every byte is a hash of (seed, byte position), so the fill needs no host copy
 * and any type's blocks come out valid: scales are positive normal fp16 chosen so that the
 * dequantised values have a standard deviation of about amp/sqrt(3) (amp = sqrt(3/row length):
 * a product with an RMS-1 input gives an RMS-1 output); the quants are uniform random.
 * opencl/bench/synth.c compiles the byte functions for the host too (SYN_FN static, OpenCL's types as
 * macros), so tables the engine keeps in host memory get the same bytes. A program of its own
 * (manifest.def): only synthetic models build it. */

#ifndef SYN_FN
#define SYN_FN inline
#endif

SYN_FN uint syn_mix(uint h)
{
    h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
    return h;
}

SYN_FN uint syn_hash(uint seed, ulong i) { return syn_mix(syn_mix(seed ^ (uint)(i >> 32)) ^ (uint)i); }

/* uniform in [-1, 1) */
SYN_FN float syn_unit(uint h) { return (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f; }

/* IEEE half bits of f (round toward zero; subnormals kept; clamps to the largest finite) */
SYN_FN uint syn_half(float f)
{
    uint s = (as_uint(f) >> 31) << 15;
    float a = fabs(f);
    if (a >= 65504.0f) return s | 0x7bffu;
    if (a < 6.103515625e-05f) return s | (uint)(a * 16777216.0f); /* subnormal: units of 2^-24 */
    uint x = as_uint(a);
    return s | ((((x >> 23) & 255u) - 112u) << 10) | ((x >> 13) & 0x3ffu);
}

/* byte pos of a tensor of the given ggml type */
SYN_FN uint syn_byte(ulong pos, uint type, float amp, uint seed)
{
    uint bs = type == 0 ? 4 : type == 1 || type == 30 ? 2 : type == 8 ? 34 : type == 6 ? 22 : 144;
    ulong blk = pos / bs;
    uint off = (uint)(pos - blk * bs);
    uint h = syn_hash(seed, blk);
    if (type == 0) return (as_uint(amp * syn_unit(h)) >> (8 * off)) & 255u;                       /* F32 */
    if (type == 1) return (syn_half(amp * syn_unit(h)) >> (8 * off)) & 255u;                      /* F16 */
    if (type == 30) return (as_uint(amp * syn_unit(h)) >> (16 + 8 * off)) & 255u;                 /* BF16 */
    /* block types: the scale(s) first, then random bytes (any byte is a valid quant) */
    if (type == 8 && off < 2) return (syn_half(amp / 128.0f) >> (8 * off)) & 255u;               /* Q8_0 */
    if (type == 6 && off < 2) return (syn_half(amp / 16.0f) >> (8 * off)) & 255u;                /* Q5_0 */
    if (type == 12 && off < 4) {                                                                   /* Q4_K */
        /* d*sc*q - dmin*m with sc, m in [0,63], q in [0,15]: dmin = 7.5 d centres it, std ~255 d */
        float d = amp * (1.0f / 442.0f); /* a constant reciprocal: the host makes the same bits (synth_bytes) */
        return (syn_half(off < 2 ? d : 7.5f * d) >> (8 * (off & 1))) & 255u;
    }
    return syn_hash(seed ^ 0x5bd1e995u, pos) & 255u;
}

#ifdef __OPENCL_VERSION__
/* fills bytes [4*w0, min(4*(w0+n), nbytes)) of p; one work-item per 32-bit word */
kernel void synth_fill(global uint *p, ulong w0, ulong nbytes, uint type, float amp, uint seed)
{
    ulong w = w0 + get_global_id(0);
    ulong pos = w * 4;
    if (pos >= nbytes) return;
    uint word = 0;
    for (uint j = 0; j < 4; j++) word |= syn_byte(pos + j, type, amp, seed) << (8 * j);
    if (pos + 4 <= nbytes) {
        p[w] = word;
    } else {
        global uchar *b = (global uchar *)p;
        for (uint j = 0; pos + j < nbytes; j++) b[pos + j] = (uchar)(word >> (8 * j));
    }
}
#endif
