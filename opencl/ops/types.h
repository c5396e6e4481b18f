/* types.h — what the device kernels take of each GGML tensor type: one row per type in types.c,
 * indexed by the type's number (the kernels' side is kernels/types.cl's CLG_TYPES lists). Block
 * sizes and bytes are gguf.h's (ggml_blck_size, ggml_type_size). */
#ifndef CLGEMMA_OPS_TYPES_H
#define CLGEMMA_OPS_TYPES_H

#include <stdint.h>

/* kernel families built per type (the kernels' names: FAMILY_<suffix>) */
enum dev_family {
    DT_GEMV = 1 << 0,      /* mv4, mv16 (gemv.cl), deq, emb (dequant.cl): every device */
    DT_MMA_F16 = 1 << 1,   /* mmqs, mmql, mmqe_s, mmqe_l (mma_f16.cl): NVIDIA */
    DT_TILES = 1 << 2,     /* mmt, mmte (tiles_f16.cl): NVIDIA */
    DT_DEQH = 1 << 3,      /* deqh (tiles_f16.cl), rows to f16 for mmta: all but f16, read as it is */
    DT_GEMV_Q8 = 1 << 4,   /* mvq, mvqg, mvqn (gemv_q8.cl), mvqe (moe.cl): int8 decode, NVIDIA */
    DT_MMQ8 = 1 << 5,      /* mmq8_<suffix>_{1,2,4,8} (mma_q8.cl): int8 tensor cores at 5-256 tokens */
    DT_MMQ8_RING = 1 << 6, /* the same as kernels of the type's own, mmq8s_<suffix>_1 and mmq8p_<suffix>_{1,2,4,8} */
    DT_MMH = 1 << 7,       /* mmh_<suffix>_{2,4,8} (mma_h.cl): f16 tensor cores, X shared, NVIDIA (quantized types) */
};

typedef struct dev_type {
    const char *suffix;  /* kernel-name suffix; NULL: the kernels do not take the type */
    uint32_t families;   /* DT_* */
    uint32_t k_gemv_q8;  /* DT_GEMV_Q8 products need rows of a multiple of this many values */
    uint32_t k_mmq8;     /* DT_MMQ8 / DT_MMQ8_RING products: the same */
} dev_type;

/* the row of type; one with a NULL suffix for a type the kernels do not take */
const dev_type *dev_type_of(uint32_t type);
/* 1 when the kernels take type and build the families fam (all of them) for it */
int dev_type_has(uint32_t type, uint32_t fam);

#endif
