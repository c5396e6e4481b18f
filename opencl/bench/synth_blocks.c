/* synth_blocks.c — see synth_blocks.h. Block layouts: ggml-common.h (llama.cpp). */
#include "synth_blocks.h"

#include <math.h>
#include <string.h>

#include "gguf.h"
#include "gguf_write.h"

uint64_t synth_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t synth_name_seed(const char *name, uint64_t seed)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h ^ (seed * 0x9e3779b97f4a7c15ull);
}

/* uniform in [0, 1) from the top 24 bits */
static float unit(uint64_t r) { return (float)(r >> 40) * (1.0f / 16777216.0f); }

uint16_t synth_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0)); /* inf, NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                                 /* rounds past 65504 */
    if (ax < 0x38800000u) { /* below 2^-14: a subnormal half (or zero) */
        float a;
        memcpy(&a, &ax, 4);
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f)); /* units of 2^-24, ties to even */
    }
    uint32_t m = ax - 0x38000000u; /* rebias 127 -> 15 */
    m += 0xfffu + ((m >> 13) & 1u);
    return (uint16_t)(sign | (m >> 13));
}

static uint16_t bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* Where a quantized block keeps its f16 scales and how large its codes are: `rms` is the RMS of
 * the integer factor the scale multiplies (uniform random codes), so d = target RMS / rms.
 * Q4_K also has dmin = 7.5 d, which centres d·sc·q − dmin·m on zero. */
typedef struct qfmt { uint32_t type; uint16_t d_at, dmin_at; float rms; } qfmt;
static const qfmt QFMT[] = {
    { GGML_TYPE_Q8_0, 0, 0xffff, 73.9f },   /* int8 q */
    { GGML_TYPE_Q5_0, 0, 0xffff, 9.25f },   /* q - 16, q in 0..31 */
    { GGML_TYPE_Q4_K, 0, 2, 258.3f },       /* sc·q − 7.5·m, sc and m 6-bit, q 4-bit */
    { GGML_TYPE_Q6_K, 208, 0xffff, 1366.f }, /* int8 sc · (q − 32), q 6-bit */
};
#define N_QFMT (sizeof QFMT / sizeof *QFMT)

static const qfmt *qfmt_of(uint32_t type)
{
    for (size_t i = 0; i < N_QFMT; i++)
        if (QFMT[i].type == type) return &QFMT[i];
    return NULL;
}

int synth_blocks_supported(uint32_t type)
{
    return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16 || qfmt_of(type) != NULL;
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

void synth_blocks(uint32_t type, void *dst, size_t n_blocks, float amp, float lo, float hi, uint64_t *state)
{
    uint8_t *p = dst;
    uint64_t st = *state; /* a local copy: stores through p may not alias it */
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) {
        float w = hi - lo;
        for (size_t i = 0; i < n_blocks; i += 2) { /* two values per random word */
            uint64_t r = synth_rand(&st);
            float v[2] = { lo + w * unit(r), lo + w * unit(r << 24) };
            for (size_t k = 0; k < 2 && i + k < n_blocks; k++) {
                if (type == GGML_TYPE_F32) memcpy(p + 4 * (i + k), &v[k], 4);
                else put16(p + 2 * (i + k), type == GGML_TYPE_F16 ? synth_f16(v[k]) : bf16(v[k]));
            }
        }
        *state = st;
        return;
    }
    const qfmt *q = qfmt_of(type);
    if (!q) return;
    size_t bs = ggml_type_size(type), n = n_blocks * bs, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t r = synth_rand(&st);
        memcpy(p + i, &r, 8);
    }
    if (i < n) {
        uint64_t r = synth_rand(&st);
        memcpy(p + i, &r, n - i);
    }
    /* the scale: target RMS amp/sqrt(3) (that of uniform ±amp), varied by 0.5..1.5 per block */
    float d0 = amp / sqrtf(3.0f) / q->rms;
    for (size_t b = 0; b < n_blocks; b++) {
        uint8_t *blk = p + b * bs;
        float d = d0 * (0.5f + unit(synth_rand(&st)));
        put16(blk + q->d_at, synth_f16(d));
        if (q->dmin_at != 0xffff) put16(blk + q->dmin_at, synth_f16(7.5f * d));
    }
    *state = st;
}

int synth_blocks_write(struct gguf_writer *w, uint32_t type, uint64_t nbytes, float amp, float lo, float hi,
                       uint64_t *state, uint8_t *buf, size_t cap)
{
    size_t bs = ggml_type_size(type), per = cap / bs;
    uint64_t blocks = nbytes / bs;
    for (uint64_t b = 0; b < blocks; b += per) {
        size_t k = (size_t)(blocks - b < per ? blocks - b : per);
        synth_blocks(type, buf, k, amp, lo, hi, state);
        if (gguf_w_write(w, buf, k * bs)) return -1;
    }
    return 0;
}
