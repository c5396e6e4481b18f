/* state.h — the recurrent state of hybrid models (the gated-delta layers of Qwen 3.5 / 3.6), beside the
 * paged KV cache: per layer that has state one device buffer of n_slots slots of FP32, one slot per engine
 * sequence (slot i belongs to sequence i), each the layer's whole state for that sequence (its layout is
 * the model's). Unlike KV blocks a slot cannot be shared: every step rewrites all of it, so a fork gets a
 * copy (queued, made at state_sync before the next forward). A sequence's state starts at zero: the
 * forward zeroes a slot whose run starts at position 0 (state_zero). A step that fails after its forward
 * was enqueued may have written some layers: its sequences are marked broken and refused until freed. */
#ifndef CLGEMMA_STATE_H
#define CLGEMMA_STATE_H

#include <stdint.h>

#include "runtime.h"

typedef struct state_copy { int32_t src, dst; } state_copy;

typedef struct state_store {
    uint32_t n_layer, n_slots;
    uint32_t *floats;         /* per layer floats of one slot (0: the layer has no state) */
    cl_mem *buf;              /* per layer [n_slots][floats] (NULL: none) */
    uint64_t per_seq;         /* bytes of one slot over all layers */
    uint64_t bytes;           /* device memory of all the buffers */
    state_copy *copies;       /* pending fork copies, in order (a source may be an earlier target) */
    uint32_t n_copies;
    uint8_t *broken;          /* per slot: a failed step may have written part of it */
} state_store;

/* bytes of one sequence's state: 4 x the sum of floats[0, n_layer) */
uint64_t state_per_seq(uint32_t n_layer, const uint32_t *floats);
/* a store of n_slots slots; -1 with err when a layer's buffer exceeds max_alloc or memory runs out */
int  state_create(state_store **out, cl_runtime *rt, uint32_t n_layer, const uint32_t *floats, uint32_t n_slots,
                  char *err, size_t errlen);
void state_destroy(state_store *s);
/* slot dst gets a copy of slot src at the next state_sync (dst broken where src is) */
void state_fork(state_store *s, int src, int dst);
/* slot given back or taken anew: no pending copy into it, not broken */
void state_release(state_store *s, int slot);
void state_mark_broken(state_store *s, int slot);
int  state_broken(const state_store *s, int slot);
/* enqueues the pending copies (in order) */
int  state_sync(state_store *s, cl_runtime *rt, char *err, size_t errlen);
/* enqueues zeroes over slot's state in every layer; 0, or a CL error code */
int  state_zero(const state_store *s, cl_command_queue q, int slot);

#endif
