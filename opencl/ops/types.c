/* types.c — see types.h. A new type: its row here, its deq32/deq8 and list entry in
 * kernels/types.cl (and for the int8 families its loaders in kernels/types_q8.cl). */
#include "types.h"
#include "gguf.h"

#include <stddef.h>

/* the families of every type the float and f16 paths take */
#define ANY (DT_GEMV | DT_MMA_F16 | DT_TILES | DT_DEQH)

static const dev_type DEV_TYPES[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32] = { "f32", ANY },
    [GGML_TYPE_F16] = { "f16", DT_GEMV | DT_MMA_F16 | DT_TILES },
    [GGML_TYPE_BF16] = { "bf16", ANY },
    /* int8 units: a 32-value block per gemv_q8 piece, two per mma_q8 unit */
    [GGML_TYPE_Q8_0] = { "q8_0", ANY | DT_MMH | DT_GEMV_Q8 | DT_MMQ8, .k_gemv_q8 = 32, .k_mmq8 = 64 },
    [GGML_TYPE_Q4_0] = { "q4_0", ANY | DT_MMH },
    [GGML_TYPE_Q4_1] = { "q4_1", ANY | DT_MMH },
    [GGML_TYPE_Q5_0] = { "q5_0", ANY | DT_MMH | DT_GEMV_Q8 | DT_MMQ8, .k_gemv_q8 = 32, .k_mmq8 = 64 },
    [GGML_TYPE_Q5_1] = { "q5_1", ANY | DT_MMH },
    /* int8 pieces and units index whole 256-value super-blocks */
    [GGML_TYPE_Q4_K] = { "q4_k", ANY | DT_MMH | DT_GEMV_Q8 | DT_MMQ8_RING, .k_gemv_q8 = 256, .k_mmq8 = 256 },
    [GGML_TYPE_Q5_K] = { "q5_k", ANY | DT_MMH | DT_GEMV_Q8 | DT_MMQ8, .k_gemv_q8 = 256, .k_mmq8 = 256 },
    /* q6_k's scale per 16 values: two mmas per sub-block (mma_q8.cl mmq8_mac_q6_k) */
    [GGML_TYPE_Q6_K] = { "q6_k", ANY | DT_MMH | DT_GEMV_Q8 | DT_MMQ8, .k_gemv_q8 = 256, .k_mmq8 = 256 },
};

const dev_type *dev_type_of(uint32_t type)
{
    static const dev_type none = { NULL, 0, 0, 0 };
    return type < GGML_TYPE_COUNT && DEV_TYPES[type].suffix ? &DEV_TYPES[type] : &none;
}

int dev_type_has(uint32_t type, uint32_t fam)
{
    const dev_type *t = dev_type_of(type);
    return t->suffix && (t->families & fam) == fam;
}
