/* state.h — the recurrent state of hybrid models (the gated-delta layers of Qwen 3.5 / 3.6), beside the
 * paged KV cache: per layer that has state one device buffer of n_slots slots of FP32, one slot per engine
 * sequence (slot i belongs to sequence i), each the layer's whole state for that sequence (its layout is
 * the model's). Unlike KV blocks a slot cannot be shared: every step rewrites all of it, so a fork gets a
 * copy (queued, made at state_sync before the next forward). A sequence's state starts at zero: the
 * forward zeroes a slot whose run starts at position 0 (state_zero). A step that fails after its forward
 * was enqueued may have written some layers: its sequences are marked broken and refused until freed.
 *
 * Checkpoints (speculative rollback, docs/design-qwen35.md 3.6): a pool of n_ck slots after the sequences'
 * (n_seq + j: checkpoint j). A step's verification items (a draft of 2 .. STATE_CK_ROWS tokens) take one each
 * while they last (state_checkpoint): their slot is copied to it at state_sync before the forward, and the
 * forward keeps those tokens' replay rows (rows[l], the inputs of the layer's recurrence the model names: for
 * the gated-delta layers the pre-conv projections and the gates' raw inputs). Going back to a position within
 * the step is the checkpoint copied back (state_restore) and the kept tokens' rows replayed (model_replay).
 * Checkpoints last until the next step begins (state_step_begin): a step is cut back before the next.
 *
 * Snapshots (the prefix cache, design 3.5): a pool of n_snap slots after the checkpoints, each a sequence's
 * state at a block boundary, owned by the prefix entry of the block ending there (kv.c); taken free, else
 * least recently used; copied into a new sequence that starts on that prefix (state_from_snapshot). */
#ifndef CLGEMMA_STATE_H
#define CLGEMMA_STATE_H

#include <stdint.h>

#include "runtime.h"

#define STATE_CK_ROWS 17 /* tokens of a step a checkpoint can replay: a verification's (SPEC_MAX_DRAFT + 1) */

typedef struct state_copy { int32_t src, dst; } state_copy;

typedef struct state_store {
    uint32_t n_layer, n_slots;
    uint32_t n_seq, n_ck;     /* sequence slots, then checkpoint slots, then n_snap snapshot slots */
    uint32_t n_snap;
    uint32_t *floats;         /* per layer floats of one slot (0: the layer has no state) */
    cl_mem *buf;              /* per layer [n_slots][floats] (NULL: none) */
    uint64_t per_seq;         /* bytes of one slot over all layers */
    uint64_t bytes;           /* device memory of all the buffers */
    state_copy *copies;       /* pending fork copies, in order (a source may be an earlier target) */
    uint32_t n_copies;
    uint8_t *broken;          /* per slot: a failed step may have written part of it */
    /* checkpoints (n_ck 0: none) */
    uint32_t *row_floats;     /* per layer floats of one token's replay row (0: the layer has no state) */
    cl_mem *rows;             /* per layer [n_ck][STATE_CK_ROWS][row_floats] */
    uint64_t ck_bytes;        /* device memory of one checkpoint: a slot and its rows */
    int32_t *ck_of;           /* per sequence: its checkpoint this step, -1: none */
    int32_t *ck_pos;          /* per checkpoint: the position it holds the state at */
    int32_t *ck_len;          /* per checkpoint: tokens from ck_pos on whose replay rows are kept */
    uint32_t ck_used;         /* checkpoints taken this step */
    int32_t *snap_owner;      /* per snapshot: its owner's id (a prefix entry), -1: free */
    uint64_t *snap_used;      /* per snapshot: when last taken or read (snap_tick), the least recent goes first */
    uint64_t snap_tick;
} state_store;

/* bytes of one sequence's state: 4 x the sum of floats[0, n_layer) */
uint64_t state_per_seq(uint32_t n_layer, const uint32_t *floats);
/* bytes of one checkpoint: a state and STATE_CK_ROWS replay rows of rows[l] floats per layer with a state */
uint64_t state_ck_bytes(uint32_t n_layer, const uint32_t *floats, const uint32_t *rows);
/* a store of n_seq sequence slots, n_ck checkpoints (rows: per layer floats of a replay row; NULL with n_ck 0)
 * and n_snap snapshots; -1 with err when a layer's buffer exceeds max_alloc or memory runs out */
int  state_create(state_store **out, cl_runtime *rt, uint32_t n_layer, const uint32_t *floats, const uint32_t *rows,
                  uint32_t n_seq, uint32_t n_ck, uint32_t n_snap, char *err, size_t errlen);
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
/* a step begins: every checkpoint is free again (the last step can no longer be cut back) */
void state_step_begin(state_store *s);
/* seq is about to take n tokens at position pos: with 2 <= n <= STATE_CK_ROWS and a checkpoint free, its slot
 * is copied to it at the next state_sync and the forward keeps the rows; 1 when taken, else 0 */
int  state_checkpoint(state_store *s, int seq, int32_t pos, int32_t n);
/* seq's state back at its checkpoint (copied back, or zeroed at position 0) for a replay of the first n kept
 * rows to go on from; -1 with err when it has no checkpoint holding n rows (or a copy fails) */
int  state_restore(state_store *s, cl_runtime *rt, int seq, int32_t n, char *err, size_t errlen);
/* a snapshot of seq's slot for owner (copied at the next state_sync): a free one, else the least recently used,
 * whose owner goes to *evicted (-1: none); -1 without snapshots */
int  state_snapshot(state_store *s, int seq, int32_t owner, int32_t *evicted);
void state_snapshot_drop(state_store *s, int snap);
/* seq's slot gets snapshot snap's state at the next state_sync */
void state_from_snapshot(state_store *s, int snap, int seq);

#endif
