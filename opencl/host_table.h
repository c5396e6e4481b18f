/* host_table.h — a weight matrix kept in host memory and read a few rows per forward: the Gemma 4
 * E-models' per-layer token embeddings (one row of n_layer x 256 values per token; 2.3-2.8 B values,
 * 2.5-3 GB at Q8_0, of which a step reads a row per token). Per forward the rows of the batch's
 * tokens are copied in their stored type into a device buffer of max_tok rows, which the embedding
 * kernels read as a matrix of the batch's rows (llama.cpp keeps this table on the host too). Rows
 * come from the mapped file; a synthetic model's (no data in its file) are made by the file's maker on
 * first use. */
#ifndef CLGEMMA_HOST_TABLE_H
#define CLGEMMA_HOST_TABLE_H

#include "gguf.h"
#include "ops.h"
#include "runtime.h"

typedef struct host_table {
    const gguf_tensor *t;
    size_t row_bytes;
    uint32_t rows;
    const uint8_t *data;      /* the rows in the mapped file, or NULL: made on first use into made */
    gguf_bytes_fn make;       /* what makes them then */
    uint8_t *made, *have;     /* synthetic: the table (pages committed as rows are made), a bit per row made */
    size_t made_bytes;
    cl_mem pinned;            /* host staging of max_tok rows, page-locked where the driver can (the
                               * upload is then one DMA), mapped at stage for the table's life */
    uint8_t *stage;
    cl_mem dev, iota;         /* device staging of max_tok rows; the ids 0 .. max_tok - 1 */
    uint32_t max_tok;
    cl_command_queue q;       /* the queue the staging is mapped on */
    cl_event ev;              /* the last upload: stage may be rewritten once it completed */
} host_table;

/* make: the maker of t's rows where t has no data (NULL: t must have its data) */
int  host_table_open(host_table *h, const gguf_tensor *t, gguf_bytes_fn make, char *err, size_t errlen);
/* staging for forwards of up to max_tok tokens */
int  host_table_stage(host_table *h, cl_runtime *rt, uint32_t max_tok, char *err, size_t errlen);
/* rows ids[0 .. n) to the device (enqueued, not waited for): *w becomes the matrix of those n rows
 * and *idx the ids 0 .. n - 1 into it, for op_embed */
int  host_table_gather(host_table *h, cl_runtime *rt, const int32_t *ids, uint32_t n, weight *w, cl_mem *idx,
                       char *err, size_t errlen);
void host_table_close(host_table *h);

#endif
